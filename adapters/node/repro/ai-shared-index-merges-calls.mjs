// ai streamText (over @ai-sdk/openai chat), tools with execute: a second call (id call_b)
// opened on the index of a first call that sent no arguments is merged into the first: the
// tool runs once, under call_a, with call_b's arguments, and call_b never runs. Exits 1 then.
import http from "node:http";
import { createOpenAI } from "@ai-sdk/openai";
import { jsonSchema, streamText, tool } from "ai";

const chunk = (delta, finish = null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const open = (id) => ({ index: 0, id, type: "function", function: { name: "pay", arguments: "" } });
const body = chunk({ role: "assistant", tool_calls: [open("call_a")] }) + chunk({ tool_calls: [open("call_b")] }) + chunk({ tool_calls: [{ index: 0, function: { arguments: '{"amount":100}' } }] }) + chunk({}, "tool_calls") + "data: [DONE]\n\n";
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
process.exit(ran.some(([id]) => id === "call_b") ? 0 : 1);
