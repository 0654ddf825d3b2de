// `node/openai:openai-chat:chat.completions.stream`: the openai SDK's ChatCompletionStream
// helper (openai/lib/ChatCompletionStream), read as its docs show: the application runs a
// tool on the `tool_calls.function.arguments.done` event, the moment the helper presents
// the call as finished. The helper emits that event when the next tool index starts and on
// any `finish_reason` (its `done_tool_calls` set is only filled under a finish reason).
// Cancellation: the request's AbortSignal (`stream(..., { signal })`).
import OpenAI from "openai";
import { MODEL, serveRow } from "./common.js";

await serveRow({
  name: "openai (node) chat.completions.stream, tool_calls.function.arguments.done",
  reads: "openai-chat",
  cancellation: true,
  async run(ctx) {
    const client = new OpenAI({ baseURL: `${ctx.baseUrl}/v1`, apiKey: "callsafe", maxRetries: 0, fetch: ctx.fetch });
    const stream = client.chat.completions.stream(
      {
        model: MODEL,
        messages: [{ role: "user", content: "go" }],
        tools: ctx.tools.map((t) => ({ type: "function", function: { name: t.name, parameters: t.schema } })),
      },
      { signal: ctx.signal ?? undefined },
    );
    stream.on("tool_calls.function.arguments.done", (event) => {
      const snapshot = stream.currentChatCompletionSnapshot;
      const call = snapshot?.choices[0]?.message.tool_calls?.[event.index];
      const response = snapshot?.id ?? ctx.ids.response;
      const item = String(event.index);
      ctx.offer(call?.id ?? `${response}#${item}`, event.name, event.arguments, { response, item });
    });
    await stream.done();
  },
});
