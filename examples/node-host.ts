// A typed Outrigger host in plain Node, written against schemas/outrigger.d.ts alone.
//
// It spawns the sidecar, waits for `lifecycle.ready`, pings it, runs one scripted turn
// (text and a `todo_write` call) and renders it as text, starts a slow second turn and
// cancels it, then shuts the sidecar down and checks that it exits 0. Any unexpected frame,
// error answer, early exit or timeout ends it with a message and exit code 1: CI runs it.
//
//   target/npm/node_modules/.bin/tsc -p examples     # type-check, emit target/node-host/
//   node target/node-host/node-host.js [path/to/outrigger]   # default target/debug/outrigger
//
// Everything the sidecar sends or accepts is typed by the three maps in the declarations:
// `Methods` (what `request` may call, with its params and result), `Notifications` and
// `ReverseRequests` (what the sidecar may send, and what the host answers).

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

import type {
  Message,
  Methods,
  Notifications,
  PROTOCOL_VERSION,
  ReverseRequests,
  RpcErrorObject,
  StreamChunk,
  StreamDone,
  StreamError,
} from "../schemas/outrigger.d.ts";

// Every wait is bounded, so nothing can hang CI.
const READY_TIMEOUT_MS = 10_000;
const REQUEST_TIMEOUT_MS = 10_000;
const TURN_TIMEOUT_MS = 30_000;
const CANCEL_DONE_TIMEOUT_MS = 10_000; // the sidecar promises stream.done within 5 s of a cancel
const EXIT_TIMEOUT_MS = 10_000;
const WHOLE_RUN_TIMEOUT_MS = 90_000;

// The literal type of the declarations' protocol version: if the sidecar's protocol moves,
// this line stops type-checking until the host is looked at.
const EXPECTED_PROTOCOL: typeof PROTOCOL_VERSION = "0.1.0";

// ---------------------------------------------------------------------------------------
// JSON-RPC 2.0 envelopes (the payloads inside them come from the declarations).

type Id = number | string | null;

type ErrorAnswer = { code: number; message: string; data?: unknown };

/** A method's error answer, as the sidecar sent it. */
class RpcError extends Error {
  constructor(
    readonly method: string,
    readonly error: RpcErrorObject,
  ) {
    super(`${method} answered ${error.code} (${error.kind}): ${error.message}`);
  }
}

/** A user message, in the one message shape `messages` takes and history returns. */
function user(content: string): Message {
  return { role: "user", content };
}

/** Ends the run: everything unexpected lands here. */
type Fail = (message: string) => never;

/** One handler per notification: adding a notification to the declarations fails `tsc`
 * here until the host handles it. */
type NotificationHandlers = {
  [N in keyof Notifications]: (params: Notifications[N]) => void;
};

/** The reverse requests this host implements; the others are answered -32601. */
type ReverseHandlers = {
  [R in keyof ReverseRequests]?: (
    params: ReverseRequests[R]["params"],
  ) => Promise<ReverseRequests[R]["result"]>;
};

type Pending = {
  method: string;
  resolve: (result: unknown) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
};

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function clip(s: string, n = 300): string {
  return s.length > n ? `${s.slice(0, n)}…` : s;
}

/** Resolves with `promise`, or fails the run after `ms`. */
function within<T>(promise: Promise<T>, ms: number, what: string, fail: Fail): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>(() => {
    timer = setTimeout(() => fail(`timed out after ${ms} ms waiting for ${what}`), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// ---------------------------------------------------------------------------------------
// The connection: one JSON object per line each way.

class Sidecar {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private stdoutBuffer = "";
  private readonly stderrTail: string[] = [];
  private expectingExit = false;
  readonly exited: Promise<number | null>;

  constructor(
    private readonly child: ChildProcessWithoutNullStreams,
    private readonly notifications: NotificationHandlers,
    private readonly reverse: ReverseHandlers,
    private readonly fail: Fail,
  ) {
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (data: string) => this.onStdout(data));
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (data: string) => {
      for (const line of data.split("\n")) {
        if (line !== "") this.stderrTail.push(line);
      }
      this.stderrTail.splice(0, Math.max(0, this.stderrTail.length - 40));
    });
    // A write to a sidecar that went away: `close` below reports the exit and stderr.
    child.stdin.on("error", (e: NodeJS.ErrnoException) => {
      if (e.code !== "EPIPE") this.fail(`writing to the sidecar failed: ${e.message}`);
    });
    // `close`: the process has exited and its stdout is read to the end.
    this.exited = new Promise((resolve) => {
      child.on("close", (code, signal) => {
        if (!this.expectingExit || this.pending.size > 0) {
          const unanswered = [...this.pending.values()].map((p) => p.method).join(", ");
          this.fail(
            `the sidecar exited unexpectedly (code ${code}, signal ${signal}; ` +
              `unanswered: ${unanswered || "none"})`,
          );
        }
        if (this.stdoutBuffer !== "") {
          this.fail(`stdout ended inside a line: ${clip(this.stdoutBuffer)}`);
        }
        resolve(code);
      });
    });
    child.on("error", (e) => this.fail(`could not run the sidecar: ${e.message}`));
  }

  /** Calls `method`; params and result are typed by the `Methods` map. */
  request<M extends keyof Methods>(
    method: M,
    params: Methods[M]["params"],
    timeoutMs = REQUEST_TIMEOUT_MS,
  ): Promise<Methods[M]["result"]> {
    const id = this.nextId++;
    return new Promise<Methods[M]["result"]>((resolve, reject) => {
      const timer = setTimeout(
        () => this.fail(`no answer to ${method} (id ${id}) within ${timeoutMs} ms`),
        timeoutMs,
      );
      this.pending.set(id, {
        method,
        resolve: (result) => resolve(result as Methods[M]["result"]),
        reject,
        timer,
      });
      this.send({ jsonrpc: "2.0", id, method, params });
    });
  }

  /** Tells the connection that the sidecar is about to exit (after `system.shutdown`). */
  expectExit(): void {
    this.expectingExit = true;
  }

  stderr(): string {
    return this.stderrTail.join("\n");
  }

  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.expectingExit = true;
      this.child.kill("SIGKILL");
    }
  }

  private send(frame: object): void {
    this.child.stdin.write(`${JSON.stringify(frame)}\n`);
  }

  private onStdout(data: string): void {
    this.stdoutBuffer += data;
    let newline: number;
    while ((newline = this.stdoutBuffer.indexOf("\n")) >= 0) {
      const line = this.stdoutBuffer.slice(0, newline);
      this.stdoutBuffer = this.stdoutBuffer.slice(newline + 1);
      this.onLine(line);
    }
  }

  private onLine(line: string): void {
    let frame: unknown;
    try {
      frame = JSON.parse(line);
    } catch {
      this.fail(`stdout line is not JSON: ${clip(line)}`);
    }
    if (!isObject(frame) || frame["jsonrpc"] !== "2.0") {
      this.fail(`not a JSON-RPC 2.0 object: ${clip(line)}`);
    }
    const method = frame["method"];
    if (typeof method === "string") {
      if ("id" in frame) {
        void this.onReverseRequest(frame["id"] as Id, method, frame["params"]);
      } else {
        this.onNotification(method, frame["params"]);
      }
      return;
    }
    this.onResponse(frame, line);
  }

  // The one place wire data becomes typed: the method name picks the handler, and the
  // handler's parameter type is the declarations' type for that name.
  private onNotification(method: string, params: unknown): void {
    if (!Object.hasOwn(this.notifications, method)) {
      this.fail(`unexpected notification ${method}: ${clip(JSON.stringify(params))}`);
    }
    if (!isObject(params)) this.fail(`${method} without params object`);
    const handler = this.notifications[method as keyof Notifications] as (p: unknown) => void;
    handler(params);
  }

  private async onReverseRequest(id: Id, method: string, params: unknown): Promise<void> {
    if (typeof id !== "string") this.fail(`reverse request ${method} with non-string id`);
    const handler = Object.hasOwn(this.reverse, method)
      ? (this.reverse[method as keyof ReverseRequests] as
          | ((p: unknown) => Promise<unknown>)
          | undefined)
      : undefined;
    if (handler === undefined) {
      const error: ErrorAnswer = {
        code: -32601,
        message: `method not found: ${method}`,
        data: { kind: "method_not_found", method },
      };
      this.send({ jsonrpc: "2.0", id, error });
      process.stderr.write(`node-host: answered -32601 to reverse request ${method}\n`);
      return;
    }
    try {
      this.send({ jsonrpc: "2.0", id, result: await handler(params) });
    } catch (e) {
      const error: ErrorAnswer = { code: -32603, message: String(e), data: { kind: "internal" } };
      this.send({ jsonrpc: "2.0", id, error });
    }
  }

  private onResponse(frame: Record<string, unknown>, line: string): void {
    const id = frame["id"];
    const pending = typeof id === "number" ? this.pending.get(id) : undefined;
    if (pending === undefined) this.fail(`response to no request of ours: ${clip(line)}`);
    this.pending.delete(id as number);
    clearTimeout(pending.timer);
    if ("error" in frame && !("result" in frame) && isObject(frame["error"])) {
      pending.reject(new RpcError(pending.method, frame["error"] as RpcErrorObject));
    } else if ("result" in frame && !("error" in frame)) {
      pending.resolve(frame["result"]);
    } else {
      this.fail(`malformed response to ${pending.method}: ${clip(line)}`);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Turns: collect a stream's notifications and render them as a chat UI would, in text.

type Turn = {
  streamId: string;
  text: string;
  toolCalls: string[];
  toolResults: { name: string; success: boolean }[];
  notices: string[];
  errors: StreamError[];
  firstDelta: Promise<void>;
  done: Promise<StreamDone>;
  onChunk: (chunk: StreamChunk) => void;
  onError: (error: StreamError) => void;
  onDone: (done: StreamDone) => void;
};

/** Writes a turn's events to stdout: text inline, everything else on its own line. */
class Renderer {
  private inText = false;

  text(delta: string): void {
    if (!this.inText) process.stdout.write("  assistant: ");
    process.stdout.write(delta);
    this.inText = true;
  }

  line(s: string): void {
    if (this.inText) process.stdout.write("\n");
    this.inText = false;
    process.stdout.write(`${s}\n`);
  }
}

function newTurn(streamId: string, out: Renderer, fail: Fail): Turn {
  let sawDelta: () => void = () => {};
  let finish: (done: StreamDone) => void = () => {};
  let finished = false;
  // `stream.done` is exactly one per stream, and last.
  const open = (what: string): void => {
    if (finished) fail(`${what} after stream.done on ${streamId}`);
  };
  const turn: Turn = {
    streamId,
    text: "",
    toolCalls: [],
    toolResults: [],
    notices: [],
    errors: [],
    firstDelta: new Promise((resolve) => (sawDelta = resolve)),
    done: new Promise((resolve) => (finish = resolve)),
    onChunk: (chunk) => {
      open("stream.chunk");
      if (chunk.delta != null) {
        turn.text += chunk.delta;
        out.text(chunk.delta);
        sawDelta();
      } else if (chunk.reasoningDelta != null) {
        out.line(`  (thinking) ${chunk.reasoningDelta}`);
      } else if (chunk.toolCall != null) {
        const call = chunk.toolCall;
        turn.toolCalls.push(call.name);
        out.line(`  -> ${call.name} ${clip(JSON.stringify(call.arguments), 200)}  [${call.id}]`);
      } else if (chunk.toolResult != null) {
        const r = chunk.toolResult;
        turn.toolResults.push({ name: r.name, success: r.success });
        const status = r.success ? "ok" : `failed: ${r.error ?? "?"}`;
        out.line(`  <- ${r.name} ${status}: ${clip(r.resultPreview, 120)}`);
      } else if (chunk.notice != null) {
        const n = chunk.notice;
        turn.notices.push(n.kind);
        if (n.kind === "todos" && Array.isArray(n["todos"])) {
          const items = (n["todos"] as { content?: unknown; status?: unknown }[]).map(
            (t) => `[${t.status === "completed" ? "x" : " "}] ${String(t.content)}`,
          );
          out.line(`  todos: ${items.join("  ")}`);
        } else if (n.kind === "round_end") {
          out.line(`  -- round ${String(n["round"])} ended`);
        } else {
          out.line(`  notice ${n.kind}: ${clip(JSON.stringify(n), 200)}`);
        }
      } else if (chunk.rawChunk == null) {
        fail(`stream.chunk with no payload: ${JSON.stringify(chunk)}`);
      }
    },
    onError: (error) => {
      open("stream.error");
      turn.errors.push(error);
      out.line(`  error (${error.kind}): ${error.message}`);
    },
    onDone: (done) => {
      open("stream.done");
      finished = true;
      const u = done.usage;
      out.line(
        `  done: ${done.status} (${done.reason}); ${u.promptTokens} prompt + ` +
          `${u.completionTokens} completion tokens; trace ${done.traceId}`,
      );
      finish(done);
    },
  };
  return turn;
}

// ---------------------------------------------------------------------------------------
// The run.

// A private home: no user config, plugins or store of the machine leak into the run.
const home = fs.mkdtempSync(path.join(os.tmpdir(), "outrigger-node-host-"));
let sidecar: Sidecar | undefined;

const fail: Fail = (message) => {
  process.stdout.write("\n");
  process.stderr.write(`node-host: FAIL: ${message}\n`);
  const tail = sidecar?.stderr() ?? "";
  if (tail !== "") process.stderr.write(`node-host: sidecar stderr (last lines):\n${tail}\n`);
  sidecar?.kill();
  fs.rmSync(home, { recursive: true, force: true });
  process.exit(1);
};

async function main(): Promise<void> {
  const bin = path.resolve(process.argv[2] ?? "target/debug/outrigger");
  const overall = () => fail(`the whole run took over ${WHOLE_RUN_TIMEOUT_MS} ms`);
  setTimeout(overall, WHOLE_RUN_TIMEOUT_MS).unref();

  const out = new Renderer();
  const turns = new Map<string, Turn>();
  const turnOf = (streamId: string): Turn =>
    turns.get(streamId) ?? fail(`a frame for a stream we did not start: ${streamId}`);
  let onReady: (ready: Notifications["lifecycle.ready"]) => void = () => {};
  const ready = new Promise<Notifications["lifecycle.ready"]>((resolve) => (onReady = resolve));
  let shutdownReason: string | undefined;
  let readyCount = 0;

  const notifications: NotificationHandlers = {
    "lifecycle.ready": (p) => {
      readyCount += 1;
      if (readyCount > 1) fail("a second lifecycle.ready");
      onReady(p);
    },
    "lifecycle.shutdown": (p) => {
      shutdownReason = p.reason;
    },
    "stream.chunk": (p) => turnOf(p.streamId).onChunk(p),
    "stream.error": (p) => turnOf(p.streamId).onError(p),
    "stream.done": (p) => turnOf(p.streamId).onDone(p),
    // A sub-agent's lifecycle on one of our streams (its own chunks are not sent).
    "agent.child": (p) => {
      turnOf(p.streamId);
      out.line(`  [sub-agent ${p.childId} ${p.kind.replace("child_", "")}${p.status ? `: ${p.status}` : ""}]`);
    },
  };
  // This host approves nothing it is asked about; the others get -32601.
  const reverse: ReverseHandlers = {
    "approval.request": async (p) => ({
      kind: "deny_once",
      reason: `the node-host example does not approve ${p.toolName}`,
    }),
  };

  const child = spawn(bin, ["--quiet-ready"], {
    env: { ...process.env, OUTRIGGER_HOME: home },
    stdio: ["pipe", "pipe", "pipe"],
  });
  sidecar = new Sidecar(child, notifications, reverse, fail);
  const rpc = sidecar;

  // 1. Ready, then ping.
  const hello = await within(ready, READY_TIMEOUT_MS, "lifecycle.ready", fail);
  if (hello.protocolVersion !== EXPECTED_PROTOCOL) {
    fail(`protocol ${hello.protocolVersion}, this host speaks ${EXPECTED_PROTOCOL}`);
  }
  const { version, protocolVersion, pid } = hello;
  out.line(`outrigger ${version} ready (protocol ${protocolVersion}, pid ${pid})`);
  const health = await rpc.request("system.ping", {});
  if (health.status !== "ok") fail(`system.ping status ${health.status}`);
  out.line(
    `ping: ${health.status}, ${health.loadedTools} tools, ${health.platform}, ` +
      `up ${health.uptimeMs} ms`,
  );

  // 2. One scripted turn: text, a todo_write call, its result, then the answer.
  const first = newTurn("str_node_host_1", out, fail);
  turns.set(first.streamId, first);
  out.line(`\nturn 1 (${first.streamId})`);
  const todos = [
    { id: "1", content: "Read the declarations", status: "completed" },
    { id: "2", content: "Write a typed host", status: "completed" },
  ];
  const started = await rpc.request("agent.chat.stream", {
    provider: "scripted",
    model: "scripted",
    streamId: first.streamId,
    messages: [user("Plan a typed host, then say so.")],
    script: [
      {
        text: ["Let me ", "plan this. "],
        toolCalls: [{ id: "todo_1", name: "todo_write", arguments: { todos } }],
        usage: { promptTokens: 30, completionTokens: 12 },
      },
      { text: ["Both steps ", "are done."], usage: { promptTokens: 60, completionTokens: 5 } },
    ],
    maxRounds: 4,
  });
  if (started.streamId !== first.streamId) {
    fail(`streamId ${started.streamId}, sent ${first.streamId}`);
  }
  const done1 = await within(first.done, TURN_TIMEOUT_MS, "turn 1's stream.done", fail);
  const want = "Let me plan this. Both steps are done.";
  if (done1.status !== "completed" || !done1.ok) {
    fail(`turn 1 ended ${done1.status}: ${done1.reason}`);
  }
  if (first.text !== want) {
    fail(`turn 1 text ${JSON.stringify(first.text)}, want ${JSON.stringify(want)}`);
  }
  if (first.toolCalls.join() !== "todo_write") fail(`turn 1 tool calls: ${first.toolCalls.join()}`);
  if (!first.toolResults.every((r) => r.success) || first.toolResults.length !== 1) {
    fail(`turn 1 tool results: ${JSON.stringify(first.toolResults)}`);
  }
  if (!first.notices.includes("todos")) fail(`turn 1 had no todos notice: ${first.notices.join()}`);
  if (first.errors.length > 0) fail(`turn 1 had stream.error: ${first.errors[0]?.message}`);

  // 3. A slow turn, cancelled once its first words arrive.
  const second = newTurn("str_node_host_2", out, fail);
  turns.set(second.streamId, second);
  out.line(`\nturn 2 (${second.streamId}), cancelled after the first words`);
  await rpc.request("agent.chat.stream", {
    provider: "scripted",
    model: "scripted",
    streamId: second.streamId,
    messages: [user("Count slowly.")],
    script: [{ text: ["One, ", "two, ", "three, ", "four, ", "five."], chunkDelayMs: 20_000 }],
  });
  await within(second.firstDelta, TURN_TIMEOUT_MS, "turn 2's first delta", fail);
  const cancelled = await rpc.request("agent.chat.cancel", { streamId: second.streamId });
  if (cancelled !== null) fail(`agent.chat.cancel answered ${JSON.stringify(cancelled)}`);
  const done2 = await within(second.done, CANCEL_DONE_TIMEOUT_MS, "turn 2's stream.done", fail);
  if (done2.status !== "cancelled" || done2.ok) {
    fail(`turn 2 ended ${done2.status}, want cancelled`);
  }

  // 4. Shut down: null, then lifecycle.shutdown {reason: "normal"}, then exit 0.
  rpc.expectExit();
  const bye = await rpc.request("system.shutdown", {});
  if (bye !== null) fail(`system.shutdown answered ${JSON.stringify(bye)}`);
  const code = await within(rpc.exited, EXIT_TIMEOUT_MS, "the sidecar to exit", fail);
  if (shutdownReason !== "normal") fail(`lifecycle.shutdown reason ${String(shutdownReason)}`);
  if (code !== 0) fail(`the sidecar exited with code ${code}`);
  out.line(`\nshutdown: reason ${shutdownReason}, exit code ${code}`);
  fs.rmSync(home, { recursive: true, force: true });
  process.stderr.write("node-host: OK\n");
  process.exit(0);
}

// An error answer (`RpcError`) or a bug in the host itself.
main().catch((e: unknown) => fail(e instanceof Error ? e.message : String(e)));
