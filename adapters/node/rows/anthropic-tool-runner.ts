// `node/@anthropic-ai/sdk:anthropic-messages:toolRunner`: the Anthropic SDK's tool runner
// (`client.beta.messages.toolRunner({ stream: true, tools: [betaTool(...)] })`), which reads
// each response with its BetaMessageStream and itself runs the tools the message asks for;
// what reaches a tool's `run` (with the tool_use block it was called for) goes to callsafe's
// executor. The runner's next request (with the tool results) gets a short text reply from
// the row's own fetch, so that the run ends. Cancellation: the request's AbortSignal.
import Anthropic from "@anthropic-ai/sdk";
import { betaTool } from "@anthropic-ai/sdk/helpers/beta/json-schema";
import type { Json } from "../src/callsafe-target.js";
import { MODEL, serveRow } from "./common.js";

await serveRow({
  name: "@anthropic-ai/sdk (node) beta.messages.toolRunner, stream: true",
  reads: "anthropic-messages",
  cancellation: true,
  followUp: true,
  async run(ctx) {
    const client = new Anthropic({ baseURL: ctx.baseUrl, apiKey: "callsafe", maxRetries: 0, fetch: ctx.fetch });
    const tools = ctx.tools.map((t) =>
      betaTool({
        name: t.name,
        description: t.name,
        inputSchema: { ...t.schema, type: "object" } as { type: "object" },
        run: (input, context) => {
          const block = context?.toolUse;
          ctx.executed(block?.id ?? "", t.name, input as Json);
          return "ok";
        },
      }),
    );
    const runner = client.beta.messages.toolRunner(
      { model: MODEL, max_tokens: 1024, messages: [{ role: "user", content: "go" }], tools, stream: true, max_iterations: 3 },
      { signal: ctx.signal ?? undefined },
    );
    for await (const stream of runner) {
      for await (const _event of stream) {
        // the events are the SDK's; the tools are what is judged
      }
    }
  },
});
