// What every TypeScript matrix row shares (callsafe's `library:node/...` rows, certified
// through the target protocol with `wire: "http"`): the turn binding, the call keys, the
// tool catalog in JSON Schema form, the library's abort API on callsafe's cancel events,
// and the one place where "the library ran a tool" or "the surface presents a finished
// call" becomes a message to callsafe's executor.
//
// Why a fetch wrapper: a library that runs tools itself (the AI SDK, the Agents SDK) hands
// the tool body a call id only, while callsafe's executor keys a call by the response and
// item it came in too. Every SDK here takes a `fetch` option; the wrapper passes the
// response body through unchanged and notes, before the SDK sees each event, which
// response and item each call id arrived in (`WireIds`). Values the library itself
// presents (an id it glued, an index it reused) always win over the wire's: a call is keyed
// as the application would key it. The same wrapper answers an agent loop's later requests
// (after the tools ran) with a short text reply, so that the run ends without a second
// stream from callsafe (which serves one body per response of the trace).
import { createParser } from "eventsource-parser";
import { serve, type CallKey, type Env, type Json, type JsonObject, type Target } from "../src/callsafe-target.js";

export type Protocol = "openai-chat" | "openai-responses" | "anthropic-messages";

/** The turn in force (from `turn_started`): what binds a call to a tenant and an actor. */
export interface Turn {
  tenant: string;
  turn: string;
  actor: string;
  traceparent: string | null;
}

/** One catalog tool: its name and JSON Schema (the arguments' shape). */
export interface CatalogTool {
  name: string;
  schema: JsonObject;
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function text(value: unknown): string | null {
  return typeof value === "string" ? value : null;
}

/** Which response and item each call id arrived in, read off the SSE body. */
export class WireIds {
  response = "";
  private readonly byCall = new Map<string, { response: string; item: string }>();

  constructor(readonly protocol: Protocol) {}

  feed(payload: unknown): void {
    if (!isObject(payload)) return;
    if (this.protocol === "openai-chat") {
      const id = text(payload["id"]);
      if (id) this.response = id;
      const choices = payload["choices"];
      const first = Array.isArray(choices) ? choices[0] : undefined;
      const delta = isObject(first) ? first["delta"] : undefined;
      const calls = isObject(delta) ? delta["tool_calls"] : undefined;
      for (const call of Array.isArray(calls) ? calls : []) {
        if (!isObject(call)) continue;
        const callId = text(call["id"]);
        const index = call["index"];
        if (callId) this.byCall.set(callId, { response: this.response, item: index == null ? "" : String(index) });
      }
    } else if (this.protocol === "openai-responses") {
      const kind = payload["type"];
      const response = payload["response"];
      if (kind === "response.created" && isObject(response)) this.response = text(response["id"]) ?? this.response;
      const item = payload["item"];
      if (kind === "response.output_item.added" && isObject(item) && item["type"] === "function_call") {
        const callId = text(item["call_id"]);
        if (callId) this.byCall.set(callId, { response: this.response, item: text(item["id"]) ?? "" });
      }
    } else {
      const kind = payload["type"];
      const message = payload["message"];
      if (kind === "message_start" && isObject(message)) this.response = text(message["id"]) ?? this.response;
      const block = payload["content_block"];
      if (kind === "content_block_start" && isObject(block) && block["type"] === "tool_use") {
        const callId = text(block["id"]);
        if (callId) this.byCall.set(callId, { response: this.response, item: String(payload["index"]) });
      }
    }
  }

  /** Did this call id come in on the wire? */
  has(call: string): boolean {
    return this.byCall.has(call);
  }

  /** The call's key: what the library presents first, the wire for the rest. */
  key(turn: Turn, call: string, presented: { response?: string | null; item?: string | null } = {}): CallKey {
    const seen = this.byCall.get(call);
    return {
      tenant: turn.tenant,
      turn: turn.turn,
      response: presented.response ?? seen?.response ?? this.response,
      item: presented.item ?? seen?.item ?? "",
      call,
    };
  }
}

const encoder = new TextEncoder();

function sse(protocol: Protocol, payloads: JsonObject[]): Uint8Array {
  let out = "";
  for (const payload of payloads) {
    if (protocol !== "openai-chat") out += `event: ${String(payload["type"])}\n`;
    out += `data: ${JSON.stringify(payload)}\n\n`;
  }
  if (protocol === "openai-chat") out += "data: [DONE]\n\n";
  return encoder.encode(out);
}

/** A short text answer that ends an agent loop's next turn (after its tools ran). */
export function followUpReply(protocol: Protocol): Uint8Array {
  if (protocol === "openai-chat") {
    const chunk = (delta: JsonObject, finish: string | null): JsonObject => ({
      id: "chatcmpl-callsafe-reply",
      object: "chat.completion.chunk",
      created: 0,
      model: "callsafe",
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
    return sse(protocol, [chunk({ role: "assistant", content: "done" }, null), chunk({}, "stop")]);
  }
  if (protocol === "openai-responses") {
    const message = { id: "msg_reply", type: "message", role: "assistant", status: "completed" };
    const done = { ...message, content: [{ type: "output_text", text: "done", annotations: [] }] };
    const response = { id: "resp_callsafe_reply", object: "response", model: "callsafe" };
    return sse(protocol, [
      { type: "response.created", sequence_number: 0, response: { ...response, status: "in_progress", output: [] } },
      {
        type: "response.output_item.added",
        sequence_number: 1,
        output_index: 0,
        item: { ...message, status: "in_progress", content: [] },
      },
      {
        type: "response.output_text.delta",
        sequence_number: 2,
        item_id: "msg_reply",
        output_index: 0,
        content_index: 0,
        delta: "done",
      },
      { type: "response.output_item.done", sequence_number: 3, output_index: 0, item: done },
      { type: "response.completed", sequence_number: 4, response: { ...response, status: "completed", output: [done] } },
    ]);
  }
  return sse(protocol, [
    {
      type: "message_start",
      message: {
        id: "msg_callsafe_reply",
        type: "message",
        role: "assistant",
        content: [],
        model: "callsafe",
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 0, output_tokens: 0 },
      },
    },
    { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
    { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "done" } },
    { type: "content_block_stop", index: 0 },
    { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 1 } },
    { type: "message_stop" },
  ]);
}

/** One finished tool call (`warm` {"n":1}) in the protocol's stream, for the warm-up run. */
function warmupStream(protocol: Protocol): Uint8Array {
  if (protocol === "openai-chat") {
    const chunk = (delta: JsonObject, finish: string | null): JsonObject => ({
      id: "chatcmpl-warmup",
      object: "chat.completion.chunk",
      created: 0,
      model: "callsafe",
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
    const call = { index: 0, id: "call_warmup", type: "function", function: { name: "warm", arguments: "" } };
    return sse(protocol, [
      chunk({ role: "assistant", tool_calls: [call] }, null),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"n":1}' } }] }, null),
      chunk({}, "tool_calls"),
    ]);
  }
  if (protocol === "openai-responses") {
    const item = { id: "fc_warmup", type: "function_call", call_id: "call_warmup", name: "warm" };
    const done = { ...item, status: "completed", arguments: '{"n":1}' };
    const response = { id: "resp_warmup", object: "response", model: "callsafe" };
    return sse(protocol, [
      { type: "response.created", sequence_number: 0, response: { ...response, status: "in_progress", output: [] } },
      {
        type: "response.output_item.added",
        sequence_number: 1,
        output_index: 0,
        item: { ...item, status: "in_progress", arguments: "" },
      },
      {
        type: "response.function_call_arguments.delta",
        sequence_number: 2,
        item_id: "fc_warmup",
        output_index: 0,
        delta: '{"n":1}',
      },
      {
        type: "response.function_call_arguments.done",
        sequence_number: 3,
        item_id: "fc_warmup",
        output_index: 0,
        arguments: '{"n":1}',
      },
      { type: "response.output_item.done", sequence_number: 4, output_index: 0, item: done },
      { type: "response.completed", sequence_number: 5, response: { ...response, status: "completed", output: [done] } },
    ]);
  }
  const message = { id: "msg_warmup", type: "message", role: "assistant", content: [], model: "callsafe" };
  return sse(protocol, [
    { type: "message_start", message: { ...message, stop_reason: null, stop_sequence: null, usage: {} } },
    { type: "content_block_start", index: 0, content_block: { type: "tool_use", id: "call_warmup", name: "warm", input: {} } },
    { type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: '{"n":1}' } },
    { type: "content_block_stop", index: 0 },
    { type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 1 } },
    { type: "message_stop" },
  ]);
}

/** Run the row once, before the first trace, on a canned stream with one tool call and no
 * network: the first trace of a fresh process otherwise pays for loading and compiling the
 * SDK's stream path, which over HTTP (where callsafe attributes what the program sends to
 * the payload written last, after a short quiet window) would move its executions to a
 * later step than every other trace's: the verdicts would depend on which trace came first. */
async function warmUp(options: RowOptions): Promise<void> {
  const body = warmupStream(options.reads);
  const replies = [body, followUpReply(options.reads)];
  const fetchWarm: typeof fetch = async () =>
    new Response((replies.shift() ?? followUpReply(options.reads)).slice(), {
      status: 200,
      headers: { "content-type": "text/event-stream" },
    });
  const quiet = (): void => undefined;
  const env: Env = {
    execute: quiet,
    validate: async () => null,
    observe: quiet,
    log: quiet,
    read: quiet,
    tools: { warm: { schema: { type: "object" } } },
    limits: {},
    step: () => -1,
    storeDir: null,
  };
  const ctx: RunContext = {
    env,
    baseUrl: "http://127.0.0.1:9",
    signal: null,
    ids: new WireIds(options.reads),
    fetch: fetchWarm,
    tools: [{ name: "warm", schema: { type: "object" } }],
    turn: null,
    executed: quiet,
    offer: quiet,
  };
  try {
    await options.run(ctx);
  } catch (err) {
    console.error("warm-up run failed (the traces run all the same):", err);
  }
}

/** A `fetch` for the SDK: the first request goes to callsafe and its body is read by
 * `ids` on the way through; later requests get `followUp` (when given) without a network.
 * The body is passed on as the SDK pulls it (nothing is read ahead), so the helper's fetch
 * wrapper underneath (`acks: "bytes"`, callsafe-target.ts) reports the SDK's own pulls.
 * `read(n)` (for `acks: true`) is told, in the next turn of the event loop, how many events of
 * the body have reached the SDK. */
export function rowFetch(ids: WireIds, followUp: Uint8Array | null, read: (events: number) => void = () => undefined): typeof fetch {
  let requests = 0;
  return async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    requests += 1;
    if (requests > 1 && followUp !== null) {
      return new Response(followUp.slice(), { status: 200, headers: { "content-type": "text/event-stream" } });
    }
    const response = await fetch(input, init);
    if (response.body === null) return response;
    const decoder = new TextDecoder();
    let events = 0;
    const parser = createParser({
      onEvent: (event) => {
        events += 1;
        if (event.data === "[DONE]") return;
        try {
          ids.feed(JSON.parse(event.data));
        } catch {
          // not JSON: the SDK reports it in its own words
        }
      },
    });
    const reader = response.body.getReader();
    const body = new ReadableStream<Uint8Array>(
      {
        async pull(controller): Promise<void> {
          let chunk: ReadableStreamReadResult<Uint8Array>;
          try {
            chunk = await reader.read();
          } catch (err) {
            controller.error(err);
            return;
          }
          if (chunk.done) {
            controller.close();
            return;
          }
          parser.feed(decoder.decode(chunk.value, { stream: true }));
          controller.enqueue(chunk.value);
          const seen = events;
          setImmediate(() => read(seen));
        },
        async cancel(reason): Promise<void> {
          await reader.cancel(reason);
        },
      },
      { highWaterMark: 0 },
    );
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

/** Is this the error of a connection that dropped or a request the row aborted (the end
 * of an application's read loop), rather than the library refusing what it read? */
export function isConnectionEnd(err: unknown, signal: AbortSignal | null): boolean {
  if (signal?.aborted) return true;
  let current: unknown = err;
  for (let depth = 0; depth < 6 && current instanceof Error; depth++) {
    const words = `${current.name} ${current.message}`;
    if (/Abort|APIConnectionError|terminated|other side closed|ECONNRESET|socket|network/i.test(words)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/** What a row's run gets for one stream (one request of the program's SDK). */
export interface RunContext {
  env: Env;
  baseUrl: string;
  /** The library's abort signal (null when the row declares no cancellation). */
  signal: AbortSignal | null;
  ids: WireIds;
  fetch: typeof fetch;
  tools: CatalogTool[];
  /** The turn in force when the stream began (null: none yet). */
  turn: Turn | null;
  /** The library ran a tool: what reached the tool body goes to callsafe's executor. */
  executed(call: string, tool: string, args: Json, presented?: { response?: string | null; item?: string | null }): void;
  /** The surface presents a finished call: run it as an application would (parse a raw
   * string, require an object and a known tool, as the Python rows' `_offer`). */
  offer(
    call: string,
    tool: string,
    args: Json | string | undefined,
    presented?: { response?: string | null; item?: string | null },
  ): void;
}

export interface RowOptions {
  name: string;
  reads: Protocol;
  /** The library has an abort API, used on cancel_turn and on a superseding turn. */
  cancellation: boolean;
  /** Agent loops make a second request after their tools ran: answer it locally. */
  followUp?: boolean;
  /** The library makes up a random id for a call whose id it did not get: record such an
   * id as `made-up-id-N` (N: its order in the stream), so that a run is a function of the
   * trace (the key is one the stream never carried either way). */
  madeUpIds?: boolean;
  run(ctx: RunContext): Promise<void>;
}

interface Running {
  turn: string | null;
  controller: AbortController;
}

class Row implements Target {
  private env: Env | null = null;
  private turn: Turn | null = null;
  private readonly running = new Set<Running>();
  private readonly stopped = new Set<string>(); // turns cancelled or superseded

  constructor(private readonly options: RowOptions) {}

  start(env: Env): void {
    this.env = env;
    this.turn = null;
    this.stopped.clear();
  }

  receive(event: JsonObject): void {
    const started = event["turn_started"];
    if (isObject(started)) {
      const turn: Turn = {
        tenant: String(started["tenant"]),
        turn: String(started["turn"]),
        actor: String(started["actor"]),
        traceparent: text(started["traceparent"]),
      };
      if (this.options.cancellation) {
        if (this.turn !== null && this.turn.turn !== turn.turn) this.stopped.add(this.turn.turn);
        this.abort((r) => r.turn !== turn.turn); // a new turn supersedes the runs of the others
      }
      this.turn = turn;
      return;
    }
    const cancel = event["cancel_turn"];
    if (this.options.cancellation && isObject(cancel)) {
      const turn = String(cancel["turn"]);
      this.stopped.add(turn);
      this.abort((r) => r.turn === turn);
    }
  }

  private abort(which: (r: Running) => boolean): void {
    for (const r of this.running) if (which(r)) r.controller.abort();
  }

  async stream(baseUrl: string): Promise<void> {
    const env = this.env;
    if (env === null) throw new Error("stream before start");
    const ids = new WireIds(this.options.reads);
    const turn = this.turn;
    const running: Running = { turn: turn?.turn ?? null, controller: new AbortController() };
    const signal = this.options.cancellation ? running.controller.signal : null;
    // A stream of a turn already stopped starts aborted: the application asks for nothing
    // more for that turn, and the library's abort path is what says so.
    if (this.options.cancellation && running.turn !== null && this.stopped.has(running.turn)) running.controller.abort();
    const tools: CatalogTool[] = Object.entries(env.tools).map(([name, spec]) => ({
      name,
      schema: isObject(spec) && isObject(spec["schema"]) ? spec["schema"] : { type: "object" },
    }));
    const known = new Set(tools.map((t) => t.name));
    const madeUp = new Map<string, string>();
    const callId = (call: string): string => {
      if (!this.options.madeUpIds || ids.has(call)) return call;
      const name = madeUp.get(call) ?? `made-up-id-${madeUp.size + 1}`;
      madeUp.set(call, name);
      return name;
    };
    const ctx: RunContext = {
      env,
      baseUrl,
      signal,
      ids,
      fetch: rowFetch(ids, this.options.followUp ? followUpReply(this.options.reads) : null, (n) => env.read(n)),
      tools,
      turn,
      executed: (call, tool, args, presented = {}) => {
        const bound = this.turn;
        if (bound === null) return env.log(`the library ran ${tool} (${call}) with no turn in force`);
        env.execute(ids.key(bound, callId(call), presented), bound.actor, tool, args, bound.traceparent);
      },
      offer: (call, tool, args, presented = {}) => {
        const bound = this.turn;
        let parsed: Json | undefined = args;
        if (typeof args === "string") {
          try {
            parsed = JSON.parse(args) as Json;
          } catch (err) {
            return env.log(`not run: ${call}'s arguments do not parse as JSON (${String(err)})`);
          }
        }
        if (!isObject(parsed)) return env.log(`not run: ${call}'s arguments are not a JSON object`);
        if (!known.has(tool)) return env.log(`not run: no tool named ${JSON.stringify(tool)} in the catalog`);
        if (bound === null) return env.log(`not run: ${call}: no turn in force`);
        env.execute(ids.key(bound, call, presented), bound.actor, tool, parsed, bound.traceparent);
      },
    };
    this.running.add(running);
    try {
      await this.options.run(ctx);
    } catch (err) {
      if (!isConnectionEnd(err, signal)) {
        // the library refused what it read: said here too, since callsafe records a
        // stream handler's end, not its error
        env.log(`the library raised: ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`.slice(0, 300));
        throw err;
      }
      env.log(`the stream ended: ${err instanceof Error ? err.message : String(err)}`.slice(0, 300));
    } finally {
      this.running.delete(running);
    }
  }

  restart(): void {
    this.turn = null;
    this.abort(() => true);
  }

  close(): void {
    this.abort(() => true);
  }
}

/** Serve one row over the target protocol (stdin/stdout), reading its stream over HTTP. */
export async function serveRow(options: RowOptions): Promise<void> {
  await warmUp(options);
  serve({
    name: options.name,
    reads: options.reads,
    wire: "http",
    capabilities: options.cancellation ? ["cancellation"] : [],
    // acks: "bytes", the helper's default over HTTP: the SDK's pulls put the order
    create: () => new Row(options),
  });
}

/** The model name sent in requests (callsafe's loopback provider ignores the request body). */
export const MODEL = "callsafe-loopback";
