// Where a system prompt section's presence or placement differs from OpenClaw 2026.6.10's
// because clawbridge follows the seed page: the deviation id for each (deviations.json), shared
// by the compiled-function suite (run.mjs) and the live lane (scripts/live-lane.mjs).
export const SECTION_DEVIATIONS = {
  "## Assistant Output Directives": { placement: "seed-dynamic-suffix" },
  "## Silent Replies": { placement: "seed-dynamic-suffix" },
  "## Heartbeats": { presence: "seed-heartbeats-section", placement: "seed-dynamic-suffix" },
  "# Dynamic Project Context": { presence: "seed-dynamic-project-context" },
  "## OpenClaw Self-Update": { presence: "seed-self-update-section" },
  "## Group Chat Context": { placement: "seed-dynamic-suffix" },
  "## Messaging": { placement: "seed-dynamic-suffix" },
};
