// @langchain/openai ChatOpenAI.stream: a second call at the same tool index (call_b, after
// call_a, which sent no arguments) gets its own entry, but its argument chunks carry no id
// and merge into the first entry with that index: call_a runs with call_b's arguments and
// call_b with {}. Exits 1 while it does.
import http from "node:http";
import { ChatOpenAI } from "@langchain/openai";

const chunk = (delta, finish = null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const open = (id) => ({ index: 0, id, type: "function", function: { name: "pay", arguments: "" } });
const args = (text) => ({ index: 0, function: { arguments: text } });
const body = [chunk({ role: "assistant", tool_calls: [open("call_a")] }), chunk({ tool_calls: [open("call_b")] }),
  chunk({ tool_calls: [args('{"amount":1')] }), chunk({ tool_calls: [args("00}")] }), chunk({}, "tool_calls")].join("") + "data: [DONE]\n\n";
const server = http.createServer((req, res) => res.writeHead(200, { "content-type": "text/event-stream" }).end(body));
await new Promise((ready) => server.listen(0, "127.0.0.1", ready));
const model = new ChatOpenAI({ model: "m", apiKey: "x", maxRetries: 0,
  configuration: { baseURL: `http://127.0.0.1:${server.address().port}/v1` },
}).bindTools([{ type: "function", function: { name: "pay", parameters: { type: "object" } } }]);
let message = null;
for await (const c of await model.stream("go")) message = message === null ? c : message.concat(c);
server.close();
const calls = message?.tool_calls ?? [];
console.log(`tool_calls ${JSON.stringify(calls.map((c) => [c.id, c.args]))}`);
const b = calls.find((c) => c.id === "call_b");
process.exit(b?.args?.amount === 100 && !calls.some((c) => c.id === "call_a" && c.args?.amount === 100) ? 0 : 1);
