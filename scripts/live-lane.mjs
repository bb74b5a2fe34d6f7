// scripts/live-lane's work (Node, no packages): the conformance suite's live lane.
//
//   node live-lane.mjs record --openclaw DIR --out DIR [NAME...]
//     Run the real OpenClaw (its package folder DIR) on each scenario below, offline: its own
//     embedded runtime with a custom `anthropic-messages` provider pointed at a loopback model
//     stub started here (the Anthropic transport sends the system prompt as two blocks split at
//     the cache boundary, so the boundary is measured, not guessed). CLI scenarios run `openclaw
//     agent --local`; heartbeat and cron scenarios run a loopback Gateway and wake it. The first
//     model request of each scenario is kept, with what ties it to this machine and moment taken
//     out, as OUT/NAME.json. Run inside a network namespace with loopback only (scripts/live-lane
//     does that).
//
//   node live-lane.mjs check|update --clawbridge BIN --openclaw DIR --records DIR
//     For each committed capture: the same inputs as a run document for `clawbridge prompt`
//     (embedded harness), both prompts cut into sections, each section compared by what it must
//     carry (which tools, skills, files and their text, runtime fields, directives, tokens,
//     placement above or below the cache boundary, order). A difference is tolerated only under
//     a deviation id of scripts/openclaw-conformance/deviations.json (each says why clawbridge
//     follows the spec there); any other difference fails. `check` compares the record this
//     writes (RECORDS.md) with the committed one; `update` rewrites it.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import http from "node:http";
import crypto from "node:crypto";
import { spawn, execFileSync } from "node:child_process";
import { SECTION_DEVIATIONS as SHARED_SECTION_DEVIATIONS } from "./openclaw-conformance/sections.mjs";

const here = path.dirname(new URL(import.meta.url).pathname);
const root = path.resolve(here, "..");
const lane = path.join(root, "fixtures", "live-lane");
const BOUNDARY = "<!-- OPENCLAW_CACHE_BOUNDARY -->";
const HOME = "/home/openclaw";
const PACKAGE = "/openclaw";

// ---------------------------------------------------------------------------------------------
// Scenarios: what OpenClaw is given, and the same inputs as clawbridge's run document.
// ---------------------------------------------------------------------------------------------
// `how`: cli (`agent --local`), heartbeat (a Gateway woken by a system event) or cron (a Gateway
// job run now). `config` is merged over the base config, `files` over the base workspace
// (null removes a file), `bundled` names a folder of fixtures/live-lane/ as OpenClaw's bundled
// skills, `run` goes into the run document as it is.
const SCENARIOS = [
  { name: "direct", how: "cli", sessionKey: "agent:main:main", message: "What is on the release checklist?" },
  {
    name: "group", how: "cli", sessionKey: "agent:main:telegram:group:-1001234567890",
    message: "Hello everyone, what can you do for this group?",
    // The CLI names the channel, not the chat type (no inbound message carries it).
    agentArgs: ["--channel", "telegram"],
    run: { channel: { name: "telegram" } },
  },
  { name: "subagent", how: "cli", sessionKey: "agent:main:subagent:research-1", message: "Find the release date in the workspace." },
  // OpenClaw's cron runner renders an isolated job's prompt in minimal mode: the run document
  // says so (`promptMode` is the caller's choice).
  { name: "cron-isolated", how: "cron", message: "Write the nightly report.", run: { trigger: "cron", promptMode: "minimal" } },
  { name: "cron-light", how: "cron", light: true, message: "Write the light nightly report.", run: { trigger: "cron", lightweight: true, promptMode: "minimal" } },
  {
    name: "heartbeat", how: "heartbeat", message: "Check the release checklist.",
    config: { agents: { defaults: { heartbeat: { every: "30m" } } } },
    run: { trigger: "heartbeat", channel: { name: "heartbeat", chatType: "direct" } },
  },
  {
    name: "skills", how: "cli", sessionKey: "agent:main:main", message: "Which skill fits a weather question?",
    bundled: "bundled-skills",
    files: {
      "skills/weather/SKILL.md": "---\nname: weather\ndescription: Current weather & forecasts for a city <any city>.\n---\n\nUse the forecast service.\n",
      "skills/release-notes/SKILL.md": "---\nname: release-notes\ndescription: Draft release notes from the changelog.\nmetadata: {\"openclaw\": {\"requires\": {\"bins\": [\"git\"]}}}\n---\n\nRead CHANGELOG.md first.\n",
      "skills/secret-tool/SKILL.md": "---\nname: secret-tool\ndescription: Needs a binary this machine lacks.\nmetadata: {\"openclaw\": {\"requires\": {\"bins\": [\"no-such-binary-xyz\"]}}}\n---\n\nNever shown.\n",
      "skills/hidden/SKILL.md": "---\nname: hidden\ndescription: Only for slash commands.\ndisable-model-invocation: true\n---\n\nNot for the model.\n",
    },
  },
  {
    name: "memory", how: "cli", sessionKey: "agent:main:main", message: "What did we decide yesterday?",
    files: {
      "MEMORY.md": "# Memory\n\n- The user prefers short answers.\n- Releases go out on Thursdays.\n",
      "memory/2026-12-04.md": "# 2026-12-04\n\nDecided to move the release to Thursday.\n",
    },
  },
  {
    name: "tts", how: "cli", sessionKey: "agent:main:main", message: "Read me the checklist aloud.",
    config: { messages: { tts: { auto: "always" } } },
  },
  {
    name: "sandbox", how: "cli", sessionKey: "agent:main:main", message: "List the workspace files.",
    config: { agents: { defaults: { sandbox: { mode: "all" } } } },
    // OpenClaw runs a sandboxed agent on its copy of the workspace (workspaceAccess "none").
    workspaceDir: ".openclaw/sandboxes/agent-main-f331f052",
    run: {
      sandboxInfo: {
        enabled: true, containerWorkspaceDir: "/workspace", workspaceAccess: "none",
        agentWorkspaceMount: `${HOME}/.openclaw/sandboxes/agent-main-f331f052`,
      },
    },
  },
  // The stub as OpenClaw's `openai` provider (still the Anthropic transport): OpenClaw adds its
  // GPT-5 overlay from the OpenAI provider's runtime.
  { name: "gpt-5", how: "cli", sessionKey: "agent:main:main", message: "Summarize the checklist.", provider: "openai", model: "gpt-5.5" },
  {
    name: "fresh", how: "cli", sessionKey: "agent:main:main", message: "Hi, who are you?", fresh: true,
    files: {
      "BOOTSTRAP.md": "# Bootstrap\n\nAsk the user for a name and a persona, then write IDENTITY.md and delete this file.\n",
      "SOUL.md": null, "IDENTITY.md": null, "USER.md": null, "TOOLS.md": null, "HEARTBEAT.md": null,
    },
  },
];

// The seed audit's five scenarios (scripts/seed-audit, the same messages and session keys as
// its 2026.9.6 record) on fixtures/workspace with OpenClaw's default config: where OpenClaw
// 2026.6.10's own runtime put each workspace file (`scripts/seed-audit --route embedded`).
const SEED_AUDIT = [
  { name: "direct", how: "cli", sessionKey: "agent:main:main", message: "What is on the release checklist?" },
  { name: "group", how: "cli", sessionKey: "agent:main:telegram:group:-1001234567890", message: "Hello everyone, what can you do for this group?" },
  {
    name: "heartbeat", how: "heartbeat", message: "Check the release checklist.",
    run: { trigger: "heartbeat", channel: { name: "heartbeat", chatType: "direct" } },
  },
  { name: "cron", how: "cli", sessionKey: "agent:main:cron:nightly-report", message: "Write the nightly report.", run: { trigger: "cron" } },
  { name: "subagent", how: "cli", sessionKey: "agent:main:subagent:research-1", message: "Find the release date in the workspace." },
].map((scenario) => ({ ...scenario, base: path.join(root, "fixtures", "workspace"), defaults: true }));

const SETS = { "live-lane": SCENARIOS, "seed-audit": SEED_AUDIT };

const merge = (base, over) => {
  if (!over || typeof over !== "object" || Array.isArray(over)) return over ?? base;
  const out = { ...(base ?? {}) };
  for (const [key, value] of Object.entries(over)) out[key] = merge(out[key], value);
  return out;
};

/** OpenClaw's config for a scenario: the stub provider, the workspace, UTC. */
function openclawConfig(scenario, home, port) {
  const model = (id) => ({
    id, name: id, reasoning: false, input: ["text"], contextWindow: 200000, maxTokens: 8192,
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  });
  const base = {
    models: {
      mode: "merge",
      providers: {
        stub: {
          baseUrl: `http://127.0.0.1:${port}`, apiKey: "stub-key", api: "anthropic-messages",
          models: [model("claude-stub"), model("gpt-5.5")],
        },
      },
    },
    agents: {
      defaults: {
        workspace: `${home}/workspace`, repoRoot: `${home}/workspace`,
        model: { primary: modelId(scenario) }, userTimezone: "UTC",
        // The lane's scenarios keep heartbeats off unless they say otherwise (the seed audit's
        // keep OpenClaw's default, every 30 minutes).
        ...(scenario.defaults ? {} : { heartbeat: { every: "0m" } }),
      },
    },
  };
  if (scenario.provider) base.models.providers[scenario.provider] = base.models.providers.stub;
  return merge(base, scenario.config);
}

const modelId = (scenario) => `${scenario.provider ?? "stub"}/${scenario.model ?? "claude-stub"}`;

/** The scenario's workspace files (the base folder, then the scenario's own). */
function workspaceFiles(scenario) {
  const files = {};
  const walk = (dir, prefix = "") => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const relative = prefix + entry.name;
      if (entry.isDirectory()) walk(path.join(dir, entry.name), `${relative}/`);
      else files[relative] = fs.readFileSync(path.join(dir, entry.name), "utf8");
    }
  };
  walk(scenario.base ?? path.join(lane, "workspace"));
  for (const [relative, content] of Object.entries(scenario.files ?? {})) {
    if (content === null) delete files[relative];
    else files[relative] = content;
  }
  return files;
}

function writeWorkspace(dir, files) {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  for (const [relative, content] of Object.entries(files)) {
    // A capture names its files; none may leave the folder it is written to.
    const parts = relative.split(/[\\/]/);
    if (path.isAbsolute(relative) || parts.includes("..") || parts.includes("") || typeof content !== "string") {
      throw new Error(`workspace file ${JSON.stringify(relative)}: not a plain relative path inside the workspace`);
    }
    fs.mkdirSync(path.dirname(path.join(dir, relative)), { recursive: true });
    fs.writeFileSync(path.join(dir, relative), content);
  }
}

// ---------------------------------------------------------------------------------------------
// Recording.
// ---------------------------------------------------------------------------------------------
function arg(args, name) {
  const at = args.indexOf(name);
  return at >= 0 ? args.splice(at, 2)[1] : undefined;
}

/** A loopback Anthropic Messages stub: keeps each request body, answers one short text. */
function startStub() {
  const requests = [];
  const waiters = [];
  const sse = (event, data) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      if (req.method !== "POST" || !req.url.endsWith("/messages")) {
        res.writeHead(404).end();
        return;
      }
      let body;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        res.writeHead(400).end();
        return;
      }
      requests.push(body);
      for (const waiter of waiters.splice(0)) waiter();
      res.writeHead(200, { "content-type": "text/event-stream" });
      const usage = { input_tokens: 1, output_tokens: 1 };
      res.write(sse("message_start", { type: "message_start", message: { id: "msg_stub", type: "message", role: "assistant", model: body.model, content: [], stop_reason: null, stop_sequence: null, usage } }));
      res.write(sse("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }));
      res.write(sse("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "HEARTBEAT_OK" } }));
      res.write(sse("content_block_stop", { type: "content_block_stop", index: 0 }));
      res.write(sse("message_delta", { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 1 } }));
      res.end(sse("message_stop", { type: "message_stop" }));
    });
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      resolve({
        port: server.address().port,
        requests,
        close: () => server.close(),
        /** The first request whose last user text holds `text`. */
        async waitFor(text, seconds) {
          const deadline = Date.now() + seconds * 1000;
          for (;;) {
            const found = requests.find((body) => JSON.stringify(body.messages ?? []).includes(text));
            if (found) return found;
            if (Date.now() > deadline) throw new Error(`no model request carrying ${JSON.stringify(text)} within ${seconds} s`);
            await new Promise((resolve) => {
              waiters.push(resolve);
              setTimeout(resolve, 1000);
            });
          }
        },
      });
    });
  });
}

function run(command, args, options, seconds) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (chunk) => (out += chunk));
    child.stderr.on("data", (chunk) => (out += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), seconds * 1000);
    child.on("close", (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`${path.basename(args[1] ?? command)} ${args.slice(1, 3).join(" ")} exited ${code}:\n${out.slice(-3000)}`));
    });
  });
}

async function record(args) {
  const openclaw = arg(args, "--openclaw");
  const out = arg(args, "--out");
  const set = SETS[arg(args, "--set") ?? "live-lane"];
  const names = args.length ? args : set.map((scenario) => scenario.name);
  const launcher = path.join(openclaw, "openclaw.mjs");
  const version = JSON.parse(fs.readFileSync(path.join(openclaw, "package.json"), "utf8")).version;
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "live-lane-"));
  // What OpenClaw may run: Node, and the stand-ins of fixtures/live-lane/bin (a `docker` that
  // answers as an idle engine, so sandbox mode starts; `git` for a skill's requirement).
  const bin = path.join(scratch, "bin");
  fs.mkdirSync(bin);
  for (const name of fs.readdirSync(path.join(lane, "bin"))) fs.copyFileSync(path.join(lane, "bin", name), path.join(bin, name));
  for (const name of fs.readdirSync(bin)) fs.chmodSync(path.join(bin, name), 0o755);
  fs.symlinkSync(process.execPath, path.join(bin, "node"));
  const stub = await startStub();
  fs.mkdirSync(out, { recursive: true });
  try {
    for (const name of names) {
      const scenario = set.find((candidate) => candidate.name === name);
      if (!scenario) throw new Error(`no scenario ${name}`);
      const started = Date.now();
      const home = path.join(scratch, "home");
      fs.rmSync(home, { recursive: true, force: true });
      fs.mkdirSync(path.join(home, ".openclaw"), { recursive: true });
      writeWorkspace(path.join(home, "workspace"), workspaceFiles(scenario));
      fs.writeFileSync(path.join(home, ".openclaw", "openclaw.json"), JSON.stringify(openclawConfig(scenario, home, stub.port), null, 2));
      const bundled = scenario.bundled ? path.join(lane, scenario.bundled) : path.join(scratch, "no-bundled-skills");
      fs.mkdirSync(bundled, { recursive: true });
      const env = {
        HOME: home, PATH: bin, NO_COLOR: "1", TZ: "UTC", LANG: "C.UTF-8",
        OPENCLAW_BUNDLED_SKILLS_DIR: bundled,
        npm_config_registry: "http://127.0.0.1:9/", npm_config_offline: "true",
      };
      const options = { cwd: home, env };
      stub.requests.length = 0;
      let body;
      if (scenario.how === "cli") {
        const agent = [launcher, "agent", "--local", "--json", "--session-key", scenario.sessionKey, "--message", scenario.message, ...(scenario.agentArgs ?? [])];
        await run(process.execPath, agent, options, 240);
        body = await stub.waitFor(scenario.message, 5);
      } else {
        body = await viaGateway(scenario, launcher, options, stub);
      }
      // The workspace as the run saw it (OpenClaw seeds a new one with its templates and state).
      const workspace = readWorkspace(path.join(home, scenario.workspaceDir ?? "workspace"));
      const capture = scrub({ openclaw: version, scenario: name, workspace, request: requestOf(body) }, [
        [home, HOME], [openclaw, PACKAGE], [bundled, `${HOME}/bundled-skills`],
      ]);
      fs.writeFileSync(path.join(out, `${name}.json`), `${JSON.stringify(capture, null, 2)}\n`);
      console.error(`live-lane: ${name}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
    }
  } finally {
    stub.close();
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

/** A heartbeat or cron turn through a loopback Gateway of its own, stopped after. */
async function viaGateway(scenario, launcher, options, stub) {
  const token = crypto.randomBytes(24).toString("hex");
  const port = 20000 + crypto.randomInt(10000);
  const gateway = spawn(process.execPath, [launcher, "gateway", "run", "--allow-unconfigured", "--bind", "loopback", "--port", String(port), "--auth", "token", "--token", token], {
    ...options, stdio: ["ignore", "pipe", "pipe"], detached: true,
  });
  let log = "";
  gateway.stdout.on("data", (chunk) => (log += chunk));
  gateway.stderr.on("data", (chunk) => (log += chunk));
  try {
    const deadline = Date.now() + 120_000;
    while (!log.includes("[gateway] ready")) {
      if (gateway.exitCode !== null) throw new Error(`the Gateway exited:\n${log.slice(-3000)}`);
      if (Date.now() > deadline) throw new Error(`the Gateway was not ready in 120 s:\n${log.slice(-3000)}`);
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    const remote = ["--url", `ws://127.0.0.1:${port}`, "--token", token];
    if (scenario.how === "heartbeat") {
      await run(process.execPath, [launcher, "system", "event", "--text", scenario.message, "--mode", "now", "--json", ...remote], options, 120);
    } else {
      const add = [launcher, "cron", "add", "--name", scenario.name, "--every", "24h", "--session", "isolated", "--message", scenario.message, "--no-deliver", "--json", ...remote];
      if (scenario.light) add.push("--light-context");
      const job = JSON.parse((await run(process.execPath, add, options, 120)).replace(/^[^{]*/s, ""));
      await run(process.execPath, [launcher, "cron", "run", job.id ?? job.job?.id, ...remote], options, 120);
    }
    // A heartbeat turn's message is OpenClaw's poll line; the event's text is not in it.
    return await stub.waitFor(scenario.how === "heartbeat" ? "[OpenClaw heartbeat poll]" : scenario.message, 120);
  } catch (error) {
    throw new Error(`${error.message}\n-- gateway log --\n${log.slice(-3000)}`);
  } finally {
    try {
      process.kill(-gateway.pid, "SIGKILL");
    } catch {}
  }
}

/** A workspace folder's text files (relative path to text), links and large files left out. */
function readWorkspace(dir) {
  const files = {};
  const walk = (folder, prefix = "") => {
    for (const entry of fs.readdirSync(folder, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const relative = prefix + entry.name;
      const full = path.join(folder, entry.name);
      if (entry.isDirectory()) walk(full, `${relative}/`);
      else if (entry.isFile() && fs.statSync(full).size <= 256 * 1024) {
        const text = fs.readFileSync(full, "utf8");
        if (!text.includes("\u0000")) files[relative] = text;
      }
    }
  };
  walk(dir);
  return files;
}

/** What the comparison reads of a model request: the system blocks, the tools, the messages. */
function requestOf(body) {
  const blocks = typeof body.system === "string" ? [body.system] : (body.system ?? []).map((block) => block.text);
  return {
    model: body.model,
    system: blocks,
    tools: (body.tools ?? []).map((tool) => ({ name: tool.name, description: tool.description ?? "" })),
    messages: (body.messages ?? []).map((message) => ({
      role: message.role,
      text: typeof message.content === "string" ? message.content : message.content.filter((part) => part.type === "text").map((part) => part.text).join("\n"),
    })),
  };
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
/** Machine paths, ids, moments and host facts out of a capture, so a record is the same twice. */
function scrub(capture, replacements) {
  const ids = new Map();
  replacements.sort((a, b) => b[0].length - a[0].length);
  let text = JSON.stringify(capture);
  for (const [from, to] of replacements) text = text.split(from).join(to);
  text = text.replace(UUID, (uuid) => {
    if (!ids.has(uuid)) ids.set(uuid, `id-${ids.size + 1}`);
    return ids.get(uuid);
  });
  // The moments OpenClaw writes into the workspace state (setup seeded, completed).
  text = text.replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z/g, "2026-01-01T00:00:00.000Z");
  const value = JSON.parse(text);
  const facts = {};
  const clean = (line) =>
    line
      .replace(/\[(Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d{4}-\d{2}-\d{2} \d{2}:\d{2}[^\]]*\]/g, "[<time>]")
      .replace(/^(Current time|Reference UTC): .*$/gm, "$1: <time>")
      .replace(/\b(host|os)=([^|\n]*?)( \||\n|$)/g, (_, key, fact, end) => {
        facts[key] = fact;
        return `${key}=<${key}>${end}`;
      })
      .replace(/\bnode=(v[0-9.]+)/g, (whole, version) => {
        facts.node = version;
        return whole;
      })
      .replace(/^Runtime: agent=[^|\n]*\| session=([^|\n]*?) \|/m, (whole, key) => {
        facts.sessionKey = key;
        return whole;
      });
  value.request.system = value.request.system.map(clean);
  value.request.messages = value.request.messages.map((message) => ({ ...message, text: clean(message.text) }));
  // The session key as OpenClaw chose it (a cron job's id, a heartbeat's main session).
  value.facts = { node: facts.node ?? null, sessionKey: facts.sessionKey ?? null };
  return value;
}

// ---------------------------------------------------------------------------------------------
// Comparison.
// ---------------------------------------------------------------------------------------------
/**
 * A prompt cut into sections: heading, text, whether below the cache boundary. A heading line is
 * `# X` or `## X` (not a `## /path` file heading) that is not a line of one of the run's
 * workspace files (their own headings are file content).
 */
function sections(blocks, contentLines) {
  const out = [{ heading: "(preamble)", lines: [], below: false }];
  blocks.forEach((block, index) => {
    for (const line of block.split("\n")) {
      if (line === BOUNDARY) {
        out.push({ heading: "(after boundary)", lines: [], below: true });
        continue;
      }
      const below = index > 0 || out.at(-1).below;
      // clawbridge's exec-approval paragraph (spec D6) has no heading of its own.
      if (line.startsWith("Exec approvals: ")) out.push({ heading: "(exec approval guidance)", lines: [], below });
      if (/^#{1,2} [^/]/.test(line) && !contentLines.has(line) && !SUBHEADINGS.has(line)) out.push({ heading: line, lines: [], below });
      else out.at(-1).lines.push(line);
    }
  });
  return out
    .map((section) => ({ ...section, text: section.lines.join("\n").trim() }))
    .filter((section) => !section.heading.startsWith("(") || section.text !== "");
}

// Headings inside a section's own text: OpenClaw's inbound metadata block opens its extra
// system prompt (the Group Chat Context).
const SUBHEADINGS = new Set(["## Inbound Context (trusted metadata)"]);

const lines = (text) => text.split("\n");
/** The facts each section must carry, whatever its wording (spec system-prompt.md §6). */
const FACTS = {
  "## Tooling": (text) => ({ tools: lines(text).filter((line) => /^- [a-z_][a-z0-9_]*(:|$)/.test(line)).map((line) => line.slice(2).split(":")[0]) }),
  "## Skills": (text) => ({
    skills: [...text.matchAll(/<skill>([\s\S]*?)<\/skill>/g)].map(([, body]) => {
      const field = (name) => body.match(new RegExp(`<${name}>([^<]*)</${name}>`))?.[1] ?? null;
      return { name: field("name") ?? path.basename(path.dirname(field("location") ?? "")), description: field("description"), location: field("location") };
    }),
  }),
  "# Project Context": (text) => ({ files: projectFiles(text) }),
  "# Dynamic Project Context": (text) => ({ files: projectFiles(text) }),
  "## Runtime": (text) => {
    const line = lines(text).find((candidate) => candidate.startsWith("Runtime: ")) ?? "";
    return { runtime: Object.fromEntries(line.slice(9).split(" | ").map((part) => [part.split("=")[0], part.slice(part.indexOf("=") + 1)])) };
  },
  "## Current Date & Time": (text) => ({ timeZone: text.match(/Time zone: (\S+)/)?.[1] ?? null }),
  "## Workspace": (text) => ({ directory: text.match(/(\/[^\s`]+)/)?.[1] ?? null }),
  "## Documentation": (text) => ({ docs: text.match(/(\/[^\s`(]+docs)\b/)?.[1] ?? null }),
  "## Assistant Output Directives": (text) => ({ directives: ["MEDIA:<path-or-url>", "[[audio_as_voice]]", "[[reply_to_current]]", "[[reply_to:<id>]]"].filter((token) => text.includes(token)) }),
  "## Silent Replies": (text) => ({ token: text.includes("NO_REPLY") ? "NO_REPLY" : null }),
  "## Heartbeats": (text) => ({ ack: text.includes("HEARTBEAT_OK") }),
  "## Sandbox": (text) => ({
    workdir: text.match(/[Cc]ontainer workdir: (\S+)/)?.[1] ?? null,
    mount: text.match(/(?:[Hh]ost mount source[^:]*|Host mount): (\S+)/)?.[1] ?? null,
    access: text.match(/[Aa]ccess: (\S+)/)?.[1] ?? null,
  }),
  // The inbound metadata block, as data.
  "## Group Chat Context": (text) => {
    const block = text.match(/```json\n([\s\S]*?)\n```/)?.[1];
    let metadata = null;
    try {
      metadata = block ? JSON.parse(block) : null;
    } catch {}
    return { metadata: metadata && Object.fromEntries(Object.entries(metadata).sort(([a], [b]) => (a < b ? -1 : 1))) };
  },
  // The silent-reply token where the run's reply contract has one (spec §6.1), the message tool.
  "## Messaging": (text) => ({ noReply: /\bonly:? `?NO_REPLY/i.test(text), messageTool: text.includes("### message tool") }),
};

function projectFiles(text) {
  const marks = [...text.matchAll(/^## (\/[^\n]*)$/gm)];
  return marks.map((mark, index) => {
    const end = index + 1 < marks.length ? marks[index + 1].index : text.length;
    return { path: mark[1], content: text.slice(mark.index + mark[0].length, end).trim() };
  });
}

const deviations = JSON.parse(fs.readFileSync(path.join(root, "scripts", "openclaw-conformance", "deviations.json"), "utf8")).deviations;
const deviationIds = new Set(deviations.map((deviation) => deviation.id));

/** Compare one scenario; rows of [section, verdict, detail]. */
function compare(scenario, theirs, ours, workspace) {
  const rows = [];
  const verdict = (section, same, deviation, detail) => {
    if (same) rows.push([section, "same", ""]);
    else if (deviation && deviation.split(", ").every((id) => deviationIds.has(id))) rows.push([section, deviation, detail]);
    else rows.push([section, "DIFFERS", detail]);
  };
  const contentLines = new Set(Object.values(workspace).flatMap((text) => text.split("\n")));
  const theirList = sections(theirs, contentLines);
  const ourList = sections(ours, contentLines);
  const byHeading = (list) => new Map(list.map((section) => [section.heading, section]));
  const theirMap = byHeading(theirList);
  const ourMap = byHeading(ourList);
  const headings = [...new Set([...ourList.map((s) => s.heading), ...theirList.map((s) => s.heading)])];
  for (const heading of headings) {
    const a = ourMap.get(heading);
    const b = theirMap.get(heading);
    const known = SECTION_DEVIATIONS[heading] ?? {};
    if (!a || !b) {
      verdict(heading, false, typeof known.presence === "function" ? known.presence(scenario, !!a) : known.presence, a ? "only clawbridge has it" : "only OpenClaw has it");
      continue;
    }
    const placement = a.below === b.below;
    if (!placement) verdict(`${heading} (placement)`, false, known.placement, `clawbridge ${a.below ? "below" : "above"} the boundary, OpenClaw ${b.below ? "below" : "above"}`);
    if (a.text === b.text) {
      rows.push([heading, "same text", ""]);
      continue;
    }
    const facts = FACTS[heading];
    if (!facts) {
      rows.push([heading, "own wording", ""]);
      continue;
    }
    const ourFacts = facts(a.text);
    const theirFacts = facts(b.text);
    for (const key of Object.keys(ourFacts)) {
      const classify = FACT_DEVIATIONS[`${heading} ${key}`];
      const [same, deviation, detail] = classify
        ? classify(ourFacts[key], theirFacts[key], scenario)
        : [JSON.stringify(ourFacts[key]) === JSON.stringify(theirFacts[key]), undefined, `clawbridge ${JSON.stringify(ourFacts[key])}, OpenClaw ${JSON.stringify(theirFacts[key])}`];
      verdict(`${heading}: ${key}`, same, deviation, detail);
    }
  }
  const common = (list, other) => list.map((s) => s.heading).filter((heading) => other.has(heading) && !heading.startsWith("("));
  const ourOrder = common(ourList, theirMap);
  const theirOrder = common(theirList, ourMap);
  verdict("section order", JSON.stringify(ourOrder) === JSON.stringify(theirOrder), "seed-section-order", "");
  return rows;
}

// Where a section's presence or placement differs because clawbridge follows the seed page:
// the compiled-function suite's table, and what only a live run shows.
const SECTION_DEVIATIONS = {
  ...SHARED_SECTION_DEVIATIONS,
  "## Group Chat Context": {
    ...SHARED_SECTION_DEVIATIONS["## Group Chat Context"],
    presence: (scenario, ours) => (ours && scenario.agentArgs?.includes("--channel") ? "channel-is-the-source-chat" : undefined),
  },
  "## Skill Workshop": { presence: "no-skill-workshop-section" },
  "## Bootstrap Pending": { presence: "no-bootstrap-pending-section" },
  "## GPT-5 Working Style": { presence: "gpt5-overlay-stable-prefix" },
  "(exec approval guidance)": { presence: "seed-exec-approval-paragraph" },
};
// A direct chat's source conversation owns the reply contract: no Silent Replies.
SECTION_DEVIATIONS["## Silent Replies"].presence = (scenario, ours) =>
  !ours && scenario.run?.channel?.chatType === "direct" ? "direct-chat-no-silent-replies" : undefined;

// Where a fact differs because clawbridge follows the spec: [same, deviation, detail].
const json = (value) => JSON.stringify(value);
const sorted = (list) => [...list].sort();
const both = (ours, theirs) => `clawbridge ${json(ours)}, OpenClaw ${json(theirs)}`;
const FACT_DEVIATIONS = {
  // The same tools; clawbridge lists them in the spec's canonical core order.
  "## Tooling tools": (ours, theirs) =>
    json(ours) === json(theirs) ? [true]
      : json(sorted(ours)) === json(sorted(theirs)) ? [false, "seed-tool-order", both(ours, theirs)]
      : [false, undefined, both(ours, theirs)],
  // The same files with the same text; clawbridge keeps the spec's candidate order.
  "# Project Context files": (ours, theirs) => {
    if (json(ours) === json(theirs)) return [true];
    const key = (list) => json([...list].sort((a, b) => (a.path < b.path ? -1 : 1)));
    if (key(ours) === key(theirs)) return [false, "seed-file-order", both(ours.map((f) => path.basename(f.path)), theirs.map((f) => path.basename(f.path)))];
    return [false, undefined, both(ours, theirs)];
  },
  // The same skills; OpenClaw shows a location under the home folder as `~/`, and a sandboxed
  // run's as a container path.
  "## Skills skills": (ours, theirs, scenario) => {
    if (json(ours) === json(theirs)) return [true];
    const ids = [];
    const sandbox = scenario.run?.sandboxInfo;
    const mapped = theirs.map((skill) => {
      let location = skill.location ?? "";
      if (location.startsWith("~/")) {
        location = `${HOME}/${location.slice(2)}`;
        if (!ids.includes("skill-location-full-path")) ids.push("skill-location-full-path");
      }
      if (sandbox && location.startsWith(`${sandbox.containerWorkspaceDir}/`)) {
        location = sandbox.agentWorkspaceMount + location.slice(sandbox.containerWorkspaceDir.length);
        if (!ids.includes("workspace-host-path")) ids.push("workspace-host-path");
      }
      return { ...skill, location };
    });
    if (json(ours) === json(mapped)) return [false, ids.join(", "), both(ours.map((s) => s.location), theirs.map((s) => s.location))];
    return [false, undefined, both(ours, theirs)];
  },
  // The run document's channel facts; OpenClaw adds its inbound provider and surface ids and
  // calls an unknown chat type direct.
  "## Group Chat Context metadata": (ours, theirs) => {
    if (json(ours) === json(theirs)) return [true];
    if (!ours || !theirs) return [false, undefined, both(ours, theirs)];
    const own = new Set(["provider", "surface", "response_format"]);
    const rest = Object.fromEntries(Object.entries(theirs).filter(([key, value]) => !own.has(key) && !(key === "chat_type" && value === "direct" && !("chat_type" in ours))));
    return [false, json(ours) === json(rest) ? "inbound-metadata-fields" : undefined, both(ours, theirs)];
  },
  // A direct chat has no silent-reply token (spec §6.1).
  "## Messaging noReply": (ours, theirs, scenario) =>
    ours === theirs ? [true]
      : !ours && scenario.run?.channel?.chatType === "direct" ? [false, "direct-chat-no-silent-replies", both(ours, theirs)]
      : [false, undefined, both(ours, theirs)],
  // The workspace on the host; OpenClaw names the sandbox container's workdir when sandboxed.
  "## Workspace directory": (ours, theirs, scenario) =>
    ours === theirs ? [true]
      : scenario.run?.sandboxInfo?.containerWorkspaceDir === theirs ? [false, "workspace-host-path", both(ours, theirs)]
      : [false, undefined, both(ours, theirs)],
  // The spec's fields; OpenClaw adds the transcript's id, and shows a cron run's own key.
  "## Runtime runtime": (ours, theirs) => {
    if (json(ours) === json(theirs)) return [true];
    const { sessionId, ...rest } = theirs;
    const ids = [];
    if (sessionId !== undefined) ids.push("seed-runtime-fields");
    if (rest.session && ours.session !== rest.session && rest.session.replace(/:run:[^:]+$/, "") === ours.session) {
      ids.push("cron-run-base-key");
      rest.session = ours.session;
    }
    if (json(ours) === json(rest)) return [false, ids.join(", "), both(ours, theirs)];
    return [false, undefined, both(ours, theirs)];
  },
};

// ---------------------------------------------------------------------------------------------
// clawbridge's side: the run document of a capture.
// ---------------------------------------------------------------------------------------------
// The skills OpenClaw's plugins enabled by default bring (their manifests' `skills` folders),
// which OpenClaw 2026.6.10 copies into `~/.openclaw/plugin-skills/` at start-up: clawbridge takes
// that folder as an extra skill folder (`skills.load.extraDirs`, the same precedence tier).
const PLUGIN_SKILLS = ["dist/extensions/browser/skills"];

function runDocument(scenario, capture) {
  const config = openclawConfig(scenario, HOME, 1);
  delete config.models;
  config.skills = merge(config.skills, { load: { extraDirs: [`${HOME}/.openclaw/plugin-skills`] } });
  const sessionKey = scenario.sessionKey ?? capture.facts.sessionKey;
  return {
    workspace: `${HOME}/${scenario.workspaceDir ?? "workspace"}`,
    harness: "embedded",
    model: modelId(scenario),
    thinking: "off",
    message: scenario.message,
    tools: capture.request.tools,
    config,
    runtime: { node: capture.facts.node },
    bundledSkillsDir: `${HOME}/bundled-skills`,
    managedSkillsDir: `${HOME}/.openclaw/skills`,
    docsPath: `${PACKAGE}/docs`,
    ...(sessionKey ? { sessionKey } : {}),
    ...(scenario.run ?? {}),
  };
}

function ourPrompt(scenario, capture, clawbridge, openclaw, scratch) {
  // The recorded folders, recreated here: the workspace as the run saw it, the bundled skills.
  const home = path.join(scratch, "home");
  fs.rmSync(home, { recursive: true, force: true });
  writeWorkspace(path.join(home, scenario.workspaceDir ?? "workspace"), capture.workspace);
  // The agent's own workspace exists too when the run worked on a sandbox copy (the repo root).
  fs.mkdirSync(path.join(home, "workspace"), { recursive: true });
  fs.mkdirSync(path.join(home, ".openclaw", "skills"), { recursive: true });
  for (const dir of PLUGIN_SKILLS) {
    fs.cpSync(path.join(openclaw, dir), path.join(home, ".openclaw", "plugin-skills"), { recursive: true });
  }
  const bundled = scenario.bundled ? path.join(lane, scenario.bundled) : path.join(home, "bundled-skills");
  fs.mkdirSync(bundled, { recursive: true });
  let text = JSON.stringify(runDocument(scenario, capture));
  text = text.split(`${HOME}/bundled-skills`).join(bundled).split(HOME).join(home).split(PACKAGE).join(openclaw);
  const document = JSON.parse(text);
  const file = path.join(scratch, `${scenario.name}.run.json`);
  fs.writeFileSync(file, JSON.stringify(document));
  const bin = path.join(scratch, "bin");
  const out = execFileSync(clawbridge, ["prompt", file, "--state-dir", path.join(scratch, "state")], {
    env: { PATH: bin, HOME: home, TZ: "UTC", LANG: "C.UTF-8", CLAWBRIDGE_LOG: "error", OPENCLAW_BUNDLED_SKILLS_DIR: bundled },
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });
  const replacements = [[home, HOME], [openclaw, PACKAGE], [bundled, `${HOME}/bundled-skills`]];
  return scrub({ request: { system: [out], messages: [] } }, replacements).request.system;
}

/** A scratch folder for clawbridge's side, with the stand-ins and Node on its `bin/`. */
function scratchFolder() {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "live-lane-check-"));
  const bin = path.join(scratch, "bin");
  fs.mkdirSync(bin);
  for (const name of fs.readdirSync(path.join(lane, "bin"))) {
    fs.copyFileSync(path.join(lane, "bin", name), path.join(bin, name));
    fs.chmodSync(path.join(bin, name), 0o755);
  }
  fs.symlinkSync(process.execPath, path.join(bin, "node"));
  return scratch;
}

/** A recorded scenario's capture files, each with its scenario of SET. */
function capturesOf(records, set) {
  return fs
    .readdirSync(records)
    .filter((name) => name.endsWith(".json"))
    .sort()
    .map((file) => {
      const capture = JSON.parse(fs.readFileSync(path.join(records, file), "utf8"));
      const scenario = set.find((candidate) => candidate.name === capture.scenario);
      if (!scenario) throw new Error(`${file}: no scenario ${capture.scenario} (record it again)`);
      return { file, capture, scenario };
    });
}

// ---------------------------------------------------------------------------------------------
// The seed audit of an embedded run: where OpenClaw put each workspace file in the request,
// against where clawbridge's own prompt for the same run puts it (the spec), in the rows of
// `clawbridge audit --json`, so scripts/seed-audit-record.mjs writes the record.
// ---------------------------------------------------------------------------------------------
const BOOTSTRAP = ["AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "HEARTBEAT.md", "BOOTSTRAP.md", "MEMORY.md"];
const LAYERS = { "# Project Context": "projectContext", "# Dynamic Project Context": "dynamicProjectContext" };

/** Where FILE's text landed in a prompt's blocks and messages: [{layer, how}]. */
function landings(blocks, messages, file, text, contentLines) {
  const found = [];
  const whole = text.trim();
  for (const section of sections(blocks, contentLines)) {
    const layer = LAYERS[section.heading];
    if (!layer) continue;
    for (const entry of projectFiles(section.text)) {
      if (path.basename(entry.path) !== file) continue;
      found.push({ layer, how: entry.content === whole ? "whole" : "cut" });
    }
  }
  if (messages.some((message) => message.role === "user" && message.text.includes(whole))) found.push({ layer: "turnInput", how: "whole" });
  return found;
}

function auditRow(file, spec, openclaw, model) {
  const names = (list) => list.map((landing) => `${AUDIT_LAYER[landing.layer]}${landing.how === "whole" ? "" : ` (${landing.how})`}`).join(", ");
  let verdict;
  let detail;
  if (spec.length === 0 && openclaw.length === 0) [verdict, detail] = ["asSpec", "sent nowhere, as the spec says"];
  else if (spec.length === 0) [verdict, detail] = ["extra", `the spec sends it nowhere; OpenClaw sent it in ${names(openclaw)}`];
  else if (openclaw.length === 0) [verdict, detail] = ["missing", `the spec sends it in ${names(spec)}; OpenClaw sent it nowhere`];
  else if (json(spec.map((l) => l.layer)) !== json(openclaw.map((l) => l.layer))) [verdict, detail] = ["moved", `${names(spec)} → ${names(openclaw)}`];
  else if (json(spec) !== json(openclaw)) [verdict, detail] = ["truncated", `${names(spec)}, but ${names(openclaw)}`];
  else [verdict, detail] = ["asSpec", names(spec)];
  return { detail, file, model, openclaw, spec, verdict };
}
const AUDIT_LAYER = { projectContext: "Project Context", dynamicProjectContext: "Dynamic Project Context", turnInput: "turn input" };

function audit(args) {
  const clawbridge = arg(args, "--clawbridge");
  const openclaw = arg(args, "--openclaw");
  const records = arg(args, "--records");
  const out = arg(args, "--out");
  const scratch = scratchFolder();
  try {
    for (const { capture, scenario } of capturesOf(records, SEED_AUDIT)) {
      const ours = ourPrompt(scenario, capture, clawbridge, openclaw, scratch);
      const contentLines = new Set(Object.values(capture.workspace).flatMap((text) => text.split("\n")));
      const { system, messages } = capture.request;
      const rows = BOOTSTRAP.filter((file) => file in capture.workspace).map((file) => {
        const text = capture.workspace[file];
        const theirs = landings(system, messages, file, text, contentLines);
        const everywhere = [...system, ...messages.map((message) => message.text)].join("\n");
        const model = everywhere.includes(text.trim()) ? "whole" : everywhere.includes(text.trim().slice(0, 120)) ? "cut" : null;
        return auditRow(file, landings(ours, [], file, text, contentLines), theirs, model);
      });
      const verdicts = {};
      for (const row of rows) verdicts[row.verdict] = (verdicts[row.verdict] ?? 0) + 1;
      const flags = rows.filter((row) => row.spec.length > 0 && row.model === null).map((row) => `${row.file} never reached the model`);
      const report = {
        client: `openclaw ${capture.openclaw} (its own embedded runtime)`,
        threads: [{
          cwd: "fixtures/workspace",
          thread: "embedded run",
          turns: [{
            turn: 1, route: "as-sent", flags, rows,
            inferred: ["workspace: fixtures/workspace (given)", `session key: ${scenario.sessionKey ?? capture.facts.sessionKey} (given)`],
            notes: [`the system prompt in ${system.length} block(s) split at the cache boundary`, `the user message: ${JSON.stringify(messages.at(-1)?.text ?? "")}`],
          }],
        }],
        verdicts,
      };
      fs.writeFileSync(path.join(out, `${scenario.name}.audit.json`), `${JSON.stringify(report, null, 2)}\n`);
    }
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

function check(mode, args) {
  const clawbridge = arg(args, "--clawbridge");
  const openclaw = arg(args, "--openclaw");
  const records = arg(args, "--records");
  const scratch = scratchFolder();
  const report = [];
  let failures = 0;
  const tally = {};
  try {
    const captures = capturesOf(records, SCENARIOS);
    for (const { capture, scenario } of captures) {
      const ours = ourPrompt(scenario, capture, clawbridge, openclaw, scratch);
      // LIVE_LANE_SHOW=DIR: both prompts of each scenario written there, to read side by side.
      if (process.env.LIVE_LANE_SHOW) {
        fs.mkdirSync(process.env.LIVE_LANE_SHOW, { recursive: true });
        fs.writeFileSync(path.join(process.env.LIVE_LANE_SHOW, `${scenario.name}.openclaw.md`), capture.request.system.join(`\n${BOUNDARY}\n`));
        fs.writeFileSync(path.join(process.env.LIVE_LANE_SHOW, `${scenario.name}.clawbridge.md`), ours.join("\n"));
      }
      const rows = compare(scenario, capture.request.system, ours, capture.workspace);
      report.push(`## ${scenario.name}\n`, `${scenario.how === "cli" ? `\`openclaw agent --local --session-key ${scenario.sessionKey}\`` : scenario.how === "heartbeat" ? "a Gateway heartbeat (`openclaw system event --mode now`)" : `a Gateway cron job (\`--session isolated${scenario.light ? " --light-context" : ""}\`, run now)`}: ${JSON.stringify(scenario.message)}\n`, "| Section | Verdict | Detail |", "|---|---|---|");
      for (const [section, verdict, detail] of rows) {
        report.push(`| ${section.replace(/\|/g, "\\|")} | ${verdict} | ${detail.replace(/\|/g, "\\|").replace(/\n/g, " ")} |`);
        tally[verdict] = (tally[verdict] ?? 0) + 1;
        if (verdict === "DIFFERS") failures += 1;
      }
      report.push("");
    }
    const summary = Object.entries(tally).sort().map(([verdict, count]) => `- ${verdict}: ${count}`);
    const text = [`# Live lane: OpenClaw ${path.basename(records)} against clawbridge prompt`, "", `${captures.length} scenarios. Verdicts by class:`, "", ...summary, "", ...report].join("\n");
    const recordFile = `${records}.md`;
    if (mode === "update") {
      fs.writeFileSync(recordFile, text);
      console.log(`live-lane: wrote ${path.relative(root, recordFile)}`);
    } else {
      const committed = fs.existsSync(recordFile) ? fs.readFileSync(recordFile, "utf8") : "";
      if (committed !== text) {
        fs.writeFileSync(path.join(scratch, "record.md"), text);
        try {
          execFileSync("diff", ["-u", recordFile, path.join(scratch, "record.md")], { stdio: "inherit" });
        } catch {}
        console.error(`live-lane: ${path.relative(root, recordFile)} drifted (scripts/live-lane --update, and say why in the commit)`);
        failures += 1;
      }
    }
    if (failures) {
      for (const line of report.filter((line) => line.includes("| DIFFERS |"))) console.error(line);
      console.error(`live-lane: ${failures} difference(s) no deviation explains`);
      process.exitCode = 1;
    } else {
      console.log(`live-lane: ${captures.length} scenarios; ${summary.join(", ").replace(/- /g, "")}`);
    }
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

const [command, ...rest] = process.argv.slice(2);
if (command === "record") await record(rest);
else if (command === "check" || command === "update") check(command, rest);
else if (command === "audit") audit(rest);
else {
  console.error("usage: live-lane.mjs record|check|update|audit ...");
  process.exitCode = 2;
}
