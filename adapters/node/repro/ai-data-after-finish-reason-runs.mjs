// ai streamText (over @ai-sdk/openai chat), tools with execute: a tool-call fragment that
// arrives after the finish_reason (the choice had already ended, with {"amount":1 cut off)
// is still appended, and the tool runs with it. Exits 1 while it runs.
import http from "node:http";
import { createOpenAI } from "@ai-sdk/openai";
import { jsonSchema, streamText, tool } from "ai";

const chunk = (delta, finish = null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const args = (text) => ({ tool_calls: [{ index: 0, function: { arguments: text } }] });
const open = { index: 0, id: "call_a", type: "function", function: { name: "pay", arguments: "" } };
const body = chunk({ role: "assistant", tool_calls: [open] }) + chunk(args('{"amount":1')) + chunk({}, "tool_calls") + chunk(args("00}")) + "data: [DONE]\n\n";
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
process.exit(ran.length > 0 ? 1 : 0);
