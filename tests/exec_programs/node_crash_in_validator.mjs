// A target on the Node helper (adapters/node/dist/src/callsafe-target.js, which the test
// builds) that awaits env.validate() inside receive() and runs the call when it passes. A
// restart that arrives while it waits is a crash inside the validator: the waiting receive()
// must never resume (the call never runs, its event is never answered), the restart is
// answered once restart() has run, and the trace goes on in the restarted process.
import { serve } from "../../adapters/node/dist/src/callsafe-target.js";

class CrashInValidator {
  start(env) {
    this.env = env;
    this.turns = new Map();
    this.texts = new Map();
  }

  async receive(event) {
    const [kind, body] = Object.entries(event)[0];
    const call = `${body.turn}/${body.call}`;
    if (kind === "turn_started") this.turns.set(body.turn, body);
    if (kind === "fragment") this.texts.set(call, (this.texts.get(call) ?? "") + body.text);
    if (kind !== "call_terminal") return;
    const turn = this.turns.get(body.turn);
    const key = { tenant: turn.tenant, turn: body.turn, response: body.response, item: body.item, call: body.call };
    const args = JSON.parse(this.texts.get(call));
    const refused = await this.env.validate(key, "pay", args);
    this.env.log(`validated ${call}`);
    if (refused === null) this.env.execute(key, turn.actor, "pay", args);
  }

  restart() {
    this.env.log("restarted");
  }
}

serve({
  name: "crash-in-validator (node)",
  capabilities: ["business_validation", "restart"],
  create: () => new CrashInValidator(),
});
