// @openai/agents run(agent, { stream: true }): arguments holding a lone high surrogate
// escape ("\\ud800", no low half: not a Unicode string) are parsed by JSON.parse and the tool
// runs with the broken string. Exits 1 while it runs.
import { Agent, OpenAIResponsesModel, run, setTracingDisabled, tool } from "@openai/agents";
import OpenAI from "openai";

const fc = (id, call, status, args = "") => ({ id, type: "function_call", status, arguments: args, call_id: call, name: "pay" });
const e = (n, type, rest = {}) => ({ type, sequence_number: n, ...rest });
const response = (status, output) => ({ id: "resp_1", object: "response", status, output });
const delta = (n, id, d) => e(n, "response.function_call_arguments.delta", { item_id: id, output_index: 0, delta: d });
const reply = { id: "msg_1", type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "ok", annotations: [] }] };
const sse = (events) => events.map((x) => `event: ${x.type}\ndata: ${JSON.stringify(x)}\n\n`).join("");
const args = '{"amount":100,"memo":"\\ud800"}';
const done = fc("fc_1", "call_a", "completed", args);
const events = [e(0, "response.created", { response: response("in_progress", []) }), e(1, "response.output_item.added", { output_index: 0, item: fc("fc_1", "call_a", "in_progress") }), delta(2, "fc_1", args.slice(0, 24)), delta(3, "fc_1", args.slice(24)),
  e(4, "response.function_call_arguments.done", { item_id: "fc_1", output_index: 0, arguments: args }), e(5, "response.output_item.done", { output_index: 0, item: done }), e(6, "response.completed", { response: response("completed", [done]) })];
const bodies = [sse(events), sse([e(0, "response.completed", { response: response("completed", [reply]) })])];
const fetch = async () => new Response(bodies.shift() ?? bodies.at(-1), { headers: { "content-type": "text/event-stream" } });
setTracingDisabled(true);
const client = new OpenAI({ apiKey: "x", baseURL: "http://127.0.0.1:9/v1", maxRetries: 0, fetch });
const ran = [];
const execute = (input, _context, details) => (ran.push([details?.toolCall?.callId, input]), "ok");
const pay = tool({ name: "pay", description: "pay", parameters: { type: "object", properties: {} }, strict: false, execute });
const agent = new Agent({ name: "a", model: new OpenAIResponsesModel(client, "m"), tools: [pay] });
const result = await run(agent, "go", { stream: true, maxTurns: 3 });
for await (const _event of result);
console.log(`the tool ran: ${JSON.stringify(ran)}`);
process.exit(ran.length === 0 ? 0 : 1);
