// @anthropic-ai/sdk MessageStream: the snapshot pushes each content_block_start as a new
// block, whatever its index: a replayed start shifts every later block, so the stop of
// block 1 presents call_a again and call_b is never presented. Exits 1 while it is lost.
import Anthropic from "@anthropic-ai/sdk";

const message = { id: "msg_1", type: "message", role: "assistant", content: [], model: "m", stop_reason: null, stop_sequence: null, usage: { input_tokens: 0, output_tokens: 0 } };
const start = (index, id) => ({ type: "content_block_start", index, content_block: { type: "tool_use", id, name: "pay", input: {} } });
const delta = (index, partial_json) => ({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json } });
const stop = (index) => ({ type: "content_block_stop", index });
const end = [{ type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 0 } }, { type: "message_stop" }];
const events = [start(0, "call_a"), start(0, "call_a"), delta(0, '{"amount":100}'), start(1, "call_b"), delta(1, '{"amount":100}'), stop(0), stop(1)];
const body = [{ type: "message_start", message }, ...events, ...end].map((x) => `event: ${x.type}\ndata: ${JSON.stringify(x)}\n\n`).join("");
const fetch = async () => new Response(body, { headers: { "content-type": "text/event-stream" } });
const client = new Anthropic({ apiKey: "x", baseURL: "http://127.0.0.1:9", maxRetries: 0, fetch });
const tools = [{ name: "pay", input_schema: { type: "object" } }];
const stream = client.messages.stream({ model: "m", max_tokens: 10, messages: [{ role: "user", content: "go" }], tools });
const presented = [];
stream.on("streamEvent", (x, snapshot) => {
  const block = x.type === "content_block_stop" ? snapshot.content[x.index] : null;
  if (block?.type === "tool_use") presented.push([block.id, block.input]);
});
await stream.done().catch((err) => console.log(`the stream raised: ${err.message}`));
console.log(`tool_use blocks at content_block_stop: ${JSON.stringify(presented)}`);
process.exit(presented.some(([id]) => id === "call_b") ? 0 : 1);
