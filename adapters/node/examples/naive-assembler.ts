// A deliberately naive assembler over the openai SDK's stream, for callsafe to catch:
//   (cd adapters/node && npm ci && npm run build)
//   callsafe certify 'exec:node adapters/node/dist/examples/naive-assembler.js'
//
// It reads a real Chat Completions stream through the `openai` package (whose base URL and
// key come from OPENAI_BASE_URL and OPENAI_API_KEY, set by callsafe to its loopback
// provider), accumulates each tool call's argument deltas by `index`, and runs the tool the
// moment the accumulated arguments parse as JSON. That is the classic bug: JSON that parses
// is not a call that ended (a later delta, a `length` stop or a dropped connection can
// still come), and two calls that share an index are glued together. The types are the
// SDK's own: the bug type-checks under `strict`, which is the point.
import OpenAI from "openai";
import type { ChatCompletionTool } from "openai/resources/chat/completions";
import { serve, type Env, type Json, type JsonObject, type Target } from "../src/callsafe-target.js";

interface TurnStarted {
  tenant: string;
  turn: string;
  actor: string;
  traceparent?: string | null;
}

interface PartialCall {
  id: string | null;
  name: string;
  args: string;
  ran: boolean;
}

class NaiveAssembler implements Target {
  private env: Env | null = null;
  private turn: TurnStarted | null = null;

  start(env: Env): void {
    this.env = env;
    this.turn = null;
  }

  receive(event: JsonObject): void {
    const started = event["turn_started"];
    if (started) this.turn = started as unknown as TurnStarted;
  }

  async stream(): Promise<void> {
    const env = this.env;
    if (env === null) throw new Error("stream before start");
    const client = new OpenAI({ maxRetries: 0 });
    const tools: ChatCompletionTool[] = Object.keys(env.tools).map((name) => ({
      type: "function",
      function: { name, parameters: { type: "object" } },
    }));
    const stream = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "go" }],
      tools,
      stream: true,
    });
    const calls = new Map<number, PartialCall>();
    for await (const chunk of stream) {
      for (const delta of chunk.choices[0]?.delta?.tool_calls ?? []) {
        let call = calls.get(delta.index);
        if (!call) {
          call = { id: null, name: "", args: "", ran: false };
          calls.set(delta.index, call);
        }
        if (delta.id) call.id = delta.id;
        call.name += delta.function?.name ?? "";
        call.args += delta.function?.arguments ?? "";
        if (call.ran || !this.turn) continue;
        let parsed: Json;
        try {
          parsed = JSON.parse(call.args) as Json;
        } catch {
          continue; // not yet
        }
        call.ran = true; // "it parses, so it is done"
        const { tenant, turn, actor, traceparent } = this.turn;
        const key = {
          tenant,
          turn,
          response: chunk.id,
          item: String(delta.index),
          call: call.id ?? `${chunk.id}#${delta.index}`,
        };
        env.execute(key, actor, call.name, parsed, traceparent ?? null);
      }
    }
  }

  restart(): void {
    this.turn = null;
  }
}

serve({
  name: "naive-assembler (node, openai SDK)",
  reads: "openai-chat",
  wire: "http",
  capabilities: [],
  create: () => new NaiveAssembler(),
});
