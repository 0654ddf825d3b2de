// `node/@openai/agents:openai-responses:run-streamed`: an Agent of the OpenAI Agents SDK
// (`@openai/agents`, over its Responses model) with one function tool per catalog entry,
// run with `run(agent, input, { stream: true })`: the SDK decides which calls run, and what
// reaches the tool's `execute` goes to callsafe's executor. The run's next model request
// (after the tools ran) gets a short text reply from the row's own fetch, so that the run
// ends. Cancellation: the run's `signal`. Tracing is off (nothing leaves the machine).
import {
  Agent,
  OpenAIResponsesModel,
  run,
  setDefaultOpenAIClient,
  setTracingDisabled,
  tool,
  type Tool,
} from "@openai/agents";
import OpenAI from "openai";
import type { Json } from "../src/callsafe-target.js";
import { MODEL, serveRow } from "./common.js";

setTracingDisabled(true);

await serveRow({
  name: "@openai/agents (node) run(agent, { stream: true }), function tools",
  reads: "openai-responses",
  cancellation: true,
  followUp: true,
  async run(ctx) {
    const client = new OpenAI({ baseURL: `${ctx.baseUrl}/v1`, apiKey: "callsafe", maxRetries: 0, fetch: ctx.fetch });
    setDefaultOpenAIClient(client);
    const tools: Tool[] = ctx.tools.map((t) =>
      tool({
        name: t.name,
        description: t.name,
        parameters: { ...t.schema, type: "object", properties: t.schema["properties"] ?? {} } as never,
        strict: false,
        execute: (input: unknown, _context, details) => {
          const callId = details?.toolCall?.callId ?? "";
          ctx.executed(callId, t.name, input as Json, { item: details?.toolCall?.id ?? null });
          return "ok";
        },
      }),
    );
    const agent = new Agent({ name: "callsafe", instructions: "", model: new OpenAIResponsesModel(client, MODEL), tools });
    const result = await run(agent, "go", { stream: true, signal: ctx.signal ?? undefined, maxTurns: 4 });
    for await (const _event of result) {
      // the events are the SDK's; the tools are what is judged
    }
    await result.completed;
    if (result.error) throw result.error;
  },
});
