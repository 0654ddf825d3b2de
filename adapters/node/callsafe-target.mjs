// The target side of the callsafe target protocol (version 1) for Node.js programs.
//
// callsafe runs your program as `exec:node your-target.mjs` and speaks newline-delimited
// JSON on its stdin and stdout (docs/target-protocol.md). This module is the whole
// program side: `serve({...})` answers the handshake, builds a fresh target for every trace,
// hands it an `env` whose `execute`, `validate` and `observe` are messages to callsafe (the
// executor and the business validator stay callsafe's), and delivers events, wire payloads
// and restarts. Nothing but messages may go to stdout: console.log is sent to stderr.
//
// A target is an object with (all optional but `receive`):
//   start(env)            a trace begins; env = {execute, validate, observe, log, tools, limits, step, storeDir}
//   receive(event)        one event, as callsafe's trace vocabulary writes it: {"kind": {fields}}
//   receiveWire(payload)  one decoded payload of a provider's stream (wire mode over stdio)
//   endStream()           that stream's body ended normally
//   stream(baseUrl)       wire mode over HTTP: read the response with your SDK (an async function);
//                         OPENAI_BASE_URL / ANTHROPIC_BASE_URL already point at callsafe
//   restart()             simulate a process restart
//   close()               the trace ended
import { createInterface } from "node:readline";

export const PROTOCOL = "callsafe-target";
export const VERSION = 1;

console.log = (...args) => console.error(...args); // keep stdout for messages

function send(message) {
  process.stdout.write(JSON.stringify(message) + "\n");
}

function errorText(err) {
  return `${(err && err.name) || "Error"}: ${(err && err.message) || String(err)}`;
}

export function serve({ name, reads = "abstract", capabilities = [], wire = "stdio", processPerTrace = false, create }) {
  let target = null;
  let step = -1;
  let tools = {};
  let nextValidation = 0;
  const pendingValidations = new Map();
  const streams = new Set();
  let chain = Promise.resolve();

  const env = {
    execute(key, actor, tool, args, traceparent = null) {
      send({ type: "execute", key, actor, tool, arguments: args, traceparent });
    },
    validate(key, tool, args) {
      const id = nextValidation++;
      send({ type: "validate", id, key, tool, arguments: args });
      return new Promise((resolve) => pendingValidations.set(id, resolve));
    },
    observe(observation) {
      send({ type: "observe", observation });
    },
    log(text) {
      send({ type: "log", text });
    },
    get tools() {
      return tools;
    },
    limits: {},
    step: () => step,
    storeDir: null,
  };

  async function handle(message) {
    const { type, id } = message;
    let error = null;
    try {
      if (type === "init") {
        send({ type: "init_ok", id, protocol: PROTOCOL, version: VERSION, name, reads, capabilities, wire,
               process_per_trace: processPerTrace });
        return;
      } else if (type === "start") {
        await reset();
        tools = message.tools;
        env.limits = message.limits;
        env.storeDir = message.store_dir ?? null;
        step = -1;
        target = create();
        if (target.start) await target.start(env);
      } else if (type === "event") {
        step = message.step;
        if (message.tools) tools = message.tools;
        await target.receive(message.event);
      } else if (type === "wire") {
        step = message.step;
        await target.receiveWire(message.payload);
      } else if (type === "end_stream") {
        if (target.endStream) await target.endStream();
      } else if (type === "stream") {
        const running = (async () => {
          let streamError = null;
          try {
            await target.stream(message.base_url);
          } catch (err) {
            streamError = errorText(err);
            console.error(err);
          }
          send({ type: "done", id, error: streamError });
        })();
        streams.add(running);
        running.finally(() => streams.delete(running));
        return;
      } else if (type === "restart") {
        if (target.restart) await target.restart();
      } else if (type === "reset") {
        await reset();
      } else if (type === "shutdown") {
        process.exit(0);
      }
    } catch (err) {
      error = errorText(err);
      console.error(err);
    }
    send({ type: "done", id, error });
  }

  async function reset() {
    await Promise.allSettled([...streams]);
    if (target && target.close) await target.close();
    target = null;
  }

  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  lines.on("line", (line) => {
    if (!line.trim()) return;
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      console.error(`callsafe-target: a line that is not JSON: ${line.slice(0, 200)}`);
      process.exit(2);
    }
    if (message.type === "validation") {
      // answered at once, never queued behind the message that is waiting for it
      const resolve = pendingValidations.get(message.id);
      pendingValidations.delete(message.id);
      if (resolve) resolve(message.reason);
      return;
    }
    chain = chain.then(() => handle(message));
  });
  lines.on("close", () => {
    chain.then(reset).finally(() => process.exit(0));
  });
}
