// A small Node agent as a user writes it: its model is whatever OPENAI_BASE_URL serves, its
// tools are whatever the MCP server at CALLSAFE_MCP_URL lists (the official MCP client and
// the openai SDK). It streams one chat completion with those tools, assembles the streamed
// tool calls by id, and, when the reply ends with finish_reason "tool_calls", calls each
// through MCP. Nothing in it knows callsafe: `callsafe certify 'agent:node examples/mcp-chat-agent.mjs'`.
// --naive keys calls by index and runs them whatever the finish reason. --timeout MS gives each
// tools/call that long (the client then cancels the request); --retry calls a tool again when
// its answer does not come (the tool then runs twice).
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import OpenAI from "openai";

const naive = process.argv.includes("--naive");
const retry = process.argv.includes("--retry");
const at = process.argv.indexOf("--timeout");
const timeout = at >= 0 ? Number(process.argv[at + 1]) : undefined;

async function callTool(name, args) {
  try {
    await mcp.callTool({ name, arguments: args }, timeout === undefined ? undefined : { timeout });
  } catch (error) {
    console.error(`${name}: no answer (${error.message})`);
    if (retry) {
      try {
        await mcp.callTool({ name, arguments: args }, timeout === undefined ? undefined : { timeout });
      } catch (again) {
        console.error(`${name}: no answer again (${again.message})`);
      }
    }
  }
}
const mcp = new Client({ name: "mcp-chat-agent", version: "1.0.0" });
await mcp.connect(new StreamableHTTPClientTransport(new URL(process.env.CALLSAFE_MCP_URL)));
const { tools } = await mcp.listTools();
const openai = new OpenAI({ maxRetries: 0 });
const stream = await openai.chat.completions.create({
  model: "gpt-4o",
  messages: [{ role: "user", content: "go" }],
  tools: tools.map((t) => ({ type: "function", function: { name: t.name, description: t.description ?? "", parameters: t.inputSchema } })),
  stream: true,
});
const calls = new Map(); // call id (naive: index) -> { name, arguments }
const atIndex = new Map(); // index -> the id of the call it carries now
let finish = null;
for await (const chunk of stream) {
  for (const choice of chunk.choices) {
    if (choice.index !== 0) continue;
    for (const delta of choice.delta?.tool_calls ?? []) {
      let key = String(delta.index);
      if (!naive) {
        if (delta.id) atIndex.set(delta.index, delta.id);
        key = atIndex.get(delta.index);
        if (key === undefined) continue; // a fragment of no call that was opened
      }
      if (!calls.has(key)) calls.set(key, { name: "", arguments: "" });
      const call = calls.get(key);
      if (delta.function?.name && !call.name) call.name = delta.function.name;
      if (delta.function?.arguments) call.arguments += delta.function.arguments;
    }
    if (choice.finish_reason) finish = choice.finish_reason;
  }
}
if (naive || finish === "tool_calls") {
  for (const call of calls.values()) {
    let args;
    try {
      args = JSON.parse(call.arguments || "{}");
    } catch {
      if (!naive) continue; // never run arguments that do not decode
      args = { raw: call.arguments };
    }
    await callTool(call.name, args);
  }
}
await mcp.close();
