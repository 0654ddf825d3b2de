// An @openai/agents agent whose tools come from an MCP server: MCPServerStreamableHttp at
// CALLSAFE_MCP_URL in the agent's mcpServers, its model OpenAIChatCompletionsModel over an
// openai client (OPENAI_BASE_URL from the environment, no retries), run with
// run(agent, "go", { stream: true }). The SDK reads the stream, builds the model response
// and sends each tool call to the MCP server as a tools/call. Nothing here knows callsafe:
// `callsafe certify 'agent:node examples/openai-agents-mcp.mjs'`.
import { Agent, MCPServerStreamableHttp, OpenAIChatCompletionsModel, run, setTracingDisabled } from "@openai/agents";
import OpenAI from "openai";

setTracingDisabled(true);
const server = new MCPServerStreamableHttp({ url: process.env.CALLSAFE_MCP_URL, name: "tools" });
await server.connect();
try {
  const client = new OpenAI({ maxRetries: 0 });
  const agent = new Agent({
    name: "mcp-host",
    instructions: "",
    model: new OpenAIChatCompletionsModel(client, "gpt-4o"),
    mcpServers: [server],
  });
  const result = await run(agent, "go", { stream: true, maxTurns: 3 });
  for await (const _event of result) {
  }
  await result.completed;
  if (result.error) throw result.error;
} finally {
  await server.close();
}
