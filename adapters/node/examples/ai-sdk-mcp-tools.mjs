// An AI SDK (`ai`) agent whose tools come from an MCP server: the official MCP client
// (@modelcontextprotocol/client) at CALLSAFE_MCP_URL lists the tools, each becomes an AI SDK
// `tool` whose execute sends a tools/call, and streamText over @ai-sdk/openai's chat model
// (OPENAI_BASE_URL from the environment, no retries) runs them. The AI SDK's own MCP client
// (`@ai-sdk/mcp`, createMCPClient) is not installed in adapters/node, so the tools are wired
// by hand as its documentation does for a client of one's own. Nothing here knows callsafe:
// `callsafe certify 'agent:node examples/ai-sdk-mcp-tools.mjs'`.
import { createOpenAI } from "@ai-sdk/openai";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { jsonSchema, stepCountIs, streamText, tool } from "ai";

const mcp = new Client({ name: "ai-sdk-mcp-host", version: "1.0.0" });
await mcp.connect(new StreamableHTTPClientTransport(new URL(process.env.CALLSAFE_MCP_URL)));
try {
  const { tools: listed } = await mcp.listTools();
  const tools = {};
  for (const t of listed) {
    tools[t.name] = tool({
      description: t.description ?? t.name,
      inputSchema: jsonSchema(t.inputSchema),
      execute: async (input) => (await mcp.callTool({ name: t.name, arguments: input })).content,
    });
  }
  const openai = createOpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY });
  const result = streamText({ model: openai.chat("gpt-4o"), prompt: "go", tools, maxRetries: 0, stopWhen: stepCountIs(3) });
  for await (const part of result.fullStream) {
    if (part.type === "error") throw part.error;
  }
} finally {
  await mcp.close();
}
