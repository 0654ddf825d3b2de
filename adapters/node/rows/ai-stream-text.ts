// `node/ai:openai-chat:streamText` and `node/ai:anthropic-messages:streamText`: the Vercel AI
// SDK's `streamText` over `@ai-sdk/openai`'s Chat Completions model (or, with the argument
// `anthropic`, over `@ai-sdk/anthropic`'s Messages model), with tools that have `execute`,
// so that the SDK itself decides which calls run and when (over Chat Completions its
// StreamingToolCallTracker assembles the deltas; streamText runs a tool when the provider
// emits its `tool-call` part). What reaches `execute` goes to callsafe's executor. One step
// (streamText's default `stopWhen`), so one request. Cancellation: `abortSignal`.
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { jsonSchema, streamText, tool, type LanguageModel, type ToolSet } from "ai";
import type { Json } from "../src/callsafe-target.js";
import { MODEL, serveRow, type RunContext } from "./common.js";

const anthropic = process.argv[2] === "anthropic";

function model(ctx: RunContext): LanguageModel {
  if (anthropic) return createAnthropic({ baseURL: `${ctx.baseUrl}/v1`, apiKey: "callsafe", fetch: ctx.fetch })(MODEL);
  return createOpenAI({ baseURL: `${ctx.baseUrl}/v1`, apiKey: "callsafe", fetch: ctx.fetch }).chat(MODEL);
}

await serveRow({
  name: `ai (node) streamText over @ai-sdk/${anthropic ? "anthropic" : "openai chat"}, tools with execute`,
  reads: anthropic ? "anthropic-messages" : "openai-chat",
  cancellation: true,
  madeUpIds: true,
  async run(ctx) {
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
      model: model(ctx),
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
