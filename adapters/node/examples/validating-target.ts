// A small abstract target that asks callsafe's business validator before it runs a call, the
// way the helper's types invite: `await env.validate(...)` inside `receive()`.
//   (cd adapters/node && npm run build)
//   callsafe scenarios export cancel-during-validation --out cdv.json
//   callsafe replay cdv.json 'exec:node adapters/node/dist/examples/validating-target.js'
//
// While it waits for the validator's answer, callsafe delivers the events a trace marks
// "during validation" (a cancel, a catalog change): the helper hands them to `receive()`
// nested in the wait, in order, so the cancel is seen before the call runs, and a restart
// there is a crash inside the validator (the waiting `receive()` never resumes).
import { serve, type CallKey, type Env, type Json, type JsonObject, type Target } from "../src/callsafe-target.js";

type Fields = { [key: string]: string | number | boolean | null };

class ValidatingTarget implements Target {
  private env: Env | null = null;
  private readonly turns = new Map<string, { tenant: string; actor: string; chat: string; cancelled: boolean }>();
  private readonly texts = new Map<string, string>();
  private readonly tools = new Map<string, string>();

  start(env: Env): void {
    this.env = env;
  }

  async receive(event: JsonObject): Promise<void> {
    const [kind, body] = Object.entries(event)[0] as [string, Fields];
    const call = `${body.turn}/${body.response}/${body.item}/${body.call}`;
    if (kind === "turn_started") {
      const chat = String(body.conversation ?? "main");
      for (const turn of this.turns.values()) if (turn.chat === chat) turn.cancelled = true; // superseded
      this.turns.set(String(body.turn), { tenant: String(body.tenant), actor: String(body.actor), chat, cancelled: false });
    } else if (kind === "cancel_turn") {
      const turn = this.turns.get(String(body.turn));
      if (turn) turn.cancelled = true;
    } else if (kind === "call_opened") {
      this.tools.set(call, String(body.tool));
      this.texts.set(call, "");
    } else if (kind === "fragment" && this.texts.has(call)) {
      this.texts.set(call, this.texts.get(call) + String(body.text));
    } else if (kind === "call_terminal" && this.texts.has(call)) {
      await this.finish(call, body);
    }
  }

  private async finish(call: string, body: Fields): Promise<void> {
    const env = this.env;
    const turn = this.turns.get(String(body.turn));
    const tool = this.tools.get(call);
    if (env === null || turn === undefined || tool === undefined || turn.cancelled) return;
    let args: Json;
    try {
      args = JSON.parse(this.texts.get(call) ?? "") as Json;
    } catch {
      return; // not a call's arguments: never run
    }
    if (typeof args !== "object" || args === null || Array.isArray(args)) return;
    const key: CallKey = {
      tenant: turn.tenant,
      turn: String(body.turn),
      response: String(body.response),
      item: String(body.item),
      call: String(body.call),
    };
    const refused = await env.validate(key, tool, args);
    // the cancel may have arrived while the validator ran: check the turn at execution time
    if (refused === null && !turn.cancelled) env.execute(key, turn.actor, tool, args);
  }

  restart(): void {
    this.turns.clear();
    this.texts.clear();
    this.tools.clear();
  }
}

serve({
  name: "validating-target (node)",
  capabilities: ["cancellation", "business_validation"],
  create: () => new ValidatingTarget(),
});
