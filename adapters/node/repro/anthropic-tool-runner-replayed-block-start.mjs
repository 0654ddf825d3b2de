// @anthropic-ai/sdk beta.messages.toolRunner (stream: true): a replayed content_block_start
// adds a second block with the same id to the final message, and the runner runs call_a
// twice (once with the streamed input, once with {}). Exits 1 while it runs twice.
import Anthropic from "@anthropic-ai/sdk";
import { betaTool } from "@anthropic-ai/sdk/helpers/beta/json-schema";

const message = { id: "msg_1", type: "message", role: "assistant", content: [], model: "m", stop_reason: null, stop_sequence: null, usage: { input_tokens: 0, output_tokens: 0 } };
const start = { type: "content_block_start", index: 0, content_block: { type: "tool_use", id: "call_a", name: "pay", input: {} } };
const delta = (partial_json) => ({ type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json } });
const stop = { type: "content_block_stop", index: 0 };
const end = [{ type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 0 } }, { type: "message_stop" }];
const reply = [{ type: "message_start", message }, { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 0 } }, { type: "message_stop" }];
const events = [start, start, delta('{"amount":100}'), stop];
const sse = (list) => list.map((x) => `event: ${x.type}\ndata: ${JSON.stringify(x)}\n\n`).join("");
const bodies = [sse([{ type: "message_start", message }, ...events, ...end]), sse(reply)];
const fetch = async () => new Response(bodies.shift() ?? sse(reply), { headers: { "content-type": "text/event-stream" } });
const client = new Anthropic({ apiKey: "x", baseURL: "http://127.0.0.1:9", maxRetries: 0, fetch });
const ran = [];
const pay = betaTool({ name: "pay", description: "pay", inputSchema: { type: "object" }, run: (input, context) => (ran.push([context?.toolUse.id, input]), "ok") });
const runner = client.beta.messages.toolRunner({ model: "m", max_tokens: 10, messages: [{ role: "user", content: "go" }], tools: [pay], stream: true, max_iterations: 3 });
for await (const stream of runner) for await (const _event of stream);
console.log(`the tool ran: ${JSON.stringify(ran)}`);
process.exit(ran.length === 1 ? 0 : 1);
