// clawbridge against the real OpenClaw, timed in the same run (scripts/bench-vs-openclaw runs it).
//
// Usage: node bench.mjs --openclaw <node_modules/openclaw> --clawbridge <release binary>
//                       --inprocess <translate bench binary> [--rounds N]
//
// One generated at-caps workspace (8 bootstrap files of 25,000 chars, 150 skills of 3,000 chars,
// 15 tools: the translate bench's shape). OpenClaw's in-process work for one Codex turn is its
// own compiled functions: bootstrap loading and truncation (resolveBootstrapContextForRun), the
// skills prompt (buildWorkspaceSkillsPrompt), the developer and collaboration instructions. It is
// timed cold (the first call in a fresh Node process, import excluded) and warm (repeated calls
// in one process). clawbridge is timed whole-process (`clawbridge params`) and in-process (the
// translate bench binary's BENCH_RUN mode, cold and with a warm skill cache). Every round takes
// one sample of each, alternating, so machine drift cancels; medians over the rounds are printed
// with the ratios.

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { loadOpenClaw } from "./openclaw.mjs";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, index, all) => {
    if (arg.startsWith("--")) pairs.push([arg.slice(2), all[index + 1]?.startsWith("--") ? true : all[index + 1] ?? true]);
    return pairs;
  }, []),
);

// Every side reads HOME, the state dir and the bundled skills folder: empty throwaway ones.
function sandbox(root) {
  const env = {
    HOME: path.join(root, "home"),
    OPENCLAW_STATE_DIR: path.join(root, "state"),
    OPENCLAW_BUNDLED_SKILLS_DIR: path.join(root, "bundled-skills"),
    OPENCLAW_LOG_LEVEL: "silent",
    CLAWBRIDGE_LOG: "error",
  };
  for (const key of ["HOME", "OPENCLAW_STATE_DIR", "OPENCLAW_BUNDLED_SKILLS_DIR"]) fs.mkdirSync(env[key], { recursive: true });
  Object.assign(process.env, env);
  return env;
}

async function openclawWork(openclawDir) {
  const { oc } = await loadOpenClaw(openclawDir);
  const config = { agents: { defaults: { heartbeat: { every: "30m" } } }, plugins: { enabled: false } };
  return async (workspaceDir, dynamicTools) => {
    const { contextFiles } = await oc.resolveBootstrapContextForRun({ workspaceDir, config, sessionKey: "agent:main:main", agentId: "main", warn: () => {} });
    const skillsPrompt = oc.buildWorkspaceSkillsPrompt(workspaceDir, {
      config,
      managedSkillsDir: path.join(process.env.OPENCLAW_STATE_DIR, "skills"),
      bundledSkillsDir: process.env.OPENCLAW_BUNDLED_SKILLS_DIR,
    });
    const developer = oc.buildDeveloperInstructions({ sourceReplyDeliveryMode: "automatic" }, { dynamicTools });
    const collaboration = oc.buildTurnCollaborationMode({ trigger: "user", modelId: "gpt-5.5", thinkLevel: "medium" }, {
      model: "gpt-5.5",
      skillsCollaborationInstructions: `## OpenClaw Skills\n\n${skillsPrompt}`,
    });
    return JSON.stringify({ contextFiles, developer, collaboration, dynamicTools }).length;
  };
}

// Child mode: one cold call in this fresh process, printed in microseconds.
if (args.child) {
  const root = args.child;
  sandbox(path.join(root, "sandbox"));
  const work = await openclawWork(args.openclaw);
  const dynamicTools = JSON.parse(fs.readFileSync(path.join(root, "dynamic-tools.json"), "utf8"));
  const started = process.hrtime.bigint();
  await work(path.join(root, "workspace"), dynamicTools);
  console.log(Number(process.hrtime.bigint() - started) / 1000);
  process.exit(0);
}

const rounds = Number(args.rounds ?? 15);
const root = fs.mkdtempSync(path.join(os.tmpdir(), "clawbridge-bench-"));
const env = sandbox(path.join(root, "sandbox"));

// The translate bench's workload, written the same way.
function paragraph(seed, chars) {
  const words = ["agent", "workspace", "memory", "the", "careful", "notes", "and", "tools", "ü", "naïve"];
  let text = "";
  let i = seed;
  while ([...text].length < chars) {
    text += words[i % words.length] + (i % 13 === 0 ? "\n" : " ");
    i += 7;
  }
  return [...text].slice(0, chars).join("");
}
const workspace = path.join(root, "workspace");
fs.mkdirSync(path.join(workspace, "skills"), { recursive: true });
["AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "HEARTBEAT.md", "BOOTSTRAP.md", "MEMORY.md"].forEach((name, index) => {
  fs.writeFileSync(path.join(workspace, name), paragraph(index * 3, 25_000));
});
for (let index = 0; index < 150; index += 1) {
  const name = `skill-${String(index).padStart(3, "0")}`;
  const header = `---\nname: ${name}\ndescription: Skill number ${index} for ${paragraph(index, 120).replace(/\n/g, " ")}\n---\n\n`;
  fs.mkdirSync(path.join(workspace, "skills", name), { recursive: true });
  fs.writeFileSync(path.join(workspace, "skills", name, "SKILL.md"), header + paragraph(index * 31, Math.max(0, 3000 - [...header].length)));
}
const tools = [...Array(15)].map((_, i) => ({
  name: `tool_${String(i).padStart(2, "0")}`,
  description: paragraph(i, 200),
  inputSchema: { type: "object", properties: { action: { type: "string", enum: ["a", "b", "c"], description: paragraph(i + 1, 120) }, target: { type: "string", description: paragraph(i + 2, 80) } }, required: ["action"] },
}));
const runFile = path.join(workspace, "run.json");
fs.writeFileSync(runFile, JSON.stringify({ workspace: ".", message: "Summarize the workspace.", tools, channel: { name: "telegram", chatType: "direct" } }));
const childEnv = { ...process.env, ...env };
const params = JSON.parse(execFileSync(args.clawbridge, ["params", runFile, "--state-dir", path.join(root, "cb-state")], { env: childEnv, encoding: "utf8", maxBuffer: 64 << 20 }));
const dynamicTools = params.threadStart.dynamicTools;
fs.writeFileSync(path.join(root, "dynamic-tools.json"), JSON.stringify(dynamicTools));

const work = await openclawWork(args.openclaw);
await work(workspace, dynamicTools);
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const wall = (run) => {
  const started = process.hrtime.bigint();
  run();
  return Number(process.hrtime.bigint() - started) / 1000;
};
const samples = { ocCold: [], ocWarm: [], cbProcess: [], spawn: [], cbCold: [], cbWarm: [] };
for (let round = 0; round < rounds; round += 1) {
  samples.ocCold.push(Number(execFileSync(process.execPath, [new URL(import.meta.url).pathname, "--child", root, "--openclaw", args.openclaw], { env: childEnv, encoding: "utf8" }).trim()));
  const warm = [];
  for (let i = 0; i < 5; i += 1) {
    const started = process.hrtime.bigint();
    await work(workspace, dynamicTools);
    warm.push(Number(process.hrtime.bigint() - started) / 1000);
  }
  samples.ocWarm.push(median(warm));
  const whole = [];
  for (let i = 0; i < 5; i += 1) {
    whole.push(wall(() => execFileSync(args.clawbridge, ["params", runFile, "--state-dir", path.join(root, "cb-state")], { env: childEnv, stdio: ["ignore", "ignore", "ignore"] })));
  }
  samples.cbProcess.push(median(whole));
  // What spawning any process from here costs (part of the whole-process figure).
  const spawn = [];
  for (let i = 0; i < 5; i += 1) spawn.push(wall(() => execFileSync("/bin/true", [], { stdio: "ignore" })));
  samples.spawn.push(median(spawn));
  const inProcess = JSON.parse(execFileSync(args.inprocess, [], { env: { ...childEnv, BENCH_RUN: runFile, BENCH_ROUNDS: "5" }, encoding: "utf8" }));
  samples.cbCold.push(inProcess.coldUs);
  samples.cbWarm.push(inProcess.warmUs);
}
const m = Object.fromEntries(Object.entries(samples).map(([key, values]) => [key, median(values)]));
const ms = (us) => `${(us / 1000).toFixed(2)} ms`;
console.log(`bench vs openclaw: 8 bootstrap files x 25000 chars, 150 skills x 3000 chars, 15 tools; ${rounds} alternating rounds, medians`);
console.log(`  OpenClaw in-process, cold (first call in a fresh Node): ${ms(m.ocCold)}`);
console.log(`  OpenClaw in-process, warm (repeated calls)            : ${ms(m.ocWarm)}`);
console.log(`  clawbridge whole process (clawbridge params)          : ${ms(m.cbProcess)} (spawning /bin/true the same way: ${ms(m.spawn)})`);
console.log(`  clawbridge in-process, cold                           : ${ms(m.cbCold)}`);
console.log(`  clawbridge in-process, warm skill cache (serve)       : ${ms(m.cbWarm)}`);
console.log("ratios (OpenClaw time / clawbridge time):");
console.log(`  OpenClaw cold in-process / clawbridge whole process : ${(m.ocCold / m.cbProcess).toFixed(2)}x`);
console.log(`  OpenClaw cold in-process / clawbridge cold in-process: ${(m.ocCold / m.cbCold).toFixed(2)}x`);
console.log(`  OpenClaw warm in-process / clawbridge warm in-process: ${(m.ocWarm / m.cbWarm).toFixed(2)}x`);
console.log(`  OpenClaw warm in-process / clawbridge whole process  : ${(m.ocWarm / m.cbProcess).toFixed(2)}x`);
fs.rmSync(root, { recursive: true, force: true });
