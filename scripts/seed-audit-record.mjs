// scripts/seed-audit's helper (Node, no packages).
//
//   node seed-audit-record.mjs --scrub SRC DST FROM=TO...
//     Copy what `clawbridge audit` reads of a transcript folder (connection.jsonl, the thread
//     files, model-requests/<thread>/turn-NN/model-request*.json) and the model's answers beside
//     them (model-response*.json, for a replay's model side) from SRC to DST, with each FROM
//     path replaced by TO, the moments and durations of the run taken out (TIMES), and every
//     UUID renamed `id-N` in the order first seen: the committed transcript names no machine,
//     moment or random id.
//
//   node seed-audit-record.mjs VERSION DIR NAME|KEY|FLAGS|MESSAGE...
//     Read DIR/NAME.audit.json of each scenario and write DIR/VERSION.json (the scenarios with
//     their audits, keys sorted) and DIR/VERSION.md (a file-by-scenario verdict table, then each
//     scenario's rows).
import fs from "node:fs";
import path from "node:path";

const RESERVED = new Set(["connection", "conformance", "audit"]);
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
// The moments and durations of one run (what Codex and OpenClaw stamp on what they send).
const TIMES = new Set([
  "atMs", "emittedAtMs", "startedAt", "startedAtMs", "completedAt", "completedAtMs",
  "createdAt", "updatedAt", "create_time", "durationMs", "timeMs", "recencyAt",
  "sectionEnteredAt", "expiresAt", "retirementAt", "anchorMs", "firstByteMs", "totalMs",
]);
const timeless = (value) => {
  if (Array.isArray(value)) return value.map(timeless);
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([key, inner]) => !(TIMES.has(key) && typeof inner !== "object"))
        .map(([key, inner]) => [key, timeless(inner)]),
    );
  }
  return value;
};

function scrub([src, dst, ...pairs]) {
  const replacements = pairs.map((pair) => {
    const at = pair.indexOf("=");
    return [pair.slice(0, at), pair.slice(at + 1)];
  });
  // Longest first: a path inside another is replaced before it.
  replacements.sort((a, b) => b[0].length - a[0].length);
  const ids = new Map();
  const renamed = (text) =>
    text.replace(UUID, (uuid) => {
      if (!ids.has(uuid)) ids.set(uuid, `id-${ids.size + 1}`);
      return ids.get(uuid);
    });
  const clean = (text) => {
    for (const [from, to] of replacements) text = text.split(from).join(to);
    return renamed(text);
  };
  const lines = (text) =>
    text
      .split("\n")
      .filter((line) => line.trim() !== "")
      .map((line) => {
        return clean(JSON.stringify(timeless(JSON.parse(line))));
      })
      .join("\n") + "\n";
  const files = [];
  if (fs.existsSync(path.join(src, "connection.jsonl"))) files.push("connection.jsonl");
  // Thread files in the order their threads were opened (their first entry's time), so the
  // ids are numbered as the session went.
  const threads = fs
    .readdirSync(src)
    .filter((name) => name.endsWith(".jsonl") && !RESERVED.has(name.slice(0, -6)))
    .map((name) => {
      const first = fs.readFileSync(path.join(src, name), "utf8").split("\n")[0];
      let at = 0;
      try {
        at = JSON.parse(first).atMs ?? 0;
      } catch {}
      return [at, name];
    })
    .sort((a, b) => a[0] - b[0] || a[1].localeCompare(b[1]))
    .map(([, name]) => name);
  files.push(...threads);
  fs.rmSync(dst, { recursive: true, force: true });
  fs.mkdirSync(dst, { recursive: true });
  for (const name of files) {
    const text = lines(fs.readFileSync(path.join(src, name), "utf8"));
    fs.writeFileSync(path.join(dst, clean(name)), text);
  }
  const requests = path.join(src, "model-requests");
  if (!fs.existsSync(requests)) return;
  for (const thread of threads.map((name) => name.slice(0, -6))) {
    const folder = path.join(requests, thread);
    if (!fs.existsSync(folder)) continue;
    for (const turn of fs.readdirSync(folder).sort()) {
      if (!/^turn-\d+$/.test(turn)) continue;
      for (const file of fs.readdirSync(path.join(folder, turn)).sort()) {
        // Each model request and, for a replay's model side, the answer it got.
        if (!/^model-(request|response)(\.\d+)?\.json$/.test(file)) continue;
        const target = path.join(dst, "model-requests", clean(thread), turn);
        fs.mkdirSync(target, { recursive: true });
        const request = timeless(JSON.parse(fs.readFileSync(path.join(folder, turn, file), "utf8")));
        fs.writeFileSync(path.join(target, file), clean(JSON.stringify(request, null, 1)) + "\n");
      }
    }
  }
}

function sorted(value) {
  if (Array.isArray(value)) return value.map(sorted);
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, sorted(value[key])]),
    );
  }
  return value;
}

const LAYER = {
  threadDeveloperInstructions: "thread developer instructions",
  threadBaseInstructions: "thread base instructions",
  collaborationInstructions: "collaboration instructions",
  additionalContext: "additionalContext",
  turnInput: "turn input",
  leftToCodex: "left to Codex",
  projectContext: "Project Context",
  dynamicProjectContext: "Dynamic Project Context",
};
const VERDICT = {
  asSpec: "as spec",
  moved: "moved",
  missing: "missing",
  truncated: "truncated",
  extra: "extra",
};
const landings = (list) =>
  list.length === 0
    ? "nowhere"
    : list
        .map((landing) => {
          const layer = LAYER[landing.layer] ?? landing.layer;
          return landing.how && landing.how !== "whole" ? `${layer} (${landing.how})` : layer;
        })
        .join(", ");

function record([version, dir, ...scenarios]) {
  // `VERSION-route-spec`: the same scenarios with clawbridge routing the files (`--route spec`).
  const routed = version.endsWith("-route-spec");
  const openclaw = routed ? version.slice(0, -"-route-spec".length) : version;
  // SEED_AUDIT_ROUTE=embedded: OpenClaw's own embedded runtime (scripts/live-lane), no Codex.
  const embedded = process.env.SEED_AUDIT_ROUTE === "embedded";
  const out = { openclaw, route: embedded ? "embedded" : routed ? "spec" : "as-sent", workspace: "fixtures/workspace", scenarios: [] };
  for (const scenario of scenarios) {
    const [name, sessionKey, flags, message] = scenario.split("|");
    const audit = JSON.parse(fs.readFileSync(path.join(dir, `${name}.audit.json`), "utf8"));
    out.scenarios.push({
      name,
      sessionKey,
      trigger: flags === "--heartbeat" ? "heartbeat (a system event wakes the main session)" : "the message",
      message,
      audit,
    });
  }
  fs.writeFileSync(path.join(dir, `${version}.json`), JSON.stringify(sorted(out), null, 2) + "\n");

  // Columns: each audited turn of each scenario (the first turn of each thread).
  const columns = [];
  for (const scenario of out.scenarios) {
    const threads = scenario.audit.threads.filter((thread) => thread.turns.length > 0);
    threads.forEach((thread, index) => {
      const label = threads.length > 1 ? `${scenario.name} (thread ${index + 1})` : scenario.name;
      columns.push({ label, rows: thread.turns[0].rows });
    });
  }
  const files = [];
  for (const column of columns) for (const row of column.rows) if (!files.includes(row.file)) files.push(row.file);
  const md = [];
  if (routed) {
    md.push(`# Seed audit: OpenClaw ${openclaw} through \`clawbridge app-server --route spec\``);
    md.push("");
    md.push(
      "Where each workspace file reached Codex when clawbridge routed the real OpenClaw's requests " +
        "(`app-server --route spec`), against where the seed's system-prompt page puts it, on " +
        "`fixtures/workspace`. Recorded by `scripts/seed-audit --route spec " +
        openclaw +
        "` (transcripts in `" +
        version +
        "/`: each request as OpenClaw sent it, then as clawbridge routed it), checked by " +
        "`scripts/seed-audit --check`. The same scenarios as sent: [" +
        openclaw +
        ".md](" +
        openclaw +
        ".md). The verdicts and their meaning: [docs/audit.md](../../docs/audit.md).",
    );
  } else if (embedded) {
    md.push(`# Seed audit: OpenClaw ${version}, its own embedded runtime`);
    md.push("");
    md.push(
      "Where the real OpenClaw put each workspace file in the system prompt its own embedded runtime " +
        "sent a model (it predates its Codex plugin), against where the spec's system-prompt layers put " +
        "it (clawbridge's own prompt for the same run), on `fixtures/workspace`. Recorded by " +
        "`scripts/seed-audit --route embedded " +
        version +
        "` (the live lane's route: first model requests in `" +
        version +
        "/`), checked by `scripts/seed-audit --check`. The verdicts and their meaning: " +
        "[docs/audit.md](../../docs/audit.md).",
    );
  } else {
    md.push(`# Seed audit: OpenClaw ${version}`);
    md.push("");
    md.push(
      "Where the real OpenClaw put each workspace file, against where the seed's system-prompt page " +
        "puts it, on `fixtures/workspace`. Recorded by `scripts/seed-audit " +
        version +
        "` (transcripts in `" +
        version +
        "/`), checked by `scripts/seed-audit --check`. The verdicts and their meaning: " +
        "[docs/audit.md](../../docs/audit.md).",
    );
  }
  md.push("");
  md.push(`| file | ${columns.map((column) => column.label).join(" | ")} |`);
  md.push(`|---|${columns.map(() => "---").join("|")}|`);
  for (const file of files) {
    const cells = columns.map((column) => {
      const row = column.rows.find((row) => row.file === file);
      if (!row) return "-";
      const verdict = VERDICT[row.verdict] ?? row.verdict;
      return row.verdict === "asSpec" ? verdict : `**${verdict}**: ${landings(row.openclaw)}`;
    });
    md.push(`| ${file} | ${cells.join(" | ")} |`);
  }
  for (const scenario of out.scenarios) {
    md.push("");
    md.push(`## ${scenario.name}`);
    md.push("");
    md.push(`Session key \`${scenario.sessionKey}\`; trigger: ${scenario.trigger}; message: "${scenario.message}".`);
    const counts = Object.entries(scenario.audit.verdicts)
      .map(([verdict, count]) => `${count} ${VERDICT[verdict] ?? verdict}`)
      .join(", ");
    md.push(`Rows: ${counts}.`);
    for (const thread of scenario.audit.threads) {
      md.push("");
      md.push(`Thread \`${thread.thread}\`${thread.skipped ? ` (not audited: ${thread.skipped})` : ""}:`);
      for (const turn of thread.turns) {
        md.push("");
        md.push(`Turn ${turn.turn}. OpenClaw also sent: ${turn.notes.length ? turn.notes.join("; ") : "nothing else"}.`);
        if (turn.route === "spec") {
          md.push("");
          md.push(`Routed by clawbridge: ${turn.routed.length ? turn.routed.join("; ") : "nothing to move"}.`);
        }
        for (const flag of turn.flags ?? []) {
          md.push("");
          md.push(`**Flagged**: ${flag}.`);
        }
        md.push("");
        md.push("| file | spec | OpenClaw | model | verdict |");
        md.push("|---|---|---|---|---|");
        for (const row of turn.rows) {
          md.push(
            `| ${row.file} | ${landings(row.spec)} | ${landings(row.openclaw)} | ${row.model ?? "-"} | ${VERDICT[row.verdict] ?? row.verdict} |`,
          );
        }
      }
    }
  }
  fs.writeFileSync(path.join(dir, `${version}.md`), md.join("\n") + "\n");
}

const args = process.argv.slice(2);
if (args[0] === "--scrub") scrub(args.slice(1));
else record(args);
