// `node/@langchain/core:openai-chat:ChatOpenAI.stream`: LangChain.js's ChatOpenAI (from
// `@langchain/openai`, which reads the stream through the openai SDK) streaming with bound
// tools; the chunks are concatenated with `AIMessageChunk.concat` (@langchain/core, which
// merges `tool_call_chunks` by index and parses the arguments), and the application runs
// the `tool_calls` of the concatenated message when the stream has ended, as LangChain's
// streaming docs show. Call keys: the id LangChain presents; item = the chunk index it
// merged under. Cancellation: the call's `signal`.
import type { AIMessageChunk } from "@langchain/core/messages";
import { ChatOpenAI } from "@langchain/openai";
import type { Json } from "../src/callsafe-target.js";
import { MODEL, serveRow } from "./common.js";

await serveRow({
  name: "@langchain/core (node) ChatOpenAI.stream, concatenated chunks",
  reads: "openai-chat",
  cancellation: true,
  async run(ctx) {
    const model = new ChatOpenAI({
      model: MODEL,
      apiKey: "callsafe",
      maxRetries: 0,
      streaming: true,
      configuration: { baseURL: `${ctx.baseUrl}/v1`, fetch: ctx.fetch },
    }).bindTools(ctx.tools.map((t) => ({ type: "function", function: { name: t.name, parameters: t.schema } })));
    let message: AIMessageChunk | null = null;
    const stream = await model.stream("go", { signal: ctx.signal ?? undefined });
    for await (const chunk of stream) message = message === null ? chunk : message.concat(chunk);
    if (message === null) return;
    const indexById = new Map<string, number>();
    for (const chunk of message.tool_call_chunks ?? []) {
      if (chunk.id && chunk.index !== undefined) indexById.set(chunk.id, chunk.index);
    }
    for (const call of message.tool_calls ?? []) {
      const id = call.id ?? "";
      const index = indexById.get(id);
      ctx.offer(id, call.name, call.args as Json, {
        response: message.id ?? null,
        item: index === undefined ? null : String(index),
      });
    }
  },
});
