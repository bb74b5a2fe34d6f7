/**
 * A typed client for the clawbridge bridge API (`clawbridge serve`): JSON-RPC 2.0 over WebSocket.
 *
 * The types come from the two documents clawbridge generates from its own Rust types
 * (docs/openrpc.json, docs/run-document.schema.json; see scripts/generate-types.mjs), so they
 * follow the server. The token is read from the serve state dir (`<state-dir>/token`) unless one
 * is given; `ws` sends no `Origin`, which is what the server accepts from a non-browser client.
 */
import { readFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import WebSocket from "ws";

import type {
  Acknowledged,
  CodexParams,
  ContextReport,
  Decision,
  PromptAnswer,
  RunEvent,
  RunStarted,
  Status,
  Steered,
  BridgeMethod,
  BridgeMethods,
  PromptParams,
} from "./generated/api.js";
import type { RunDocument } from "./generated/run-document.js";

export type * from "./generated/api.js";
export type { RunDocument } from "./generated/run-document.js";

/** A JSON-RPC error from the bridge, with its stable code (4001, 4003, 4004, 4100, ...). */
export class BridgeError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(`${message} (code ${code})`);
    this.name = "BridgeError";
  }
}

/** Where `clawbridge serve` keeps its state by default (the same rule as the server). */
export function defaultStateDir(): string {
  const home = os.homedir();
  if (process.platform === "darwin") {
    return path.join(home, "Library", "Application Support", "clawbridge");
  }
  const state = process.env.XDG_STATE_HOME;
  return path.join(state && path.isAbsolute(state) ? state : path.join(home, ".local", "state"), "clawbridge");
}

/** The bearer token `serve` wrote into its state dir. */
export async function readToken(stateDir: string = defaultStateDir()): Promise<string> {
  const file = path.join(stateDir, "token");
  const text = await readFile(file, "utf8").catch((error: NodeJS.ErrnoException) => {
    throw new Error(`cannot read the clawbridge token at ${file} (${error.code ?? error.message}); start \`clawbridge serve\` once or pass a token`);
  });
  return text.trim();
}

export interface ConnectOptions {
  /** `ws://127.0.0.1:7077` by default. */
  url?: string;
  /** The bearer token; else read from `stateDir`. */
  token?: string;
  stateDir?: string;
  /** How long one request may take (default 60 s). */
  requestTimeoutMs?: number;
  /**
   * Send the token over a plain `ws://` (or `http://`) URL to a host that is not loopback. Off by
   * default: the token would cross the network in clear. Use `wss://` instead.
   */
  allowInsecureRemote?: boolean;
}

/** True for `localhost`, `127.0.0.0/8` and `::1`. */
function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  return host === "localhost" || host === "::1" || /^127(\.\d{1,3}){3}$/.test(host);
}

/** Refuse to send a token in clear to another host (unless told). */
export function checkUrl(url: string, allowInsecureRemote = false): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`not a URL: ${url}`);
  }
  const plain = parsed.protocol === "ws:" || parsed.protocol === "http:";
  if (!["ws:", "wss:", "http:", "https:"].includes(parsed.protocol)) {
    throw new Error(`${url}: use ws://, wss://, http:// or https://`);
  }
  if (plain && !isLoopbackHost(parsed.hostname) && !allowInsecureRemote) {
    throw new Error(
      `refusing to send the clawbridge token in clear to ${parsed.host} (${parsed.protocol}//): use wss://, a loopback address, or allowInsecureRemote: true`,
    );
  }
}

/** A run's parameters: the run document, with the by-name extras of params/context/prompt. */
export type RunRequest = PromptParams & { detail?: boolean };

/** Events held for a subscription whose id has not been seen yet, and how many such ids. */
const MAX_EARLY_EVENTS = 100_000;
const MAX_EARLY_SUBSCRIPTIONS = 16;

type Pending = { resolve: (value: unknown) => void; reject: (error: Error) => void; timer: NodeJS.Timeout };

/** A queue that an async iterator drains: events pushed by the socket, pulled by the caller. */
class EventQueue<T> implements AsyncIterableIterator<T> {
  private items: T[] = [];
  private waiting: ((result: IteratorResult<T>) => void)[] = [];
  private failure: Error | undefined;
  private ended = false;

  push(item: T) {
    const waiter = this.waiting.shift();
    if (waiter) waiter({ value: item, done: false });
    else this.items.push(item);
  }

  end(error?: Error) {
    this.ended = true;
    this.failure = error;
    for (const waiter of this.waiting.splice(0)) waiter({ value: undefined, done: true });
  }

  next(): Promise<IteratorResult<T>> {
    const item = this.items.shift();
    if (item !== undefined) return Promise.resolve({ value: item, done: false });
    if (this.failure) return Promise.reject(this.failure);
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  return(): Promise<IteratorResult<T>> {
    this.end();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}

/** One connection to `clawbridge serve`. */
export class ClawbridgeClient {
  private nextId = 1;
  private pending = new Map<number, Pending>();
  private subscriptions = new Map<string, EventQueue<RunEvent>>();
  /** Events that arrived before their subscription's id did (the server replays a run at once,
   * often in the same read as the subscribe answer). Bounded: a few subscriptions' worth. */
  private early = new Map<string, RunEvent[]>();

  private constructor(
    private readonly socket: WebSocket,
    private readonly timeoutMs: number,
  ) {
    socket.on("message", (data) => this.receive(data.toString()));
    socket.on("close", () => this.closed(new Error("the connection to clawbridge closed")));
    socket.on("error", (error) => this.closed(error));
  }

  /** Connect and authenticate (the token from `options.token`, else the state dir). */
  static async connect(options: ConnectOptions = {}): Promise<ClawbridgeClient> {
    const url = options.url ?? "ws://127.0.0.1:7077";
    checkUrl(url, options.allowInsecureRemote);
    const token = options.token ?? (await readToken(options.stateDir));
    const socket = new WebSocket(url, {
      headers: { Authorization: `Bearer ${token}` },
    });
    await new Promise<void>((resolve, reject) => {
      socket.once("open", () => resolve());
      socket.once("unexpected-response", (_, response) =>
        reject(new BridgeError(response.statusCode ?? 0, `clawbridge refused the connection: HTTP ${response.statusCode}`)),
      );
      socket.once("error", reject);
    });
    return new ClawbridgeClient(socket, options.requestTimeoutMs ?? 60_000);
  }

  /** Any method, untyped (the typed helpers below cover every documented one). */
  request<T = unknown>(method: BridgeMethod | string, params: unknown = []): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${method}: no answer within ${this.timeoutMs} ms`));
      }, this.timeoutMs);
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject, timer });
      this.socket.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }), (error) => {
        if (error) {
          clearTimeout(timer);
          this.pending.delete(id);
          reject(error);
        }
      });
    });
  }

  /**
   * A documented method, typed by the generated method table (`BridgeMethods`, from
   * docs/openrpc.json): params by name, the answer as the server describes it.
   */
  call<M extends BridgeMethod>(
    method: M,
    params: BridgeMethods[M]["params"],
  ): Promise<BridgeMethods[M]["result"]> {
    return this.request(method, params);
  }

  params(request: RunRequest | RunDocument): Promise<CodexParams> {
    const { run, detail } = asRunRequest(request);
    return this.call("bridge.params", { run, detail });
  }

  context(request: RunRequest | RunDocument): Promise<ContextReport> {
    const { run, detail } = asRunRequest(request);
    return this.call("bridge.context", { run, detail });
  }

  prompt(request: RunRequest | RunDocument): Promise<PromptAnswer> {
    return this.call("bridge.prompt", asRunRequest(request));
  }

  /** Start a run; answers once its thread is open. */
  runStart(run: RunDocument): Promise<RunStarted> {
    return this.call("bridge.runStart", { run });
  }

  /** A run's events from its start, ending after `turnEnd`. */
  async subscribeRun(runId: string): Promise<AsyncIterableIterator<RunEvent>> {
    const queue = new EventQueue<RunEvent>();
    const subscription = await this.call("bridge.subscribeRun", { runId });
    const key = String(subscription);
    this.subscriptions.set(key, queue);
    const original = queue.push.bind(queue);
    queue.push = (event: RunEvent) => {
      original(event);
      if (event.event === "turnEnd") {
        this.subscriptions.delete(key);
        queue.end();
        void this.request("bridge.unsubscribeRun", [subscription]).catch(() => undefined);
      }
    };
    const early = this.early.get(key) ?? [];
    this.early.delete(key);
    for (const event of early) queue.push(event);
    return queue;
  }

  /** Start a run and iterate its events: the common case in one call. */
  async *run(run: RunDocument): AsyncGenerator<RunEvent, void, undefined> {
    const started = await this.runStart(run);
    yield* await this.subscribeRun(started.runId);
  }

  /** Answer a `toolCall` event with text (or Codex content items). */
  toolResult(
    callId: string,
    result: { text: string; success?: boolean } | { contentItems: unknown[]; success?: boolean },
  ): Promise<Acknowledged> {
    return this.call("bridge.toolResult", { callId, ...result });
  }

  /** Answer an `approvalRequest` event. */
  approval(approvalId: string, decision: Decision): Promise<Acknowledged> {
    return this.call("bridge.approval", { approvalId, decision });
  }

  runInterrupt(runId: string): Promise<Acknowledged> {
    return this.call("bridge.runInterrupt", { runId });
  }

  /** Add the user's text to a run's running turn (`turn/steer`); the turn's id. */
  runSteer(runId: string, input: string): Promise<Steered> {
    return this.call("bridge.runSteer", { runId, input });
  }

  /**
   * Start a run, or, when the session has a turn running, add its message to that turn
   * (`queue: "steer"`): the answer then names the running run and says `steered: true`.
   */
  runStartOrSteer(run: RunDocument): Promise<RunStarted> {
    return this.call("bridge.runStart", { run, queue: "steer" });
  }

  status(): Promise<Status> {
    return this.call("bridge.status", {});
  }

  /** The OpenRPC document the server describes itself with. */
  discover(): Promise<Record<string, unknown>> {
    return this.call("rpc.discover", {});
  }

  close(): void {
    this.socket.close();
  }

  private receive(text: string) {
    let message: {
      id?: number;
      result?: unknown;
      error?: { code: number; message: string; data?: unknown };
      method?: string;
      params?: { subscription: string | number; result: RunEvent };
    };
    try {
      message = JSON.parse(text);
    } catch {
      return;
    }
    if (message.method === "bridge.runEvent" && message.params) {
      const key = String(message.params.subscription);
      const queue = this.subscriptions.get(key);
      if (queue) {
        queue.push(message.params.result);
      } else {
        const held = this.early.get(key) ?? [];
        if (held.length < MAX_EARLY_EVENTS && (this.early.has(key) || this.early.size < MAX_EARLY_SUBSCRIPTIONS)) {
          held.push(message.params.result);
          this.early.set(key, held);
        }
      }
      return;
    }
    if (typeof message.id !== "number") return;
    const pending = this.pending.get(message.id);
    if (!pending) return;
    this.pending.delete(message.id);
    clearTimeout(pending.timer);
    if (message.error) pending.reject(new BridgeError(message.error.code, message.error.message, message.error.data));
    else pending.resolve(message.result);
  }

  private closed(error: Error) {
    for (const [id, pending] of this.pending) {
      clearTimeout(pending.timer);
      pending.reject(error);
      this.pending.delete(id);
    }
    for (const queue of this.subscriptions.values()) queue.end(error);
    this.subscriptions.clear();
  }
}

function asRunRequest(request: RunRequest | RunDocument): RunRequest {
  return "run" in request && typeof (request as RunRequest).run === "object" ? (request as RunRequest) : { run: request as RunDocument };
}
