// The target side of the callsafe target protocol (version 1) for Node.js programs, in
// TypeScript. `npm run build` compiles it to dist/src/callsafe-target.js (Node 20 runs the
// compiled JavaScript; it cannot run .ts itself).
//
// callsafe runs your program as `exec:node your-target.js` and speaks newline-delimited
// JSON on its stdin and stdout (docs/target-protocol.md). This module is the whole program
// side: `serve({...})` answers the handshake, builds a fresh target for every trace, hands
// it an `env` whose `execute`, `validate` and `observe` are messages to callsafe (the
// executor and the business validator stay callsafe's), and delivers events, wire payloads
// and restarts. Nothing but messages may go to stdout: console.log is sent to stderr.
//
// Order over HTTP, by default: `serve({wire: "http"})` declares `acks: "bytes"` and wraps the
// process's `fetch` (globalThis.fetch, which openai, @anthropic-ai/sdk and the AI SDK call),
// so that every response body of the stream callsafe opened reports, at each pull of the
// program's SDK, how many body bytes it has been given (`read` {bytes}): callsafe then sends
// the trace's next step (a restart, a catalog change) only after the program has read past
// what came before it (docs/target-protocol.md, "Order"). A program whose HTTP client does
// not go through globalThis.fetch opts out with `acks: false` (its order is then best effort).
//
// The message types below follow docs/target-protocol.schema.json (generated from
// callsafe/contract/exec_protocol.py) one for one: a change there is a change here.
import { AsyncLocalStorage } from "node:async_hooks";
import { createInterface } from "node:readline";

export const PROTOCOL = "callsafe-target";
export const VERSION = 1;

/** Any JSON value (arguments, payloads and events are JSON as callsafe sends them). */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** What a target reads: abstract events, or a provider protocol's payloads ("openai-chat", ...). */
export type Reads = "abstract" | string;
/** How wire payloads arrive: as `wire` messages on stdin, or as an HTTP stream the SDK reads. */
export type WireMode = "stdio" | "http";
/** What a program over HTTP reports of its reads: nothing, events it counts, or body bytes. */
export type Acks = boolean | "bytes";

/** One tool of the trace's catalog, as `start` and a catalog change (`event` with `tools`)
 * deliver it (callsafe's ToolSpec.to_json; docs/target-protocol.md, "The tool catalog"). */
export interface ToolSpec {
  /** The JSON Schema of the call's arguments. */
  schema: JsonObject;
  /** Present (true) when a call of this tool needs the user's confirmation before it runs. */
  confirm?: boolean;
  /** callsafe's business rules (`{"max": {field: bound}, "forbid": {field: [values]}}`),
   * enforced by callsafe's validator (`validate`); present when the tool has any. */
  business?: JsonObject;
  /** Who may use the tool (actor names); absent: every actor. */
  actors?: string[];
}
/** The catalog: tool name -> its declaration. */
export type Tools = { [name: string]: ToolSpec };

/** The identity of one tool call (the executor's idempotency key). */
export interface CallKey {
  tenant: string;
  turn: string;
  response: string;
  item: string;
  call: string;
}

// -- messages from callsafe (the target's stdin) ---------------------------------------

export interface InitMessage {
  type: "init";
  id: number;
  protocol: typeof PROTOCOL;
  version: typeof VERSION;
}
export interface StartMessage {
  type: "start";
  id: number;
  tools: Tools;
  /** The byte caps: `{call_bytes, turn_bytes}` (per call, and per turn). */
  limits: JsonObject;
  store_dir?: string | null;
  trace?: string;
}
export interface EventMessage {
  type: "event";
  id: number;
  step: number;
  /** One event in callsafe's trace vocabulary: a one-key object `{kind: {fields}}`. */
  event: JsonObject;
  /** The whole catalog as it stands after a catalog change (`tool_changed`). */
  tools?: Tools;
}
export interface WireMessage {
  type: "wire";
  id: number;
  step: number;
  payload: JsonObject;
}
export interface EndStreamMessage {
  type: "end_stream";
  id: number;
}
export interface StreamMessage {
  type: "stream";
  id: number;
  protocol: string;
  base_url: string;
}
export interface RestartMessage {
  type: "restart";
  id: number;
}
export interface ResetMessage {
  type: "reset";
  id: number;
}
export interface ValidationMessage {
  type: "validation";
  id: number;
  /** Why the business validator refused the call; null when it passes. */
  reason: string | null;
}
export interface ShutdownMessage {
  type: "shutdown";
  id: number;
}
export type HarnessMessage =
  | InitMessage
  | StartMessage
  | EventMessage
  | WireMessage
  | EndStreamMessage
  | StreamMessage
  | RestartMessage
  | ResetMessage
  | ValidationMessage
  | ShutdownMessage;

// -- messages to callsafe (the target's stdout) ----------------------------------------

export interface InitOkMessage {
  type: "init_ok";
  id: number;
  protocol: typeof PROTOCOL;
  version: number;
  name: string;
  reads: Reads;
  capabilities: string[];
  process_per_trace?: boolean;
  wire?: WireMode;
  /** Over HTTP: the program reports what its SDK has read: `"bytes"` (body bytes, the default
   * over HTTP: the fetch wrapper does it) or `true` (events, the program counts them itself). */
  acks?: Acks;
  /** What the program's ledger and status words mean (docs/adapters.md, "Record words"). */
  record_words?: RecordWords;
}
/** Per section, word -> meaning; added to callsafe's and the spec's own words. */
export interface RecordWords {
  decision?: Record<string, "dispatched" | "awaiting_confirmation" | "not_dispatched" | "pending">;
  status?: Record<string, "preparing" | "awaiting_confirmation" | "done" | "retry" | "handoff">;
  result?: Record<string, "ok" | "failed" | "not_run" | "dispatch_refused">;
}
export interface ExecuteMessage {
  type: "execute";
  key: CallKey;
  actor: string;
  tool: string;
  arguments: Json;
  traceparent?: string | null;
}
export interface ValidateMessage {
  type: "validate";
  id: number;
  key: CallKey;
  tool: string;
  arguments: JsonObject;
}
export interface ObserveMessage {
  type: "observe";
  /** One observation in the vocabulary's form without `step`, e.g. `{status_shown: {...}}`. */
  observation: JsonObject;
}
export interface LogMessage {
  type: "log";
  text: string;
}
/** Over HTTP, with `acks`: the SDK has handled the first `events` events of the current stream
 * (`acks: true`), or has asked for body bytes past `bytes` (`acks: "bytes"`; `closed`: it stopped
 * reading that body). */
export interface ReadMessage {
  type: "read";
  events?: number;
  bytes?: number;
  closed?: boolean;
}
export interface DoneMessage {
  type: "done";
  id: number;
  error?: string | null;
}
export type TargetMessage =
  | InitOkMessage
  | ExecuteMessage
  | ValidateMessage
  | ObserveMessage
  | LogMessage
  | ReadMessage
  | DoneMessage;

// -- the program's side ----------------------------------------------------------------

/** What a target gets in `start`: its channel to callsafe's executor and validator. */
export interface Env {
  execute(key: CallKey, actor: string, tool: string, args: Json, traceparent?: string | null): void;
  /** Ask callsafe's business validator; resolves to the refusal's reason, or null. */
  validate(key: CallKey, tool: string, args: JsonObject): Promise<string | null>;
  observe(observation: JsonObject): void;
  log(text: string): void;
  /** With `acks: true` (wire mode over HTTP): the SDK has handled the first `events` events of
   * the current stream, and everything the program did for them has been sent. (With the
   * default `acks: "bytes"` the helper reports reads itself and this sends nothing.) */
  read(events: number): void;
  /** The tool catalog of the trace (name -> {schema, confirm?, business?, actors?}), replaced
   * by the one an event with `tools` (a catalog change) carries before that event is received. */
  readonly tools: Tools;
  /** The byte caps of the trace: `{call_bytes, turn_bytes}`. */
  limits: JsonObject;
  /** The step of the event or payload being delivered (-1 before the first). */
  step(): number;
  storeDir: string | null;
}

type MaybeAsync = void | Promise<void>;

/** A target: every method is optional but the one its mode needs. */
export interface Target {
  /** A trace begins. */
  start?(env: Env): MaybeAsync;
  /** One event, as callsafe's trace vocabulary writes it: `{kind: {fields}}`. */
  receive?(event: JsonObject): MaybeAsync;
  /** One decoded payload of a provider's stream (wire mode over stdio). */
  receiveWire?(payload: JsonObject): MaybeAsync;
  /** That stream's body ended normally. */
  endStream?(): MaybeAsync;
  /** Wire mode over HTTP: read the response with your SDK (OPENAI_BASE_URL / ANTHROPIC_BASE_URL point at callsafe). */
  stream?(baseUrl: string): MaybeAsync;
  /** Simulate a process restart. */
  restart?(): MaybeAsync;
  /** The trace ended. */
  close?(): MaybeAsync;
}

export interface ServeOptions {
  name: string;
  reads?: Reads;
  capabilities?: string[];
  wire?: WireMode;
  processPerTrace?: boolean;
  /** Over HTTP: `"bytes"` (the default over HTTP): the helper's fetch wrapper reports the body
   * bytes the SDK pulls, and callsafe holds each later step until the program has read past
   * them (the trace's order, whatever the load); `true`: the program calls `env.read(n)` as its
   * SDK handles each event; `false`: nothing (a settle window, best effort). */
  acks?: Acks;
  /** What the program's ledger and status words mean, when they are not callsafe's or the spec's. */
  recordWords?: RecordWords;
  create: () => Target;
}

console.log = (...args: unknown[]): void => console.error(...args); // keep stdout for messages

function send(message: TargetMessage): void {
  process.stdout.write(JSON.stringify(message) + "\n");
}

/** The content types of a model stream's body (SSE, or AWS's event stream). */
const STREAM_TYPES: ReadonlySet<string> = new Set(["text/event-stream", "application/vnd.amazon.eventstream"]);

function requestUrl(input: string | URL | Request): string {
  if (typeof input === "string") return input;
  if (input instanceof URL) return input.href;
  return input.url;
}

/** `response` with a body that calls `report(bytes, closed)` at each pull of its reader, in the
 * next turn of the event loop (`setImmediate`): the SDK asks for bytes past N only once it has
 * handed on what the first N carried, and what it does with them (parse, present, run a tool)
 * is promise work, all done before that turn comes. The body is pulled only when the SDK asks
 * (a high-water mark of 0: nothing is read ahead). */
export function reportingResponse(response: Response, report: (bytes: number, closed: boolean) => void): Response {
  const inner = response.body;
  if (inner === null) return response;
  const reader = inner.getReader();
  let bytes = 0;
  let ended = false;
  const end = (): void => {
    if (ended) return;
    ended = true;
    const seen = bytes;
    setImmediate(() => report(seen, true));
  };
  const body = new ReadableStream<Uint8Array>(
    {
      async pull(controller): Promise<void> {
        const seen = bytes;
        setImmediate(() => report(seen, false));
        let chunk: ReadableStreamReadResult<Uint8Array>;
        try {
          chunk = await reader.read();
        } catch (err) {
          end();
          controller.error(err);
          return;
        }
        if (chunk.done) {
          controller.close();
          end();
          return;
        }
        bytes += chunk.value.byteLength;
        controller.enqueue(chunk.value);
      },
      async cancel(reason): Promise<void> {
        end();
        await reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
  const wrapped = new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  Object.defineProperty(wrapped, "url", { value: response.url });
  return wrapped;
}

function errorText(err: unknown): string {
  if (err instanceof Error) return `${err.name || "Error"}: ${err.message}`;
  return `Error: ${String(err)}`;
}

const HARNESS_TYPES: ReadonlySet<string> = new Set([
  "init",
  "start",
  "event",
  "wire",
  "end_stream",
  "stream",
  "restart",
  "reset",
  "validation",
  "shutdown",
]);

/** A parsed line as a harness message, or the reason it is not one (checked at the edge, once). */
function asHarnessMessage(value: unknown): HarnessMessage | string {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "not a JSON object";
  const record = value as { type?: unknown; id?: unknown };
  if (typeof record.type !== "string" || !HARNESS_TYPES.has(record.type)) {
    return `an unknown message type ${JSON.stringify(record.type)}`;
  }
  if (typeof record.id !== "number" || !Number.isInteger(record.id) || record.id < 0) return "no integer id";
  return value as HarnessMessage;
}

function need<K extends keyof Target>(target: Target | null, method: K): NonNullable<Target[K]> {
  if (target === null) throw new Error(`a ${String(method)} message before start`);
  const fn = target[method];
  if (typeof fn !== "function") throw new TypeError(`this target has no ${String(method)}()`);
  return fn.bind(target) as NonNullable<Target[K]>;
}

/** One message's handling, or one stream reader: what a crash inside the validator ends. */
interface Frame {
  /** The process life it belongs to: a restart while a validation is pending ends a life. */
  life: number;
  /** A stream reader (wire mode over HTTP) runs beside the handlers and outlives a crash,
   * as the Python helper's stream threads do: callsafe ends its stream, not the helper. */
  reader: boolean;
}

export function serve({
  name,
  reads = "abstract",
  capabilities = [],
  wire = "stdio",
  processPerTrace = false,
  acks = wire === "http" ? "bytes" : false,
  recordWords,
  create,
}: ServeOptions): void {
  let target: Target | null = null;
  // the stream callsafe opened last (`stream`): its base URL, and a count so that a body of
  // an earlier stream closed late never reports reads for the next
  let streamBase = "";
  let generation = 0;
  let reported = "";
  const reportRead = (bytes: number, closed: boolean, mine: number): void => {
    if (mine !== generation) return;
    const said = `${bytes}/${closed}`;
    if (said === reported) return;
    reported = said;
    send({ type: "read", bytes, closed });
  };
  if (wire === "http" && acks === "bytes") {
    const original = globalThis.fetch;
    globalThis.fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
      const response = await original(input, init);
      const url = requestUrl(input);
      const kind = (response.headers.get("content-type") ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
      if (!streamBase || !(url === streamBase || url.startsWith(`${streamBase}/`)) || !STREAM_TYPES.has(kind)) {
        return response; // not the model stream: an MCP session, a JSON answer, another host
      }
      const mine = generation;
      return reportingResponse(response, (bytes, closed) => reportRead(bytes, closed, mine));
    };
  }
  let step = -1;
  let tools: Tools = {};
  let nextValidation = 0;
  const pendingValidations = new Map<number, (reason: string | null) => void>();
  const streams = new Set<Promise<void>>();
  // Scheduling (docs/target-protocol.md, "Nesting"): callsafe sends a message only once the
  // one before is answered, except while the program waits for a `validation`: then the events
  // "during validation" (or a restart) arrive, nested in that wait. So a message is handled at
  // once when no handler runs or a validation is pending, and otherwise waits its turn.
  const frames = new AsyncLocalStorage<Frame>();
  const waiting: Array<Exclude<HarnessMessage, ValidationMessage>> = [];
  let running = 0; // handlers begun and not finished, in the current life
  let life = 0;
  let closing = false;

  /** Whether the code now running is a handler of a life a crash ended (it must send nothing). */
  const dead = (): boolean => {
    const frame = frames.getStore();
    return frame !== undefined && !frame.reader && frame.life !== life;
  };

  const env: Env = {
    execute(key, actor, tool, args, traceparent = null) {
      if (!dead()) send({ type: "execute", key, actor, tool, arguments: args, traceparent });
    },
    validate(key, tool, args) {
      if (dead()) return new Promise<string | null>(() => undefined); // a dead life never resumes
      const id = nextValidation++;
      const answer = new Promise<string | null>((resolve) => pendingValidations.set(id, resolve));
      send({ type: "validate", id, key, tool, arguments: args });
      return answer;
    },
    observe(observation) {
      if (!dead()) send({ type: "observe", observation });
    },
    log(text) {
      if (!dead()) send({ type: "log", text });
    },
    read(events) {
      if (acks === true && !dead()) send({ type: "read", events });
    },
    get tools() {
      return tools;
    },
    limits: {},
    step: () => step,
    storeDir: null,
  };

  async function reset(): Promise<void> {
    await Promise.allSettled([...streams]);
    if (target?.close) await target.close();
    target = null;
  }

  /** A restart while a validation is pending: the process died inside the validator. Every
   * handler waiting there is dropped as a crash drops it (it never resumes, sends nothing,
   * and is never answered with `done`); the restart is then handled in a new life. */
  function crash(): void {
    pendingValidations.clear();
    life += 1;
    running = 0;
  }

  async function handle(message: Exclude<HarnessMessage, ValidationMessage>): Promise<void> {
    const { id } = message;
    let error: string | null = null;
    try {
      switch (message.type) {
        case "init":
          send({
            type: "init_ok",
            id,
            protocol: PROTOCOL,
            version: VERSION,
            name,
            reads,
            capabilities,
            wire,
            process_per_trace: processPerTrace,
            acks,
            ...(recordWords ? { record_words: recordWords } : {}),
          });
          return;
        case "start": {
          await reset();
          tools = message.tools;
          env.limits = message.limits;
          env.storeDir = message.store_dir ?? null;
          step = -1;
          const created = create();
          target = created;
          if (created.start) await created.start(env);
          break;
        }
        case "event":
          step = message.step;
          if (message.tools) tools = message.tools;
          await need(target, "receive")(message.event);
          break;
        case "wire":
          step = message.step;
          await need(target, "receiveWire")(message.payload);
          break;
        case "end_stream":
          if (target?.endStream) await target.endStream();
          break;
        case "stream": {
          streamBase = message.base_url.replace(/\/+$/, "");
          generation += 1;
          reported = "";
          const reader = need(target, "stream");
          const reading = frames.run({ life, reader: true }, async (): Promise<void> => {
            let streamError: string | null = null;
            try {
              await reader(message.base_url);
            } catch (err) {
              streamError = errorText(err);
              console.error(err);
            }
            send({ type: "done", id, error: streamError });
          });
          streams.add(reading);
          void reading.finally(() => streams.delete(reading));
          return;
        }
        case "restart":
          if (target?.restart) await target.restart();
          break;
        case "reset":
          await reset();
          break;
        case "shutdown":
          process.exit(0);
      }
    } catch (err) {
      error = errorText(err);
      console.error(err);
    }
    if (!dead()) send({ type: "done", id, error });
  }

  function dispatch(message: Exclude<HarnessMessage, ValidationMessage>): void {
    if (message.type === "restart" && pendingValidations.size > 0) crash();
    running += 1;
    const mine = life;
    void frames
      .run({ life: mine, reader: false }, () => handle(message))
      .finally(() => {
        if (mine !== life) return; // a crash ended it (and reset the count)
        running -= 1;
        pump();
      });
  }

  /** Start what may start now: the waiting messages, in order, once no handler runs. */
  function pump(): void {
    while (waiting.length > 0 && running === 0) {
      dispatch(waiting.shift() as Exclude<HarnessMessage, ValidationMessage>);
    }
    if (closing && waiting.length === 0 && running === 0) {
      closing = false;
      void reset().finally(() => process.exit(0));
    }
  }

  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  lines.on("line", (line: string) => {
    if (!line.trim()) return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      console.error(`callsafe-target: a line that is not JSON: ${line.slice(0, 200)}`);
      process.exit(2);
    }
    const message = asHarnessMessage(parsed);
    if (typeof message === "string") {
      console.error(`callsafe-target: ${message}: ${line.slice(0, 200)}`);
      process.exit(2);
    }
    if (message.type === "validation") {
      // answered at once, never queued behind the message that is waiting for it
      const resolve = pendingValidations.get(message.id);
      pendingValidations.delete(message.id);
      if (resolve) resolve(message.reason);
      return;
    }
    if (pendingValidations.size > 0 || (running === 0 && waiting.length === 0)) {
      dispatch(message); // nested in a pending validation, or nothing else to wait for
    } else {
      waiting.push(message);
    }
  });
  lines.on("close", () => {
    closing = true;
    pump();
  });
}
