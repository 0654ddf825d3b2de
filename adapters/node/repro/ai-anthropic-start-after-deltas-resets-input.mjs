// ai streamText over @ai-sdk/anthropic, tools with execute: a content_block_start replayed
// after the block's input_json_delta events resets the block's input, and the tool runs
// with {} instead of the streamed {"amount":100}. Exits 1 while it runs with other input.
import { createAnthropic } from "@ai-sdk/anthropic";
import { jsonSchema, streamText, tool } from "ai";

const message = { id: "msg_1", type: "message", role: "assistant", content: [], model: "m", stop_reason: null, stop_sequence: null, usage: { input_tokens: 0, output_tokens: 0 } };
const start = { type: "content_block_start", index: 0, content_block: { type: "tool_use", id: "call_a", name: "pay", input: {} } };
const delta = (partial_json) => ({ type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json } });
const end = [{ type: "content_block_stop", index: 0 }, { type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 0 } }, { type: "message_stop" }];
const events = [{ type: "message_start", message }, start, delta('{"amount":1'), delta("00}"), start, ...end];
const body = events.map((x) => `event: ${x.type}\ndata: ${JSON.stringify(x)}\n\n`).join("");
const fetch = async () => new Response(body, { headers: { "content-type": "text/event-stream" } });
const anthropic = createAnthropic({ baseURL: "http://127.0.0.1:9/v1", apiKey: "x", fetch });
const ran = [];
const execute = async (input, { toolCallId }) => (ran.push([toolCallId, input]), "ok");
const pay = tool({ inputSchema: jsonSchema({ type: "object" }), execute });
const result = streamText({ model: anthropic("m"), prompt: "go", tools: { pay }, maxRetries: 0, maxOutputTokens: 10 });
for await (const _part of result.fullStream);
console.log(`executed: ${JSON.stringify(ran)}`);
process.exit(ran.every(([, input]) => input.amount === 100) ? 0 : 1);
