// openai (node) chat.completions.stream: two calls that share tool index 0 are accumulated
// as one (ids and arguments concatenated): call_a is never presented as a call of its own.
// Exits 1 while call_a is not presented.
import OpenAI from "openai";

const chunk = (delta, finish = null) => ({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] });
const open = (id, index = 0) => ({ tool_calls: [{ index, id, type: "function", function: { name: "pay", arguments: "" } }] });
const args = (text, index = 0) => ({ tool_calls: [{ index, function: { arguments: text } }] });
const chunks = [chunk({ role: "assistant", ...open("call_a") }), chunk(args('{"amount":100}')), chunk(open("call_b")), chunk(args('{"amount":100}')), chunk({}, "tool_calls")];
const body = chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("") + "data: [DONE]\n\n";
const fetch = async () => new Response(body, { headers: { "content-type": "text/event-stream" } });
const client = new OpenAI({ apiKey: "x", baseURL: "http://127.0.0.1:9/v1", maxRetries: 0, fetch });
const tools = [{ type: "function", function: { name: "pay", parameters: { type: "object" } } }];
const stream = client.chat.completions.stream({ model: "m", messages: [{ role: "user", content: "go" }], tools });
const presented = [];
stream.on("tool_calls.function.arguments.done", (x) => {
  const id = stream.currentChatCompletionSnapshot?.choices[0]?.message.tool_calls?.[x.index]?.id;
  presented.push([id, x.arguments]);
});
await stream.done().catch((err) => console.log(`the stream raised: ${err.message}`));
console.log(`arguments.done events: ${JSON.stringify(presented)}`);
process.exit(presented.some(([id]) => id === "call_a") ? 0 : 1);
