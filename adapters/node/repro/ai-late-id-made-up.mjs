// ai streamText (over @ai-sdk/openai chat), tools with execute: when a call's id arrives in a
// later chunk than its first (allowed: the deltas only have to share the index), the SDK
// makes up an id and runs the tool under it: not the call the stream carried. Exits 1 then.
import http from "node:http";
import { createOpenAI } from "@ai-sdk/openai";
import { jsonSchema, streamText, tool } from "ai";

const chunk = (delta, finish = null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const first = { index: 0, type: "function", function: { name: "pay", arguments: "{\"amount\":1" } };
const body = chunk({ role: "assistant", tool_calls: [first] }) + chunk({ tool_calls: [{ index: 0, id: "call_a", function: { arguments: "00}" } }] }) + chunk({}, "tool_calls") + "data: [DONE]\n\n";
const server = http.createServer((req, res) => res.writeHead(200, { "content-type": "text/event-stream" }).end(body));
await new Promise((ready) => server.listen(0, "127.0.0.1", ready));
const openai = createOpenAI({ baseURL: `http://127.0.0.1:${server.address().port}/v1`, apiKey: "x" });
const ran = [];
const execute = async (input, { toolCallId }) => (ran.push([toolCallId, input]), "ok");
const pay = tool({ inputSchema: jsonSchema({ type: "object" }), execute });
const result = streamText({ model: openai.chat("m"), prompt: "go", tools: { pay }, maxRetries: 0 });
for await (const _part of result.fullStream);
server.close();
console.log(`executed: ${JSON.stringify(ran)}`);
process.exit(ran.length === 1 && ran[0][0] === "call_a" ? 0 : 1);
