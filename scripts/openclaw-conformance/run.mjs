// Differential conformance: clawbridge against the real OpenClaw, on workspaces generated here.
//
// Usage (scripts/conformance runs it): node run.mjs --openclaw <node_modules/openclaw> --clawbridge <binary> [--seed N] [--keep]
//
// OpenClaw's own compiled functions (found through openclaw-exports.json) and clawbridge's CLI get
// the same inputs; their answers are reduced to comparable facts (which files are injected, the
// kept head and tail, skills entries and order, section order and boundary placement per mode,
// the Codex surface of each file) and compared. A difference is allowed only when it is one of the
// intended deviations in deviations.json; anything else fails. Nothing of OpenClaw's code is
// copied here: it is imported from the installed package.

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { loadOpenClaw } from "./openclaw.mjs";
import { SECTION_DEVIATIONS } from "./sections.mjs";

const here = path.dirname(new URL(import.meta.url).pathname);
const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, index, all) => {
    if (arg.startsWith("--")) pairs.push([arg.slice(2), all[index + 1]?.startsWith("--") ? true : all[index + 1] ?? true]);
    return pairs;
  }, []),
);
const openclawDir = path.resolve(args.openclaw ?? "");
const clawbridgeBin = path.resolve(args.clawbridge ?? "");
const seed = Number(args.seed ?? 20260610);

// ---------------------------------------------------------------------------------------------
// Sandbox: OpenClaw and clawbridge both read HOME, the state dir and the bundled skills folder.
// Point all of them at empty throwaway folders before OpenClaw is imported.
// ---------------------------------------------------------------------------------------------
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "clawbridge-conformance-"));
const sandboxEnv = {
  HOME: path.join(tmp, "home"),
  OPENCLAW_STATE_DIR: path.join(tmp, "state"),
  OPENCLAW_BUNDLED_SKILLS_DIR: path.join(tmp, "bundled-skills"),
  OPENCLAW_TEST_FAST: "1",
  OPENCLAW_LOG_LEVEL: "silent",
  TZ: "UTC",
};
for (const [key, value] of Object.entries(sandboxEnv)) {
  if (!["OPENCLAW_TEST_FAST", "OPENCLAW_LOG_LEVEL", "TZ"].includes(key)) fs.mkdirSync(value, { recursive: true });
  process.env[key] = value;
}

// ---------------------------------------------------------------------------------------------
// OpenClaw's functions and constants, located by distinctive strings (openclaw-exports.json).
// ---------------------------------------------------------------------------------------------
const { oc, constants, mapping, spec } = await loadOpenClaw(openclawDir);

// OpenClaw's Memory Recall section is its memory plugin's (memory-core). Its own register step
// runs here against a stand-in plugin API that passes only the memory capability on to
// OpenClaw's registry (every other registration is dropped), so a bare renderer call builds the
// section as a gateway with the plugin does.
{
  const ignored = new Proxy(function () {}, { get: () => ignored, apply: () => ignored });
  const api = new Proxy({}, {
    get: (_, name) => (name === "registerMemoryCapability" ? (capability) => oc.registerMemoryCapability("memory-core", capability) : ignored),
  });
  const plugin = await import(path.join(openclawDir, "dist", "extensions", "memory-core", "index.js"));
  plugin.default.register(api);
  mapping.memoryCore = "dist/extensions/memory-core/index.js (register, memory capability only)";
}

// ---------------------------------------------------------------------------------------------
// Deterministic generators.
// ---------------------------------------------------------------------------------------------
function prng(state) {
  return () => {
    state |= 0;
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = prng(seed);
const pick = (items) => items[Math.floor(random() * items.length)];
const int = (low, high) => low + Math.floor(random() * (high - low + 1));
// A word in a random mix of cases, as people type names and values.
const casing = (word) => [...word].map((c) => (random() < 0.5 ? c.toUpperCase() : c)).join("");

const ALPHABETS = {
  ascii: "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJ 0123456789.,;:-",
  astral: "a😀b🎉c𝄞d",
  cjk: "漢字かなカナ한글",
  crlf: "line\r\n",
};
function text(kind, units) {
  if (kind === "empty") return "";
  if (kind === "blank") return " \n\t \n".repeat(Math.max(1, Math.floor(units / 4)));
  const alphabet = [...(ALPHABETS[kind] ?? ALPHABETS.ascii)];
  let out = "";
  while (out.length < units) out += pick(alphabet);
  // Never a heading at line start: the clawbridge side is read back from rendered text.
  return out.replace(/\n#/g, "\n-");
}

let caseCounter = 0;
function workspace(files) {
  const dir = path.join(tmp, "cases", `ws-${String(++caseCounter).padStart(3, "0")}`);
  fs.mkdirSync(dir, { recursive: true });
  for (const [relative, content] of Object.entries(files)) {
    const file = path.join(dir, relative);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, content);
  }
  return dir;
}

// ---------------------------------------------------------------------------------------------
// clawbridge side.
// ---------------------------------------------------------------------------------------------
function clawbridge(command, document, extra = []) {
  const file = path.join(tmp, "cases", `run-${++caseCounter}.json`);
  fs.writeFileSync(file, JSON.stringify(document));
  const out = execFileSync(clawbridgeBin, [command, file, "--state-dir", path.join(tmp, "cb-state"), ...extra], {
    env: { ...process.env, ...sandboxEnv, CLAWBRIDGE_LOG: "error" },
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });
  return command === "prompt" && !extra.includes("--split") ? out : JSON.parse(out);
}

/** `## <path>` blocks of a rendered Project Context section. */
function projectFiles(section, heading) {
  const start = section.indexOf(`${heading}\n`);
  if (start < 0) return [];
  const body = section.slice(start);
  const files = [];
  const re = /^## (\/[^\n]*)\n\n/gm;
  const marks = [...body.matchAll(re)];
  marks.forEach((mark, index) => {
    const from = mark.index + mark[0].length;
    let to = index + 1 < marks.length ? marks[index + 1].index - 2 : body.length;
    const next = body.slice(from, to).search(/\n\n(## [A-Z]|# |<!-- OPENCLAW)/);
    if (index + 1 >= marks.length && next >= 0) to = from + next;
    files.push({ path: mark[1], content: body.slice(from, to) });
  });
  return files;
}

// ---------------------------------------------------------------------------------------------
// Comparison bookkeeping.
// ---------------------------------------------------------------------------------------------
const deviations = JSON.parse(fs.readFileSync(path.join(here, "deviations.json"), "utf8")).deviations;
const deviationIds = new Set(deviations.map((deviation) => deviation.id));
const tally = { checks: 0, agree: 0, deviations: {}, failures: [] };
function check(group, what, same, deviation) {
  tally.checks += 1;
  if (same) {
    tally.agree += 1;
    return;
  }
  if (deviation && deviationIds.has(deviation)) {
    tally.deviations[deviation] = (tally.deviations[deviation] ?? 0) + 1;
    return;
  }
  tally.failures.push(`${group}: ${what}`);
}
const len16 = (value) => value.length;
const equal = (a, b) => JSON.stringify(a) === JSON.stringify(b);

// ---------------------------------------------------------------------------------------------
// 1. Bootstrap loading, filters and truncation.
// ---------------------------------------------------------------------------------------------
const NAMES = ["AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "HEARTBEAT.md", "BOOTSTRAP.md", "MEMORY.md"];
const OUR_MARKER = /\n?\[truncated ([^:\]]+): kept (\d+)\+(\d+) of (\d+) chars; read [^\]]+ for the full text\]\n?|\[truncated (\S+) (\d+)\+(\d+)\/(\d+)\]/;
const THEIR_MARKER = /\n?\[\.\.\.truncated, read [^\n]+ for full content\.\.\.\]\n…\(truncated ([^:]+): kept (\d+)\+(\d+) chars of (\d+)\)…\n?|\[…truncated (\d+)\+(\d+)\/(\d+)\]/;

function splitTruncated(content, marker) {
  const match = content.match(marker);
  if (!match) return null;
  return { head: content.slice(0, match.index), tail: content.slice(match.index + match[0].length), marker: match[0] };
}

function bootstrapCases() {
  const cases = [];
  const kinds = ["ascii", "astral", "cjk", "crlf"];
  // Sizes around the per-file cap and the total budget.
  for (const size of [0, 1, 19_999, 20_000, 20_001, 20_010, 25_000, 30_001]) {
    for (const kind of kinds) cases.push({ files: { "SOUL.md": text(kind, size) } });
  }
  // Small caps, where the compact marker and hard cuts appear.
  for (const cap of [60, 100, 120, 200, 500]) {
    cases.push({ files: { "MEMORY.md": text(pick(kinds), 1000) }, maxChars: cap });
  }
  // Total budget across files; empty and whitespace-only files never count.
  for (let index = 0; index < 12; index += 1) {
    const files = {};
    for (const name of NAMES) {
      if (name === "BOOTSTRAP.md") continue;
      const roll = random();
      if (roll < 0.15) continue;
      files[name] = roll < 0.25 ? text("blank", 8) : roll < 0.3 ? "" : text(pick(kinds), int(10, 24_000));
    }
    cases.push({ files, totalMaxChars: pick([100, 1000, 30_000, 60_000]), maxChars: pick([20_000, 8000, 150]) });
  }
  // BOM kept, trailing BOM/NBSP removed; setup state; subagent sessions.
  cases.push({ files: { "SOUL.md": "\uFEFFBe warm.\uFEFF \u00A0\n", "IDENTITY.md": "Name: Claw\r\n\r\n" } });
  const setup = { "AGENTS.md": "a", "SOUL.md": "s", "BOOTSTRAP.md": "Set me up." };
  cases.push({ files: setup });
  cases.push({ files: { ...setup, "openclaw-workspace-state.json": '{"version":1,"setupCompletedAt":"2026-01-01T00:00:00Z"}' } });
  cases.push({ files: { ...setup, ".openclaw/workspace-state.json": '{"onboardingCompletedAt":"2026-01-01T00:00:00Z"}' } });
  cases.push({ files: { ...setup, "openclaw-workspace-state.json": '{"version":1,"bootstrapSeededAt":"2026-01-01T00:00:00Z"}', ".openclaw/workspace-state.json": '{"setupCompletedAt":"2026-01-01T00:00:00Z"}' } });
  cases.push({ files: { ...setup, "MEMORY.md": "Remember the milk." } });
  cases.push({ files: { "AGENTS.md": "a", "TOOLS.md": "t", "SOUL.md": "s", "MEMORY.md": "m" }, sessionKey: "agent:main:subagent:worker" });
  cases.push({ files: { "AGENTS.md": "a", "HEARTBEAT.md": "Check mail." }, config: { agents: { defaults: { heartbeat: { every: "0m" } } } } });
  cases.push({ files: { "AGENTS.md": "a", "HEARTBEAT.md": "Check mail." }, config: { agents: { list: [{ id: "main", heartbeat: { includeSystemPromptSection: false } }] } } });
  cases.push({ files: { "AGENTS.md": "a", "memory.md": "lower-case name is never loaded" } });
  cases.push({ files: { "AGENTS.md": "a", "SOUL.md": "s" }, sessionKey: "agent:main:cron:nightly" });
  // Session keys as they come: any casing, padded, the kind at the start of the rest or deeper
  // (only the start makes a subagent or cron session).
  const keys = ["agent:main:subagent:worker", "agent:main:telegram:subagent:x", "subagent:helper", "agent:main:main", "agent:main:discord:group:42", "agent:main:cron:nightly"];
  for (let round = 0; round < 8; round += 1) {
    const key = [...pick(keys)].map((c) => (random() < 0.4 ? c.toUpperCase() : c)).join("");
    cases.push({ files: { "AGENTS.md": "a", "TOOLS.md": "t", "SOUL.md": "s", "MEMORY.md": "m" }, sessionKey: random() < 0.3 ? `  ${key} ` : key });
  }
  // The session filter, the lightweight context and the run kind together, in every combination
  // (heartbeats configured, so HEARTBEAT.md is a candidate).
  for (const sessionKey of ["agent:main:main", "agent:main:subagent:w", "agent:main:cron:nightly"]) {
    for (const lightweight of [false, true]) {
      for (const trigger of ["user", "heartbeat", "cron"]) {
        cases.push({
          files: { "AGENTS.md": "a", "TOOLS.md": "t", "SOUL.md": "s", "HEARTBEAT.md": "Check mail.", "MEMORY.md": "m" },
          config: { agents: { defaults: { heartbeat: { every: "30m" } } } },
          sessionKey, lightweight, trigger,
        });
      }
    }
  }
  return cases;
}

async function compareBootstrap(testCase, index) {
  const dir = workspace(testCase.files);
  const group = `bootstrap#${index} (${path.basename(dir)})`;
  const defaults = {};
  if (testCase.maxChars) defaults.bootstrapMaxChars = testCase.maxChars;
  if (testCase.totalMaxChars) defaults.bootstrapTotalMaxChars = testCase.totalMaxChars;
  const config = { ...(testCase.config ?? {}) };
  config.agents = { ...(config.agents ?? {}), defaults: { ...(config.agents?.defaults ?? {}), ...defaults } };
  const sessionKey = testCase.sessionKey ?? "agent:main:main";
  const runKind = { heartbeat: "heartbeat", cron: "cron" }[testCase.trigger] ?? "default";
  const theirs = (await oc.resolveBootstrapContextForRun({
    workspaceDir: dir, config, sessionKey, agentId: "main", warn: () => {},
    contextMode: testCase.lightweight ? "lightweight" : "full", runKind,
  })).contextFiles;
  const filters = { ...(testCase.lightweight ? { lightweight: true } : {}), ...(testCase.trigger ? { trigger: testCase.trigger } : {}) };
  const prompt = clawbridge("prompt", { workspace: dir, harness: "embedded", sessionKey, config, ...filters }, ["--split"]);
  const ours = [...projectFiles(prompt.stablePrefix, "# Project Context"), ...projectFiles(prompt.dynamicSuffix, "# Dynamic Project Context")];
  const order = (file) => NAMES.indexOf(path.basename(file.path));
  ours.sort((a, b) => order(a) - order(b));
  // An absent BOOTSTRAP.md: OpenClaw prints a missing marker while setup is unrecorded.
  const absentBootstrap = !("BOOTSTRAP.md" in testCase.files);
  const theirNames = theirs
    .filter((file) => !(absentBootstrap && path.basename(file.path) === "BOOTSTRAP.md" && file.content.startsWith("[MISSING]")))
    .map((file) => path.basename(file.path));
  if (absentBootstrap && theirs.some((file) => path.basename(file.path) === "BOOTSTRAP.md")) {
    check(group, "marker for an absent BOOTSTRAP.md", false, "absent-bootstrap-is-complete");
  }
  const ourNames = ours.map((file) => path.basename(file.path));
  const cronSession = sessionKey.toLowerCase().includes(":cron:");
  // OpenClaw's AGENTS.md digest spends a different share of the total budget than a plain cut.
  const agentsDigest = theirs.some((file) => path.basename(file.path) === "AGENTS.md" && /kept \d+\+policy/.test(file.content ?? ""));
  check(group, `injected files ${JSON.stringify(ourNames)} vs ${JSON.stringify(theirNames)}`, equal(ourNames, theirNames),
    cronSession ? "cron-sessions-full-list"
      : agentsDigest ? "no-agents-digest"
      : testCase.files["MEMORY.md"] && testCase.files["BOOTSTRAP.md"] ? "user-content-completes-setup" : undefined);
  // Walk both lists in load order: under the total budget, what one side spends on its markers
  // (or on a file only it injects) the other has left for later files.
  const budgetShift = { value: 0 };
  for (const name of NAMES) {
    const ourFile = ours.find((file) => path.basename(file.path) === name);
    const theirFile = theirs.find((file) => path.basename(file.path) === name);
    if (ourFile && theirFile) {
      compareFitted(`${group} ${name}`, name, ourFile.content, theirFile, testCase.files[name] ?? "", budgetShift);
    }
    budgetShift.value += len16(theirFile?.content ?? "") - len16(ourFile?.content ?? "");
    // OpenClaw's marker for an absent BOOTSTRAP.md (which clawbridge does not inject: a listed
    // deviation) spends total budget in proportion to the workspace's path.
    if (name === "BOOTSTRAP.md" && !ourFile && (theirFile?.content ?? "").startsWith("[MISSING]")) {
      budgetShift.absentBootstrap = true;
    }
  }
}

function compareFitted(group, name, ourContent, theirFile, original, budgetShift) {
  const theirContent = theirFile.content ?? "";
  if (theirFile.missing || theirContent.startsWith("[MISSING]")) {
    check(group, "missing marker", ourContent.startsWith("[missing:"), "marker-wording");
    return;
  }
  const ourCut = splitTruncated(ourContent, OUR_MARKER);
  const theirCut = splitTruncated(theirContent, THEIR_MARKER);
  check(group, `truncated ${Boolean(ourCut)} vs ${Boolean(theirCut)}`, Boolean(ourCut) === Boolean(theirCut),
    name === "AGENTS.md" ? "no-agents-digest" : undefined);
  if (!ourCut || !theirCut) {
    if (!ourCut && !theirCut) {
      // Untruncated (or hard-cut) text: identical, apart from cuts that would split a character.
      const same = ourContent === theirContent;
      const surrogate = !same && Math.abs(len16(ourContent) - len16(theirContent)) <= 1 && theirContent.startsWith(ourContent.replace(/…$/, ""));
      const clampWording = !same && /^\[|^…/.test(theirContent) && len16(ourContent) === len16(theirContent);
      check(group, `content (${len16(ourContent)} vs ${len16(theirContent)} units)`, same,
        surrogate ? "surrogate-safe-cuts" : clampWording ? "marker-wording" : undefined);
    }
    return;
  }
  const trimmed = original.replace(/[\s\uFEFF\u00A0]+$/u, "");
  check(group, "head is a prefix of the file", trimmed.startsWith(ourCut.head.replace(/\n$/, "")));
  check(group, "tail is a suffix of the file", trimmed.endsWith(ourCut.tail.replace(/^\n/, "")));
  const ourKept = len16(ourCut.head) + len16(ourCut.tail);
  const theirKept = len16(theirCut.head) + len16(theirCut.tail);
  const markerDelta = len16(theirCut.marker) - len16(ourCut.marker);
  // Same characters kept once the marker wording is accounted for: our marker's length goes to
  // (or comes from) content, within the rounding of the 3:1 split and surrogate-safe cuts.
  // Per-file cap binding: the marker difference alone; total budget binding: plus what earlier
  // files' markers shifted.
  const drift = Math.min(
    Math.abs(ourKept - (theirKept + markerDelta)),
    Math.abs(ourKept - (theirKept + markerDelta + budgetShift.value)),
  );
  // Where OpenClaw spent total budget on its absent-BOOTSTRAP.md marker, the file can be bound by
  // its own cap on one side and by what is left of the total on the other: what clawbridge keeps
  // then lies between the two bindings (which binding wins moves with the workspace path's
  // length, the marker's), and the difference is that deviation's.
  const low = theirKept + markerDelta;
  const high = theirKept + markerDelta + budgetShift.value;
  const between = budgetShift.absentBootstrap && drift > 2
    && ourKept >= Math.min(low, high) - 2 && ourKept <= Math.max(low, high) + 2;
  check(group, `kept ${ourKept} vs ${theirKept} (marker delta ${markerDelta}, budget shift ${budgetShift.value})`, ourKept === theirKept,
    drift <= 2 ? "marker-wording" : between ? "absent-bootstrap-is-complete" : undefined);
  const head = len16(ourCut.head);
  const tail = len16(ourCut.tail);
  check(group, `head ${head} : tail ${tail} is 3:1`, tail === 0 || Math.abs(head - 0.75 * (head + tail)) <= 1.5);
}

// ---------------------------------------------------------------------------------------------
// 2. The skills prompt: entries, order, escaping, versions.
// ---------------------------------------------------------------------------------------------
function skillFile(name, description, options = {}) {
  const lines = ["---"];
  if (name !== undefined) lines.push(`name: ${name}`);
  lines.push(`description: ${JSON.stringify(description)}`);
  lines.push(...(options.extra ?? []));
  lines.push("---", "", `# ${name ?? "skill"}`, "", "Body.");
  const body = lines.join(options.crlf ? "\r\n" : "\n") + "\n";
  return options.bom ? `\uFEFF${body}` : body;
}

function skillCases() {
  const cases = [];
  const names = ["zoo", "apple", "Mango", "éclair", "eclairs", "Éclair-2", "b_1", "b-2", "b10", "b2", "日本", "Ωmega", "z9", "alpha.beta"];
  for (let round = 0; round < 6; round += 1) {
    const files = {};
    const count = int(3, 40);
    for (let index = 0; index < count; index += 1) {
      const base = `${pick(names)}-${index}`;
      const depth = int(0, 5);
      const folder = [...Array(depth)].map(() => pick(["group", "personal", "odd name", "ünï"])).join("/");
      const description = pick([
        "Get weather <data> & \"forecasts\" it's",
        `  padded ${base}  `,
        "multi\nline description",
        text("astral", 30),
      ]);
      files[path.join("skills", folder, base, "SKILL.md")] = skillFile(pick([base, undefined]) ?? base, description, { crlf: random() < 0.2, bom: random() < 0.1 });
    }
    cases.push({ files });
  }
  cases.push({ files: { "skills/a/b/c/d/e/six/SKILL.md": skillFile("six", "Deep."), "skills/a/b/c/d/e/f/seven/SKILL.md": skillFile("seven", "Deeper.") } });
  const big = skillFile("big", "Big.");
  cases.push({ files: { "skills/big/SKILL.md": big + "x".repeat(256_001 - big.length), "skills/small/SKILL.md": skillFile("small", "Small.") } });
  cases.push({ files: { "skills/nofront/SKILL.md": "# no frontmatter\n", "skills/nodesc/SKILL.md": "---\nname: nodesc\n---\n", "skills/ok/SKILL.md": skillFile(undefined, "Named after its folder.") } });
  // requires.config as people leave it: blank strings, empty, false, zero, unset (an unset
  // browser.enabled counts as true).
  for (let round = 0; round < 3; round += 1) {
    const files = {};
    const values = {};
    for (let index = 0; index < 8; index += 1) {
      const name = `needs-${round}-${index}`;
      const key = pick(["browser.enabled", `custom.flag${index}`]);
      files[path.join("skills", name, "SKILL.md")] = skillFile(name, `The ${name} skill.`, { extra: [`metadata: '{"openclaw": {"requires": {"config": ["${key}"]}}}'`] });
      const value = pick([" ", "", "on", true, false, 0, 1, undefined]);
      if (value !== undefined) {
        const [head, tail] = key.split(".");
        values[head] = { ...(values[head] ?? {}), [tail]: value };
      }
    }
    cases.push({ files, config: values });
  }
  // Gates as people write them: boolean strings in any case for disable-model-invocation, and
  // metadata as JSON5 with `os` as a list or a comma-separated string (the host is linux).
  for (let round = 0; round < 3; round += 1) {
    const files = {};
    for (let index = 0; index < int(6, 14); index += 1) {
      const name = `gate-${round}-${index}`;
      const extra = [];
      if (random() < 0.6) extra.push(`disable-model-invocation: ${casing(pick(["true", "yes", "on", "1", "false", "no", "off", "0"]))}`);
      if (random() < 0.6) {
        const os = pick([`["linux"]`, `["win32"]`, `"linux, darwin"`, `"win32,darwin"`, `" Linux "`]);
        extra.push(pick([`metadata: '{openclaw: {os: ${os}}}'`, `metadata: {"openclaw": {"os": ${os}}}`]));
      }
      files[path.join("skills", name, "SKILL.md")] = skillFile(name, `The ${name} skill.`, { extra });
    }
    cases.push({ files });
  }
  // Config values as people write them (issue 38, items 5-7): a skill's own env value or apiKey
  // of blanks, zero, false or empty; requires.config paths with empty segments, array indices
  // and `length`; skills.allowBundled entries padded, in another case, blank or not text.
  for (let round = 0; round < 4; round += 1) {
    const files = {};
    const entries = {};
    for (let index = 0; index < 6; index += 1) {
      const name = `env-${round}-${index}`;
      const variable = `CLAWBRIDGE_CONFORMANCE_UNSET_${round}_${index}`;
      const viaKey = random() < 0.5;
      const primary = viaKey ? pick([variable, ` ${variable}`, "OTHER_VAR"]) : undefined;
      const metadata = { openclaw: { requires: { env: [variable] }, ...(primary ? { primaryEnv: primary } : {}) } };
      files[path.join("skills", name, "SKILL.md")] = skillFile(name, `The ${name} skill.`, { extra: [`metadata: '${JSON.stringify(metadata)}'`] });
      const value = pick(["  ", "", "x", 0, 1, true, false, null, { source: "env", id: "K" }]);
      entries[name] = viaKey ? { apiKey: value } : { env: { [variable]: value } };
    }
    const paths = ["custom..flag", ".custom.flag", "custom.flag.", "custom.list.0", "custom.list.1", "custom.list.00", "custom.list.length", "custom.list.0.on", "custom.text.length"];
    for (const [index, key] of paths.entries()) {
      const name = `path-${round}-${index}`;
      files[path.join("skills", name, "SKILL.md")] = skillFile(name, `The ${name} skill.`, { extra: [`metadata: '{"openclaw": {"requires": {"config": ["${key}"]}}}'`] });
    }
    const custom = {
      flag: pick([true, false, " ", "on", 0, 1, null]),
      list: pick([[], ["x"], [0, "y"], [{ on: true }], [{ on: " " }]]),
      text: pick(["abc", ""]),
    };
    const bundled = {};
    for (const name of ["gh", "Notes", "weather"]) bundled[path.join(name, "SKILL.md")] = skillFile(name, `Bundled ${name}.`);
    const allowBundled = [...Array(int(1, 3))].map(() => pick([" gh ", "gh", "GH", "", "  ", "notes", " Notes", 5, "weather"]));
    cases.push({ files, bundled, config: { custom, skills: { entries, allowBundled } } });
  }
  return cases;
}

function skillEntries(prompt) {
  return [...prompt.matchAll(/<skill>\n([\s\S]*?)\n\s*<\/skill>/g)].map((match) => {
    const field = (tag) => match[1].match(new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`))?.[1];
    return { name: field("name"), description: field("description"), location: field("location"), version: field("version") };
  });
}

function compareSkills(testCase, index) {
  const group = `skills#${index}`;
  const dir = workspace(testCase.files);
  const bundledDir = testCase.bundled ? workspace(testCase.bundled) : sandboxEnv.OPENCLAW_BUNDLED_SKILLS_DIR;
  const given = testCase.config ?? {};
  const config = { ...given, skills: { ...(given.skills ?? {}), limits: { maxSkillsPromptChars: 1_000_000 } } };
  // OpenClaw's own installed plugins ship skills too (browser-automation, ...); they are not
  // part of this workspace, so its plugins are off for the comparison.
  const theirConfig = { ...config, plugins: { enabled: false } };
  const theirs = skillEntries(oc.buildWorkspaceSkillsPrompt(dir, { config: theirConfig, managedSkillsDir: sandboxEnv.OPENCLAW_STATE_DIR + "/skills", bundledSkillsDir: bundledDir }));
  const prompt = clawbridge("prompt", { workspace: dir, harness: "embedded", config, tools: [{ name: "read" }], ...(testCase.bundled ? { bundledSkillsDir: bundledDir } : {}) });
  const ours = skillEntries(prompt);
  check(group, `skill names ${JSON.stringify(ours.map((s) => s.name))} vs ${JSON.stringify(theirs.map((s) => s.name))}`,
    equal(ours.map((s) => s.name), theirs.map((s) => s.name)));
  for (const ourSkill of ours) {
    const theirSkill = theirs.find((skill) => skill.name === ourSkill.name);
    if (!theirSkill) continue;
    for (const field of ["description", "location", "version"]) {
      check(`${group} ${ourSkill.name}`, `${field} ${JSON.stringify(ourSkill[field])} vs ${JSON.stringify(theirSkill[field])}`, ourSkill[field] === theirSkill[field]);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 3. System prompt: sections, order and cache-boundary placement per mode.
// ---------------------------------------------------------------------------------------------
const BOUNDARY = "<!-- OPENCLAW_CACHE_BOUNDARY -->";
function sections(text) {
  const lines = text.split("\n");
  const out = [];
  let below = false;
  for (const line of lines) {
    if (line === BOUNDARY) below = true;
    else if (/^#{1,2} [^/]/.test(line)) out.push({ heading: line, below });
  }
  return { list: out, boundary: text.includes(BOUNDARY) };
}

function comparePromptStructure(index, mode, chat) {
  const group = `system-prompt#${index} ${mode}/${chat}`;
  const dir = workspace({ "AGENTS.md": "Agents.", "SOUL.md": "Soul.", "HEARTBEAT.md": "Beat.", "skills/w/SKILL.md": skillFile("w", "d") });
  const tools = ["read", "exec", "message", "cron", "sessions_spawn", "memory_search", "gateway", "session_status"];
  const config = { agents: { defaults: { userTimezone: "UTC", heartbeat: { every: "30m" } } } };
  const group_ = chat === "group";
  const document = {
    // A model outside the GPT-5 family: OpenClaw adds that overlay in its provider runtime,
    // which a bare renderer call does not run.
    workspace: dir, harness: "embedded", promptMode: mode, config, sessionKey: "agent:main:main", model: "anthropic/claude-x",
    tools: tools.map((name) => ({ name })),
    ...(group_ ? { channel: { name: "discord", chatType: "group", groupSubject: "Team" } } : {}),
  };
  const ours = sections(clawbridge("prompt", document));
  const skills = "<available_skills>\n  <skill>\n    <name>w</name>\n    <description>d</description>\n    <location>/l</location>\n  </skill>\n</available_skills>";
  const theirText = oc.buildConfiguredAgentSystemPrompt({
    config, agentId: "main", workspaceDir: dir, promptMode: mode, toolNames: tools, skillsPrompt: skills,
    contextFiles: [{ path: `${dir}/AGENTS.md`, content: "Agents." }, { path: `${dir}/SOUL.md`, content: "Soul." }, { path: `${dir}/HEARTBEAT.md`, content: "Beat." }],
    userTimezone: "UTC", extraSystemPrompt: group_ ? "You are in a Discord group chat." : undefined,
    runtimeInfo: { agentId: "main", channel: group_ ? "discord" : undefined },
    heartbeatPrompt: "Read HEARTBEAT.md.",
  });
  const theirs = sections(theirText);
  check(group, "boundary present", ours.boundary === theirs.boundary);
  const names = (list) => list.map((section) => section.heading);
  const ourSet = new Set(names(ours.list));
  const theirSet = new Set(names(theirs.list));
  for (const heading of new Set([...ourSet, ...theirSet])) {
    const known = SECTION_DEVIATIONS[heading];
    check(group, `section "${heading}" ours=${ourSet.has(heading)} theirs=${theirSet.has(heading)}`, ourSet.has(heading) === theirSet.has(heading), known?.presence);
    if (ourSet.has(heading) && theirSet.has(heading)) {
      const ourBelow = ours.list.find((s) => s.heading === heading).below;
      const theirBelow = theirs.list.find((s) => s.heading === heading).below;
      check(group, `"${heading}" ${ourBelow ? "below" : "above"} the boundary vs ${theirBelow ? "below" : "above"}`, ourBelow === theirBelow, known?.placement);
    }
  }
  const common = (list, other) => names(list).filter((heading) => other.has(heading));
  check(group, "order of the shared sections", equal(common(ours.list, theirSet), common(theirs.list, ourSet)), "seed-section-order");
}

// Config values that gate prompt sections, as people write them (issue 38, items 1, 3, 4): the
// heartbeat cadence (units in any case, padded, bare numbers as text and as JSON numbers,
// nonsense), the voice (TTS) mode with an agent's own block over the defaults, and the channel
// of an exec-approval card in any case. OpenClaw's caller decides the heartbeat prompt with its
// own resolveHeartbeatPromptForSystemPrompt, as its runner does.
function compareConfigGates(index) {
  const group = `config-gates#${index}`;
  const dir = workspace({ "AGENTS.md": "Agents.", "HEARTBEAT.md": "Beat." });
  const heartbeat = {};
  const every = pick(["30m", "45M", " 1H ", "45", "0", "0m", 45, 0, "1h30m", "1H30M", "+5", "inf", "soon", "", null, "1.5h", "1e3", "90S", "500ms", undefined]);
  if (every !== undefined) heartbeat.every = every;
  const ttsBlock = () => {
    const block = {};
    if (random() < 0.7) block.auto = pick(["off", "OFF", " Always ", "always", "inbound", "Tagged", "loud", "", 1]);
    if (random() < 0.5) block.enabled = pick([true, false, 1, 0, "yes", ""]);
    return block;
  };
  const config = { agents: { defaults: { userTimezone: "UTC", heartbeat } } };
  if (random() < 0.8) config.messages = { tts: ttsBlock() };
  if (random() < 0.4) config.agents.list = [{ id: pick(["main", "Main", "other"]), tts: ttsBlock() }];
  const channel = pick(["telegram", "discord", "slack", "signal", "matrix", "googlechat", "qqbot", "whatsapp", "imessage", "sms"]);
  const named = casing(channel);
  // Memory tools in any casing, padded, or a name that only looks like one; citations as written.
  const memoryTool = pick(["memory_search", "Memory_Search", " MEMORY_GET ", "memory_get", "memory_searcher", undefined]);
  const citations = pick([undefined, "off", " off ", "OFF", "on", "auto"]);
  if (citations !== undefined) config.memory = { citations };
  const tools = ["read", "exec", ...(memoryTool ? [memoryTool] : [])];
  const theirText = oc.buildConfiguredAgentSystemPrompt({
    config, agentId: "main", workspaceDir: dir, promptMode: "full", toolNames: tools,
    contextFiles: [], userTimezone: "UTC",
    runtimeInfo: { agentId: "main", channel: named },
    heartbeatPrompt: oc.resolveHeartbeatPromptForSystemPrompt({ config, agentId: "main" }),
  });
  const ourText = clawbridge("prompt", {
    workspace: dir, harness: "embedded", promptMode: "full", config, sessionKey: "agent:main:main", model: "anthropic/claude-x",
    tools: tools.map((name) => ({ name })), channel: { name: named, chatType: "direct" },
  });
  const what = `every=${JSON.stringify(every)} tts=${JSON.stringify(config.messages?.tts)} agents=${JSON.stringify(config.agents.list)} channel=${named} memoryTool=${JSON.stringify(memoryTool)} citations=${JSON.stringify(citations)}`;
  const recall = (text) => text.includes("## Memory Recall");
  check(group, `Memory Recall ours=${recall(ourText)} theirs=${recall(theirText)} (${what})`, recall(ourText) === recall(theirText));
  if (recall(ourText) && recall(theirText)) {
    const off = [ourText.includes("Never mention memory file paths"), theirText.includes("Citations are disabled")];
    check(group, `citations off ours=${off[0]} theirs=${off[1]} (${what})`, off[0] === off[1]);
  }
  const heartbeats = (text) => /^## Heartbeats?$/m.test(text);
  check(group, `Heartbeats section ours=${heartbeats(ourText)} theirs=${heartbeats(theirText)} (${what})`, heartbeats(ourText) === heartbeats(theirText));
  const voice = (text) => text.includes("## Voice (TTS)");
  check(group, `Voice section ours=${voice(ourText)} theirs=${voice(theirText)} (${what})`, voice(ourText) === voice(theirText));
  const card = [ourText.includes("native approval UI"), theirText.includes("use native approval card/buttons first")];
  check(group, `approval card first ours=${card[0]} theirs=${card[1]} (${what})`, card[0] === card[1]);
}

// Model aliases from the config, in OpenClaw's order: names that tie or differ only in case,
// accents, punctuation or script, so the locale collation decides.
function compareModelAliases(index) {
  const group = `model-aliases#${index}`;
  const names = ["zeta", "élan", "Elan", "elan", "Fast", "fast", "_x", "x_", "Ωmega", "日本", "b10", "b2", "B2", "a-b", "a_b", "ab"];
  // Each round holds one group of names that differ only in case or accents, whatever else.
  const ties = pick([["fast", "Fast"], ["elan", "Elan", "élan"], ["b2", "B2"], ["a-b", "a_b", "ab"]]);
  const chosen = [...new Set([...ties, ...[...Array(int(2, 7))].map(() => pick(names))])];
  // Model ids in a random order, so no id order happens to match the alias order.
  const ids = chosen.map((_, at) => at).sort(() => random() - 0.5);
  const models = Object.fromEntries(chosen.map((alias, at) => [`m/model-${ids[at]}`, { alias: random() < 0.2 ? ` ${alias} ` : alias }]));
  const config = { agents: { defaults: { userTimezone: "UTC", models } } };
  const dir = workspace({ "AGENTS.md": "Agents." });
  const lines = (text) => text.split("\n").filter((line) => /^- .*: m\/model-\d+$/.test(line));
  const ours = lines(clawbridge("prompt", { workspace: dir, harness: "embedded", config, model: "anthropic/claude-x", tools: [{ name: "read" }] }));
  const theirs = lines(oc.buildConfiguredAgentSystemPrompt({
    config, agentId: "main", workspaceDir: dir, promptMode: "full", toolNames: ["read"], contextFiles: [],
    userTimezone: "UTC", runtimeInfo: { agentId: "main" },
  }));
  check(group, `alias lines ${JSON.stringify(ours)} vs ${JSON.stringify(theirs)}`, equal(ours, theirs));
}

// The configured time zone as both resolve it: canonical names, links (`US/Eastern`, `EST5EDT`,
// `CET`), other casings, padding, well-formed names that are no zone, and nonsense (those fall
// back to the host's zone, UTC in the sandbox).
function compareTimezone(index) {
  const group = `time-zone#${index}`;
  const zone = pick(["Europe/Berlin", "US/Eastern", "EST5EDT", "CET", "Etc/UTC", "UTC", "Asia/Kolkata", "America/Nowhere_Land", "not a zone", "Mars/Olympus", "europe/berlin", "us/eastern"]);
  const written = random() < 0.3 ? ` ${zone} ` : zone;
  const config = { agents: { defaults: { userTimezone: written } } };
  const dir = workspace({ "AGENTS.md": "Agents." });
  const line = clawbridge("prompt", { workspace: dir, harness: "embedded", config, model: "anthropic/claude-x", tools: [{ name: "read" }] })
    .split("\n").find((text) => text.startsWith("Time zone: "));
  const ours = line?.slice("Time zone: ".length);
  const theirs = oc.resolveUserTimezone(written);
  const same = ours === theirs || (["UTC", "Etc/UTC"].includes(ours) && ["UTC", "Etc/UTC"].includes(theirs));
  check(group, `zone ${JSON.stringify(written)}: ${JSON.stringify(ours)} vs ${JSON.stringify(theirs)}`, same);
}

// The Runtime line's default model as both resolve it (`resolveDefaultModelForAgent`): the agent
// entry's own `model` first, then `agents.defaults.model`, each a string or `{primary, fallbacks}`;
// an entry without a primary leaves the defaults' in place.
function compareDefaultModel(index) {
  const group = `default-model#${index}`;
  const form = (model) => (random() < 0.5 ? model : { primary: model, fallbacks: ["openai/gpt-5.4"] });
  const defaults = pick(["openai/gpt-5.4-mini", "anthropic/claude-x", "openai/gpt-5.5"]);
  const own = pick([undefined, "openai/gpt-5.4", "anthropic/claude-y", "no-primary"]);
  const agent = pick(["main", "ops"]);
  const list = [{ id: "ops", workspace: "/tmp/ops" }];
  if (own === "no-primary") list[0].model = { fallbacks: ["openai/gpt-5.4"] };
  else if (own) list[0].model = form(own);
  const config = { agents: { defaults: { model: form(defaults) }, list } };
  const dir = workspace({ "AGENTS.md": "Agents." });
  const line = clawbridge("prompt", { workspace: dir, harness: "embedded", config, agentId: agent, model: "anthropic/claude-x", tools: [{ name: "read" }] })
    .split("\n").find((text) => text.startsWith("Runtime: "));
  const ours = line?.split(" | ").find((part) => part.startsWith("default_model="))?.slice("default_model=".length);
  const ref = oc.resolveDefaultModelForAgent({ cfg: config, agentId: agent });
  const theirs = `${ref.provider}/${ref.model}`;
  check(group, `agent ${agent}, ${JSON.stringify(config.agents)}: ${JSON.stringify(ours)} vs ${JSON.stringify(theirs)}`, ours === theirs);
}

// ---------------------------------------------------------------------------------------------
// 4. Codex: developer instructions, collaboration instructions, the surface of each file.
// ---------------------------------------------------------------------------------------------
function compareCodexDeveloper(index, toolNames, direct, delivery) {
  const group = `codex-developer#${index}`;
  const dir = workspace({ "AGENTS.md": "a", "SOUL.md": "s" });
  const params = clawbridge("params", {
    workspace: dir, tools: toolNames.map((name) => ({ name })), directTools: direct, sourceReplyDelivery: delivery,
  });
  const ourText = params.threadStart.developerInstructions;
  const theirText = oc.buildDeveloperInstructions(
    { sourceReplyDeliveryMode: delivery === "messageToolOnly" ? "message_tool_only" : "automatic" },
    { dynamicTools: params.threadStart.dynamicTools },
  );
  const deferred = (text, marker) => text.split("\n").find((line) => line.includes(marker))?.replace(/^.*?: /, "").replace(/\. (Load|Use) .*$/, "").split(", ") ?? [];
  check(group, "deferred tool manifest", equal(deferred(ourText, "available on demand"), deferred(theirText, "Deferred searchable")));
  check(group, "skill workshop guidance", ourText.includes("skill_workshop") === theirText.includes("Skill Workshop") || ourText.includes("skill_workshop") === theirText.includes("skill_workshop"));
  const ourRule = /message\(action=send\)/.test(ourText) ? "tool-only" : /Reply normally/.test(ourText) ? "optional" : "none";
  const theirRule = /message\(action=send\)/.test(theirText) ? "tool-only" : /Use `message` only/.test(theirText) ? "optional" : "none";
  check(group, `visible-reply rule ${ourRule} vs ${theirRule}`, ourRule === theirRule, ourRule === "none" ? "no-rule-without-message-tool" : undefined);
}

function compareCollaboration(index, trigger, withMemory, withSkills) {
  const group = `codex-collaboration#${index} ${trigger}`;
  const files = { "AGENTS.md": "a", "HEARTBEAT.md": "Beat." };
  if (withMemory) files["MEMORY.md"] = "Remember.";
  if (withSkills) files["skills/w/SKILL.md"] = skillFile("w", "Weather.");
  const dir = workspace(files);
  const tools = withMemory ? [{ name: "memory_search" }] : [{ name: "read" }];
  const params = clawbridge("params", { workspace: dir, trigger, tools, message: "go" });
  const ours = params.turnStart.collaborationMode.settings.developer_instructions;
  const block = (heading) => {
    if (!ours) return undefined;
    const start = ours.indexOf(heading);
    if (start < 0) return undefined;
    const next = ours.slice(start + heading.length).search(/\n\n## OpenClaw /);
    return ours.slice(start, next < 0 ? undefined : start + heading.length + next);
  };
  const theirs = oc.buildTurnCollaborationMode({ trigger, modelId: "gpt-5.5", thinkLevel: "medium" }, {
    model: "gpt-5.5",
    memoryCollaborationInstructions: block("## OpenClaw Workspace Memory"),
    skillsCollaborationInstructions: block("## OpenClaw Skills"),
    heartbeatCollaborationInstructions: block("## OpenClaw Heartbeat Workspace"),
  }).settings.developer_instructions;
  check(group, `null ${ours === null} vs ${theirs === null}`, (ours === null) === (theirs === null));
  if (ours && theirs) {
    const order = (text) => ["## OpenClaw Workspace Memory", "## OpenClaw Skills", "## OpenClaw Heartbeat Workspace"].filter((h) => text.includes(h)).map((h) => [h, text.indexOf(h)]).sort((a, b) => a[1] - b[1]).map(([h]) => h);
    check(group, "order of memory, skills and heartbeat blocks", equal(order(ours), order(theirs)));
    check(group, "leads with the Codex Default preset", ours.startsWith("# Collaboration Mode: Default") === theirs.startsWith("# Collaboration Mode: Default"), "preset-always-leads");
  }
}

function compareSurfaces(index, trigger) {
  const group = `codex-surfaces#${index} ${trigger}`;
  const files = Object.fromEntries(NAMES.map((name) => [name, `${name} text.`]));
  files["openclaw-workspace-state.json"] = '{"setupCompletedAt":"2026-01-01"}';
  delete files["BOOTSTRAP.md"];
  const dir = workspace(files);
  const report = clawbridge("context", { workspace: dir, trigger, tools: [{ name: "memory_search" }], message: "go" }, ["--json"]);
  const has = (set, name) => set.includes(name.toLowerCase());
  const theirSurface = (name) => {
    if (has(constants.CODEX_NATIVE_PROJECT_DOC_BASENAMES, name)) return "nativeCodex";
    if (has(constants.CODEX_INHERITED_WORKSPACE_DEVELOPER_CONTEXT_BASENAMES, name)) return "threadDeveloperInstructions";
    if (has(constants.CODEX_TURN_SCOPED_WORKSPACE_DEVELOPER_CONTEXT_BASENAMES, name)) return "collaborationInstructions";
    if (name.toLowerCase() === constants.CODEX_HEARTBEAT_CONTEXT_BASENAME) return trigger === "heartbeat" ? "collaborationInstructions" : "omitted";
    if (name.toLowerCase() === constants.CODEX_MEMORY_CONTEXT_BASENAME) return "collaborationInstructions";
    return "turnInput";
  };
  for (const file of report.bootstrap) {
    const theirs = theirSurface(file.name);
    check(group, `${file.name}: ${file.surface} vs ${theirs}`, file.surface === theirs,
      has(constants.CODEX_TURN_SCOPED_WORKSPACE_DEVELOPER_CONTEXT_BASENAMES, file.name) ? "persona-thread-level" : undefined);
  }
}

// ---------------------------------------------------------------------------------------------
// Run everything.
// ---------------------------------------------------------------------------------------------
const started = Date.now();
let index = 0;
// Progress on an interactive terminal only (a log or CI gets the summary alone): the case count
// and elapsed seconds, redrawn at most every 200 ms, cleared at the end.
const interactive = process.stderr.isTTY && !process.env.CI;
let drawn = 0;
function progress(stage, done, total) {
  if (!interactive || Date.now() - drawn < 200) return;
  drawn = Date.now();
  process.stderr.write(`\r\x1b[K  ${stage} ${done}/${total} · ${((drawn - started) / 1000).toFixed(0)} s`);
}
const bootstrap = bootstrapCases();
for (const [at, testCase] of bootstrap.entries()) {
  progress("bootstrap cases", at, bootstrap.length);
  await compareBootstrap(testCase, ++index);
}
const skills = skillCases();
for (const [at, testCase] of skills.entries()) {
  progress("skill cases", at, skills.length);
  compareSkills(testCase, ++index);
}
if (interactive) process.stderr.write("\r\x1b[K");
for (const mode of ["full", "minimal", "none"]) for (const chat of ["direct", "group"]) comparePromptStructure(++index, mode, chat);
const toolSets = [["read", "message"], ["message", "cron", "web_search", "skill_workshop"], ["exec"], ["message", "sessions_spawn", "zeta", "Alpha", "éclair"]];
for (const tools of toolSets) for (const delivery of ["automatic", "messageToolOnly"]) compareCodexDeveloper(++index, tools, ["message"], delivery);
for (const trigger of ["user", "heartbeat", "cron"]) for (const memory of [false, true]) for (const skills of [false, true]) compareCollaboration(++index, trigger, memory, skills);
for (const trigger of ["user", "heartbeat"]) compareSurfaces(++index, trigger);
for (let round = 0; round < 8; round += 1) compareModelAliases(++index);
for (let round = 0; round < 12; round += 1) compareTimezone(++index);
for (let round = 0; round < 12; round += 1) compareDefaultModel(++index);
for (let round = 0; round < 60; round += 1) compareConfigGates(++index);

const deviationCount = Object.values(tally.deviations).reduce((sum, count) => sum + count, 0);
console.log(`conformance against openclaw@${spec.version} (seed ${seed}, ${((Date.now() - started) / 1000).toFixed(1)} s)`);
console.log("functions: " + Object.entries(mapping).map(([name, where]) => `${name} <- ${where}`).join("; "));
console.log(`checks: ${tally.checks}; agree: ${tally.agree} (${((100 * tally.agree) / tally.checks).toFixed(1)}%); listed deviations: ${deviationCount}; failures: ${tally.failures.length}`);
for (const [id, count] of Object.entries(tally.deviations).sort()) console.log(`  deviation ${id}: ${count}`);
for (const failure of tally.failures.slice(0, 60)) console.log(`  FAIL ${failure}`);
if (tally.failures.length > 60) console.log(`  ... and ${tally.failures.length - 60} more`);
if (!args.keep) fs.rmSync(tmp, { recursive: true, force: true });
else console.log(`kept ${tmp}`);
process.exit(tally.failures.length === 0 ? 0 : 1);
