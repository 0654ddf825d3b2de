// A deliberately naive assembler over the openai SDK's stream, for callsafe to catch:
//   callsafe certify 'exec:node adapters/node/examples/naive-assembler.mjs'
//
// It reads a real Chat Completions stream through the `openai` package (whose base URL and
// key come from OPENAI_BASE_URL and OPENAI_API_KEY, set by callsafe to its loopback
// provider), accumulates each tool call's argument deltas by `index`, and runs the tool the
// moment the accumulated arguments parse as JSON. That is the classic bug: JSON that parses
// is not a call that ended (a later delta, a `length` stop or a dropped connection can
// still come), and two calls that share an index are glued together.
import OpenAI from "openai";
import { serve } from "../callsafe-target.mjs";

class NaiveAssembler {
  start(env) {
    this.env = env;
    this.turn = null;
  }

  receive(event) {
    if (event.turn_started) this.turn = event.turn_started;
  }

  async stream() {
    const client = new OpenAI({ maxRetries: 0 });
    const tools = Object.keys(this.env.tools).map((name) => ({
      type: "function",
      function: { name, parameters: { type: "object" } },
    }));
    const stream = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "go" }],
      tools,
      stream: true,
    });
    const calls = new Map();
    for await (const chunk of stream) {
      for (const delta of chunk.choices?.[0]?.delta?.tool_calls ?? []) {
        let call = calls.get(delta.index);
        if (!call) calls.set(delta.index, (call = { id: null, name: "", args: "", ran: false }));
        if (delta.id) call.id = delta.id;
        call.name += delta.function?.name ?? "";
        call.args += delta.function?.arguments ?? "";
        if (call.ran || !this.turn) continue;
        let parsed;
        try {
          parsed = JSON.parse(call.args);
        } catch {
          continue; // not yet
        }
        call.ran = true; // "it parses, so it is done"
        const { tenant, turn, actor, traceparent } = this.turn;
        const key = { tenant, turn, response: chunk.id, item: String(delta.index), call: call.id ?? `${chunk.id}#${delta.index}` };
        this.env.execute(key, actor, call.name, parsed, traceparent ?? null);
      }
    }
  }

  restart() {
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
