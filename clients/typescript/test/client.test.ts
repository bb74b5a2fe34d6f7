// The client against a real `clawbridge serve --offline` (the loopback model stub, a throwaway
// CODEX_HOME): a turn, a tool call answered, an interrupt, and a resumed session.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";

import { BridgeError, ClawbridgeClient, checkUrl, type RunDocument, type RunEvent } from "../src/index.js";

// Protection: the token never goes in clear to another host unless the caller says so.
describe("URL check", () => {
  test("a plain ws:// or http:// URL to another host is refused before anything is sent", async () => {
    for (const url of ["ws://203.0.113.5:7077", "http://example.com:7077", "ws://[2001:db8::1]:7077"]) {
      assert.throws(() => checkUrl(url), /refusing to send the clawbridge token/, url);
      await assert.rejects(ClawbridgeClient.connect({ url, token: "t0123456789abcdef0123" }), /refusing/);
    }
    for (const url of ["ws://127.0.0.1:7077", "ws://localhost:1", "ws://[::1]:7077", "wss://example.com", "ws://127.8.9.10:5"]) {
      assert.doesNotThrow(() => checkUrl(url), url);
    }
    assert.doesNotThrow(() => checkUrl("ws://203.0.113.5:7077", true));
    assert.throws(() => checkUrl("file:///etc/passwd"), /use ws/);
  });
});

const binary = process.env.CLAWBRIDGE_BIN ?? path.resolve(process.cwd(), "../../target/debug/clawbridge");
const codex = process.env.CLAWBRIDGE_CODEX_BIN;

interface Served {
  child: ChildProcess;
  url: string;
  stateDir: string;
  workspace: string;
  dir: string;
}

/** The environment without CLAWBRIDGE_TOKEN: serve generates the token file the client reads. */
function withoutToken(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.CLAWBRIDGE_TOKEN;
  return env;
}

async function serve(steps: unknown[]): Promise<Served> {
  assert.ok(codex, "CLAWBRIDGE_CODEX_BIN must name a Codex CLI (scripts/test sets it; scripts/install-codex prints one)");
  const dir = await mkdtemp(path.join(os.tmpdir(), "clawbridge-ts-"));
  const workspace = path.join(dir, "root", "ws");
  await mkdir(workspace, { recursive: true });
  await writeFile(path.join(workspace, "SOUL.md"), "Be brief.\n");
  const script = path.join(dir, "script.json");
  await writeFile(script, JSON.stringify({ responses: steps }));
  const stateDir = path.join(dir, "state");
  const child = spawn(
    binary,
    ["serve", "--listen", "127.0.0.1:0", "--offline", "--workspace-root", path.join(dir, "root"),
     "--state-dir", stateDir, "--codex-bin", codex, "--stub-script", script],
    { stdio: ["ignore", "pipe", "pipe"], env: withoutToken() },
  );
  let stderr = "";
  child.stderr?.on("data", (chunk) => (stderr += chunk));
  const address = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.once("line", (line) => resolve(line.trim()));
    child.once("exit", (code) => reject(new Error(`serve exited (${code}): ${stderr}`)));
  });
  return { child, url: `ws://${address}`, stateDir, workspace, dir };
}

async function stop(served: Served) {
  served.child.kill("SIGTERM");
  await new Promise((resolve) => served.child.once("exit", resolve));
  await rm(served.dir, { recursive: true, force: true });
}

const messageTool = { name: "message", description: "Send a message.", inputSchema: { type: "object" } };

async function collect(events: AsyncIterable<RunEvent>, onEvent?: (event: RunEvent) => Promise<void>) {
  const seen: RunEvent[] = [];
  for await (const event of events) {
    seen.push(event);
    if (onEvent) await onEvent(event);
  }
  return seen;
}

describe("clawbridge client", () => {
  test("runs a turn and answers its tool call", async () => {
    const served = await serve([
      { toolCall: { name: "message", arguments: { action: "send", message: "hi" } } },
      { text: "sent it" },
    ]);
    const client = await ClawbridgeClient.connect({ url: served.url, stateDir: served.stateDir });
    try {
      // directTools: offered directly (not behind tool_search), so the stub can call it.
      const run: RunDocument = { workspace: served.workspace, message: "say hi", tools: [messageTool], directTools: ["message"] };
      const params = await client.params(run);
      assert.ok("threadStart" in params, "params has threadStart");
      let answered = 0;
      const events = await collect(client.run(run), async (event) => {
        if (event.event === "toolCall") {
          assert.equal(event.tool, "message");
          await client.toolResult(event.callId, { text: "delivered", success: true });
          answered += 1;
        }
      });
      assert.equal(answered, 1, JSON.stringify(events.filter((e) => e.event !== "notification")));
      const end = events.at(-1);
      assert.ok(end && end.event === "turnEnd", "the last event is turnEnd");
      assert.equal(end.status, "completed");
      assert.deepEqual(end.agentMessages, ["sent it"]);
      assert.ok(events.some((event) => event.event === "notification"));
      const status = await client.status();
      assert.equal(status.codex.state, "running");
    } finally {
      client.close();
      await stop(served);
    }
  });

  test("resumes a session, then interrupts a run", async () => {
    const served = await serve([{ text: "first reply" }, { text: "second reply" }, "hang"]);
    const client = await ClawbridgeClient.connect({ url: served.url, stateDir: served.stateDir });
    try {
      const run: RunDocument = { workspace: served.workspace, message: "hello", sessionKey: "agent:main:ts-test" };
      const first = await client.runStart(run);
      const firstEvents = await collect(await client.subscribeRun(first.runId));
      const firstEnd = firstEvents.at(-1);
      assert.ok(firstEnd && firstEnd.event === "turnEnd");
      assert.deepEqual(firstEnd.agentMessages, ["first reply"]);
      // The same session again: the same Codex thread, with the first turn in its history.
      const second = await client.runStart({ ...run, message: "and again" });
      assert.equal(second.threadId, first.threadId);
      const again = await collect(await client.subscribeRun(second.runId));
      const secondEnd = again.at(-1);
      assert.ok(secondEnd && secondEnd.event === "turnEnd");
      assert.equal(secondEnd.status, "completed");
      assert.deepEqual(secondEnd.agentMessages, ["second reply"]);
      // A third run hangs at the model; interrupting it ends it as interrupted.
      const third = await client.runStart({ ...run, message: "wait" });
      const events = await collect(await client.subscribeRun(third.runId), async (event) => {
        if (event.event === "notification" && event.method === "turn/started") {
          await client.runInterrupt(third.runId);
        }
      });
      const end = events.at(-1);
      assert.ok(end && end.event === "turnEnd");
      assert.equal(end.status, "interrupted");
    } finally {
      client.close();
      await stop(served);
    }
  });

  test("steers a running turn", async () => {
    const served = await serve([{ delayed: { ms: 2500, step: { text: "working" } } }]);
    const client = await ClawbridgeClient.connect({ url: served.url, stateDir: served.stateDir });
    try {
      const run: RunDocument = { workspace: served.workspace, message: "start", sessionKey: "agent:main:ts-steer" };
      const started = await client.runStart(run);
      let steeredTurn: string | undefined;
      const events = await collect(await client.subscribeRun(started.runId), async (event) => {
        if (event.event === "notification" && event.method === "turn/started" && !steeredTurn) {
          steeredTurn = (await client.runSteer(started.runId, "STEER-FROM-TS")).turnId;
        }
      });
      const end = events.at(-1);
      assert.ok(end && end.event === "turnEnd");
      assert.equal(end.status, "completed");
      assert.equal(end.turnId, steeredTurn);
    } finally {
      client.close();
      await stop(served);
    }
  });

  test("bridge errors keep their codes, and a wrong token is refused", async () => {
    const served = await serve([]);
    try {
      const client = await ClawbridgeClient.connect({ url: served.url, stateDir: served.stateDir });
      await assert.rejects(client.runInterrupt("run-that-does-not-exist"), (error: unknown) =>
        error instanceof BridgeError && error.code === 4004);
      const described = await client.discover();
      assert.equal(described.openrpc, "1.3.2");
      client.close();
      await assert.rejects(
        ClawbridgeClient.connect({ url: served.url, token: "not-the-token-0123456789" }),
        (error: unknown) => error instanceof BridgeError && error.code === 401,
      );
    } finally {
      await stop(served);
    }
  });
});
