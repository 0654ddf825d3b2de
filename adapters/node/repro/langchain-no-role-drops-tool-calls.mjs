// @langchain/openai ChatOpenAI.stream: a Chat Completions stream whose deltas name no role
// (role is optional in a chunk's delta) becomes generic ChatMessageChunks, which carry no
// tool_call_chunks: the finished tool call is lost. Exits 1 while it is.
import http from "node:http";
import { ChatOpenAI } from "@langchain/openai";

const chunk = (delta, finish = null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const call = { index: 0, id: "call_a", type: "function", function: { name: "pay", arguments: '{"amount":100}' } };
const body = chunk({ tool_calls: [call] }) + chunk({}, "tool_calls") + "data: [DONE]\n\n";
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
console.log(`${message?.constructor.name}: tool_calls ${JSON.stringify(calls)}`);
process.exit(calls.length === 1 ? 0 : 1);
