// `node/openai:openai-responses:responses.stream`: the openai SDK's ResponseStream helper
// (openai/lib/responses/ResponseStream), read as an application reads it: the tool runs on
// `response.function_call_arguments.done`, the event that presents the call's arguments as
// complete; the call id and name come from the `response.output_item.added` event of the
// same item, the response id from `response.created` (what the helper emitted, as an
// application sees it). Cancellation: the request's AbortSignal.
import OpenAI from "openai";
import { MODEL, serveRow } from "./common.js";

await serveRow({
  name: "openai (node) responses.stream, response.function_call_arguments.done",
  reads: "openai-responses",
  cancellation: true,
  async run(ctx) {
    const client = new OpenAI({ baseURL: `${ctx.baseUrl}/v1`, apiKey: "callsafe", maxRetries: 0, fetch: ctx.fetch });
    const stream = client.responses.stream(
      {
        model: MODEL,
        input: "go",
        tools: ctx.tools.map((t) => ({ type: "function", name: t.name, parameters: t.schema, strict: false })),
      },
      { signal: ctx.signal ?? undefined },
    );
    const items = new Map<string, { callId: string; name: string }>();
    let response: string | null = null;
    stream.on("response.created", (event) => {
      response = event.response.id;
    });
    stream.on("response.output_item.added", (event) => {
      const item = event.item;
      if (item.type === "function_call" && item.id) items.set(item.id, { callId: item.call_id, name: item.name });
    });
    stream.on("response.function_call_arguments.done", (event) => {
      const item = items.get(event.item_id);
      if (!item) return ctx.env.log(`arguments.done for ${event.item_id}, an item the stream did not add`);
      ctx.offer(item.callId, item.name, event.arguments, { response, item: event.item_id });
    });
    await stream.done();
  },
});
