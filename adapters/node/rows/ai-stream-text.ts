// `node/ai:openai-chat:streamText`: the Vercel AI SDK's `streamText` over `@ai-sdk/openai`'s
// Chat Completions model, with tools that have `execute`, so that the SDK itself decides
// which calls run and when (its StreamingToolCallTracker assembles the deltas; streamText
// runs a tool when the provider emits its `tool-call` part). What reaches `execute` goes
// to callsafe's executor. One step (streamText's default `stopWhen`), so one request.
// Cancellation: streamText's `abortSignal`.
import { createOpenAI } from "@ai-sdk/openai";
import { jsonSchema, streamText, tool, type ToolSet } from "ai";
import type { Json } from "../src/callsafe-target.js";
import { MODEL, serveRow } from "./common.js";

await serveRow({
  name: "ai (node) streamText over @ai-sdk/openai chat, tools with execute",
  reads: "openai-chat",
  cancellation: true,
  async run(ctx) {
    const openai = createOpenAI({ baseURL: `${ctx.baseUrl}/v1`, apiKey: "callsafe", fetch: ctx.fetch });
    const tools: ToolSet = {};
    for (const t of ctx.tools) {
      tools[t.name] = tool({
        description: t.name,
        inputSchema: jsonSchema(t.schema as never),
        execute: async (input: unknown, { toolCallId }) => {
          ctx.executed(toolCallId, t.name, input as Json);
          return "ok";
        },
      });
    }
    const result = streamText({
      model: openai.chat(MODEL),
      prompt: "go",
      tools,
      maxRetries: 0,
      abortSignal: ctx.signal ?? undefined,
    });
    for await (const part of result.fullStream) {
      if (part.type === "error") throw part.error;
    }
  },
});
