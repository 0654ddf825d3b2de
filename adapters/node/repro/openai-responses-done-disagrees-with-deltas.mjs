// openai (node) responses.stream: response.function_call_arguments.done that carries other
// arguments than the deltas ('{"amount":999}' after '{"amount":1' + '00}') is emitted as it
// came, the stream never compares them: the call is presented with 999. Exits 1 then.
import OpenAI from "openai";

const fc = (status, args = "") => ({ id: "fc_1", type: "function_call", status, arguments: args, call_id: "call_a", name: "pay" });
const e = (n, type, rest = {}) => ({ type, sequence_number: n, ...rest });
const created = (n) => e(n, "response.created", { response: { id: "resp_1", object: "response", status: "in_progress", output: [] } });
const added = (n) => e(n, "response.output_item.added", { output_index: 0, item: fc("in_progress") });
const delta = (n, d) => e(n, "response.function_call_arguments.delta", { item_id: "fc_1", output_index: 0, delta: d });
const done = (n) => e(n, "response.function_call_arguments.done", { item_id: "fc_1", output_index: 0, arguments: '{"amount":999}' });
const itemDone = (n) => e(n, "response.output_item.done", { output_index: 0, item: fc("completed", '{"amount":100}') });
const output = [fc("completed", '{"amount":100}')];
const completed = (n) => e(n, "response.completed", { response: { id: "resp_1", object: "response", status: "completed", output } });
const events = [created(0), added(1), delta(2, '{"amount":1'), delta(3, "00}"), done(4), itemDone(5), completed(6)];
const body = events.map((x) => `event: ${x.type}\ndata: ${JSON.stringify(x)}\n\n`).join("");
const fetch = async () => new Response(body, { headers: { "content-type": "text/event-stream" } });
const client = new OpenAI({ apiKey: "x", baseURL: "http://127.0.0.1:9/v1", maxRetries: 0, fetch });
const tools = [{ type: "function", name: "pay", parameters: { type: "object" }, strict: false }];
const stream = client.responses.stream({ model: "m", input: "go", tools });
const presented = [];
stream.on("response.function_call_arguments.done", (x) => presented.push(x.arguments));
await stream.done().catch((err) => console.log(`the stream raised: ${err.message}`));
console.log(`arguments.done events: ${JSON.stringify(presented)}`);
process.exit(presented.length === 0 ? 0 : 1);
