// `node/@anthropic-ai/sdk:anthropic-messages:MessageStream`: the Anthropic SDK's
// MessageStream (lib/MessageStream), read as an application reads it: a `tool_use` block
// runs when its `content_block_stop` arrives, with the `input` the stream's snapshot holds
// at that moment (the SDK finalises it from the `input_json_delta` fragments with its
// partial-JSON parser). Item = the block index of the event, response = the snapshot's
// message id. Cancellation: the request's AbortSignal.
import Anthropic from "@anthropic-ai/sdk";
import { MODEL, serveRow } from "./common.js";

await serveRow({
  name: "@anthropic-ai/sdk (node) messages.stream, content_block_stop",
  reads: "anthropic-messages",
  cancellation: true,
  async run(ctx) {
    const client = new Anthropic({ baseURL: ctx.baseUrl, apiKey: "callsafe", maxRetries: 0, fetch: ctx.fetch });
    const stream = client.messages.stream(
      {
        model: MODEL,
        max_tokens: 1024,
        messages: [{ role: "user", content: "go" }],
        tools: ctx.tools.map((t) => ({
          name: t.name,
          input_schema: { ...t.schema, type: "object" as const },
        })),
      },
      { signal: ctx.signal ?? undefined },
    );
    stream.on("streamEvent", (event, snapshot) => {
      if (event.type !== "content_block_stop") return;
      const block = snapshot.content[event.index];
      if (block?.type !== "tool_use") return;
      ctx.offer(block.id, block.name, block.input as never, { response: snapshot.id, item: String(event.index) });
    });
    await stream.done();
  },
});
