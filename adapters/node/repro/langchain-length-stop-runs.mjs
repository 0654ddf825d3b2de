// @langchain/openai ChatOpenAI.stream: a tool call cut off by finish_reason "length" is still
// in the concatenated message's tool_calls, its arguments parsed best-effort ('{"amount":10'
// becomes {amount: 10}), and tool_calls say nothing of the cut: what LangGraph.js's ToolNode
// runs. Exits 1 while it is.
import http from "node:http";
import { ChatOpenAI } from "@langchain/openai";

const chunk = (delta, finish = null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const call = { index: 0, id: "call_a", type: "function", function: { name: "pay", arguments: '{"amount":10' } };
const body = chunk({ role: "assistant", tool_calls: [call] }) + chunk({}, "length") + "data: [DONE]\n\n";
const server = http.createServer((req, res) => res.writeHead(200, { "content-type": "text/event-stream" }).end(body));
await new Promise((ready) => server.listen(0, "127.0.0.1", ready));
const model = new ChatOpenAI({
  model: "m",
  apiKey: "x",
  maxRetries: 0,
  configuration: { baseURL: `http://127.0.0.1:${server.address().port}/v1` },
}).bindTools([{ type: "function", function: { name: "pay", parameters: { type: "object" } } }]);
let message = null;
for await (const c of await model.stream("go")) message = message === null ? c : message.concat(c);
server.close();
const calls = message?.tool_calls ?? [];
console.log(`finish_reason length; tool_calls ${JSON.stringify(calls)}`);
process.exit(calls.length === 0 ? 0 : 1);
