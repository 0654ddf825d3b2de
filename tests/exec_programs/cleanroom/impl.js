'use strict';
// A clean-room streaming tool-call assembler that speaks callsafe's target protocol
// (version 1) over stdio. Written from the spec
// (/work/shared/spec/seed-streaming-tool-call-assembly.txt) and callsafe's public docs.
//
// Shape: `Assembler` is the application (one per trace); the bottom of the file is the
// protocol plumbing (newline-delimited JSON, nested handling while a validation is
// pending, restart-inside-validation as an unwinding crash).

const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');
const Ajv2020 = require('ajv/dist/2020').default;
const { parse, ParseError } = require('./json.js');

// A diagnostic build only (round 3 of ROUNDS.md): imitates callsafe's model where I judged
// callsafe wrong, so that other violations become visible. Never set for certification.
const PROBE = process.env.CLEANROOM_PROBE === '1';

const CAPABILITIES = [
  'cancellation',
  'operator_controls',
  'confirmation',
  'restart',
  'ledger',
  'status',
  'business_validation',
  'catalog_changes',
  'turn_binding',
];

// ------------------------------------------------------------------------------------
// output
// ------------------------------------------------------------------------------------

function sendRaw(line) {
  process.stdout.write(line + '\n');
}
function send(msg) {
  sendRaw(JSON.stringify(msg));
}

// ------------------------------------------------------------------------------------
// schema validation (JSON Schema 2020-12, ajv)
// ------------------------------------------------------------------------------------

// PROBE only: read `$` as Python's re does (end, or before a final newline), to see past
// the regex false alarms of ROUNDS.md; the certified build uses ECMA-262 as 2020-12 says.
function pythonDollar(pattern) {
  let out = '';
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\') { out += c + (pattern[i + 1] || ''); i++; continue; }
    if (inClass) { if (c === ']') inClass = false; out += c; continue; }
    if (c === '[') { inClass = true; out += c; continue; }
    if (c === '$') { out += '(?=\\n?(?![\\s\\S]))'; continue; }
    out += c;
  }
  return out;
}
const probeRegExp = (pattern, flags) => new RegExp(pythonDollar(pattern), flags);
probeRegExp.code = 'probeRegExp';

const ajv = new Ajv2020(
  PROBE
    ? { strict: false, allErrors: false, validateFormats: false, code: { regExp: probeRegExp } }
    : { strict: false, allErrors: false, validateFormats: false },
);
const compiled = new Map(); // schema text -> validate fn | Error

function schemaCheck(schema, value) {
  const text = JSON.stringify(schema);
  let fn = compiled.get(text);
  if (fn === undefined) {
    try {
      fn = ajv.compile(schema);
    } catch (err) {
      fn = err instanceof Error ? err : new Error(String(err));
    }
    compiled.set(text, fn);
  }
  if (fn instanceof Error) return 'schema_unusable';
  if (fn(value)) return null;
  const e = (fn.errors && fn.errors[0]) || {};
  return `schema_invalid:${e.keyword || 'unknown'}`; // the keyword only, never a value or a key
}

// ------------------------------------------------------------------------------------
// the assembler
// ------------------------------------------------------------------------------------

const FINAL = new Set(['dispatched', 'cancelled', 'failed']);
const UNFINISHED = new Set(['collecting', 'validating', 'awaiting_confirmation']);

class Crash {
  // a restart delivered while we waited for the business validator: unwind everything
  constructor(message) {
    this.message = message;
  }
}

function keyStr(k) {
  return JSON.stringify([k.tenant, k.turn, k.response, k.item, k.call]);
}

function utf8Bytes(s) {
  return Buffer.byteLength(s, 'utf8');
}

class Assembler {
  constructor(io, start) {
    this.io = io; // { validate(key, tool, argsCanon) -> Promise<reason|null> }
    this.tools = start.tools || {};
    this.limits = {
      call_bytes: Number.isInteger(start.limits && start.limits.call_bytes) ? start.limits.call_bytes : 64 * 1024,
      turn_bytes: Number.isInteger(start.limits && start.limits.turn_bytes) ? start.limits.turn_bytes : 256 * 1024,
    };
    this.storeFile = start.store_dir ? path.join(start.store_dir, 'cleanroom-store.json') : null;
    this.memoryStore = null;
    this.d = Assembler.emptyDurable();
    this.buffers = new Map(); // keyStr -> Map(position -> text): volatile, never persisted
    this.shown = new Map(); // turn -> last status shown (volatile)
    this.save();
  }

  static emptyDurable() {
    return {
      turns: {}, // turn -> {actor, tenant, conversation, traceparent, live, ended}
      current: {}, // JSON [tenant, conversation] -> turn
      turnBytes: {}, // JSON [tenant, turn] -> bytes accepted
      calls: {}, // keyStr -> call record (no argument text)
      terminals: {}, // event_id -> true (every terminal event id ever delivered)
      quarantined: {}, // response -> reason
      disabled: {}, // tool -> reason
      deadResponses: {}, // JSON [tenant, turn, response] -> why
    };
  }

  // -- durability -------------------------------------------------------------------
  save() {
    const text = JSON.stringify(this.d);
    if (this.storeFile) {
      const tmp = this.storeFile + '.tmp';
      fs.writeFileSync(tmp, text);
      fs.renameSync(tmp, this.storeFile);
    } else {
      this.memoryStore = text;
    }
  }

  restart() {
    const text = this.storeFile ? fs.readFileSync(this.storeFile, 'utf8') : this.memoryStore;
    this.d = JSON.parse(text);
    this.buffers = new Map();
    if (!PROBE) this.shown = new Map();
    // buffers are not durable: a call that was still in flight can never become a candidate
    for (const [ks, rec] of Object.entries(this.d.calls)) {
      if (UNFINISHED.has(rec.state)) this.finish(ks, 'failed', 'restart');
    }
    this.save();
  }

  // -- observations -----------------------------------------------------------------
  status(turn, status) {
    if (this.shown.get(turn) === status) return;
    if (PROBE && status === 'preparing' && ['retry', 'handoff'].includes(this.shown.get(turn))) return;
    this.shown.set(turn, status);
    send({ type: 'observe', observation: { status_shown: { turn, status } } });
  }

  ledger(rec) {
    send({
      type: 'observe',
      observation: {
        ledger_row: {
          key: rec.key,
          fragments: rec.fragments,
          terminal_reason: rec.terminalReason,
          parse: rec.parse,
          validation: rec.validation,
          decision: rec.decision,
          traceparent: rec.traceparent,
        },
      },
    });
  }

  audit(action, reason, keys) {
    send({ type: 'observe', observation: { audit_row: { action, reason, keys } } });
  }

  // -- helpers ----------------------------------------------------------------------
  binding(turn) {
    return Object.prototype.hasOwnProperty.call(this.d.turns, turn) ? this.d.turns[turn] : null;
  }

  keyOf(ev) {
    const b = this.binding(ev.turn);
    if (!b) return null;
    return { tenant: b.tenant, turn: ev.turn, response: ev.response, item: ev.item, call: ev.call };
  }

  turnIsCurrent(turn) {
    const b = this.binding(turn);
    if (!b || !b.live) return false;
    return this.d.current[JSON.stringify([b.tenant, b.conversation])] === turn;
  }

  declaration(tool) {
    return Object.prototype.hasOwnProperty.call(this.tools, tool) ? this.tools[tool] : null;
  }

  newRecord(key, tool) {
    const b = this.binding(key.turn);
    return {
      key,
      tool,
      state: 'collecting',
      fragments: 0,
      bytes: 0,
      terminalReason: null,
      parse: 'pending',
      validation: 'pending',
      decision: 'inert',
      why: null,
      traceparent: b ? b.traceparent || null : null,
      declaration: null,
    };
  }

  // Move a call to a final state (dispatched is done in dispatch()).
  finish(ks, state, why, statusWord) {
    const rec = this.d.calls[ks];
    if (!rec || FINAL.has(rec.state)) return false;
    rec.state = state;
    rec.why = why;
    rec.decision = state; // 'cancelled' | 'failed'
    if (rec.parse === 'pending') rec.parse = 'not_parsed';
    if (rec.validation === 'pending') rec.validation = 'not_validated';
    this.buffers.delete(ks);
    this.ledger(rec);
    this.status(rec.key.turn, statusWord || 'retry');
    return true;
  }

  unfinishedCalls(pred) {
    const out = [];
    for (const [ks, rec] of Object.entries(this.d.calls)) {
      if (UNFINISHED.has(rec.state) && pred(rec)) out.push(ks);
    }
    return out;
  }

  // -- events -----------------------------------------------------------------------
  async receive(event) {
    const kinds = Object.keys(event);
    if (kinds.length !== 1) return;
    const kind = kinds[0];
    const ev = event[kind] || {};
    try {
      switch (kind) {
        case 'turn_started': return this.onTurnStarted(ev);
        case 'call_opened': return this.onCallOpened(ev);
        case 'fragment': return this.onFragment(ev);
        case 'text_fragment': return; // assistant text never mixes into arguments
        case 'call_terminal': return await this.onCallTerminal(ev);
        case 'response_terminal': return this.onResponseTerminal(ev);
        case 'cancel_turn': return this.onCancelTurn(ev);
        case 'disconnect': return this.onDisconnect(ev);
        case 'tool_changed': return this.onToolChanged(ev);
        case 'confirm': return this.onConfirm(ev);
        case 'quarantine_response': return this.onQuarantine(ev);
        case 'disable_tool': return this.onDisableTool(ev);
        case 'stop_tenant': return this.onStopTenant(ev);
        case 'restart': return this.restart();
        default: return; // unknown input: nothing runs
      }
    } finally {
      this.save();
    }
  }

  onTurnStarted(ev) {
    if (typeof ev.turn !== 'string') return;
    if (this.binding(ev.turn)) return; // a repeat, or a re-announcement: the first binding stands
    const conversation = typeof ev.conversation === 'string' ? ev.conversation : 'main';
    const ck = JSON.stringify([ev.tenant, conversation]);
    const previous = this.d.current[ck];
    this.d.turns[ev.turn] = {
      actor: ev.actor,
      tenant: ev.tenant,
      conversation,
      traceparent: ev.traceparent || null,
      live: true,
    };
    if (previous !== undefined && previous !== ev.turn) {
      const pb = this.d.turns[previous];
      if (pb) pb.live = false;
      for (const ks of this.unfinishedCalls((r) => r.key.turn === previous && r.key.tenant === ev.tenant)) {
        this.finish(ks, 'cancelled', 'superseded by a new turn');
      }
    }
    this.d.current[ck] = ev.turn;
  }

  onCallOpened(ev) {
    const key = this.keyOf(ev);
    if (!key) return; // a call of a turn nobody started: no binding, nothing to assemble
    const ks = keyStr(key);
    const rec = this.d.calls[ks];
    if (rec) {
      if (rec.tool !== ev.tool && UNFINISHED.has(rec.state)) {
        this.finish(ks, 'failed', 'call re-announced with another tool');
      }
      return; // a repeated announcement
    }
    const fresh = this.newRecord(key, ev.tool);
    this.d.calls[ks] = fresh;
    const b = this.binding(key.turn);
    if (!this.turnIsCurrent(key.turn)) return void this.finish(ks, 'cancelled', b.live ? 'turn superseded' : 'turn stopped');
    if (Object.prototype.hasOwnProperty.call(this.d.quarantined, key.response)) {
      return void this.finish(ks, 'cancelled', 'response quarantined', 'handoff');
    }
    if (Object.prototype.hasOwnProperty.call(this.d.disabled, ev.tool)) {
      return void this.finish(ks, PROBE ? 'failed' : 'cancelled', 'tool disabled', 'handoff');
    }
    if (this.d.deadResponses[JSON.stringify([key.tenant, key.turn, key.response])]) {
      return void this.finish(ks, 'cancelled', 'response already over');
    }
    if (!this.declaration(ev.tool) && !PROBE) return void this.finish(ks, 'failed', 'unknown tool');
    fresh.declaration = JSON.stringify(this.declaration(ev.tool));
    this.buffers.set(ks, new Map());
    this.ledger(fresh);
    this.status(key.turn, 'preparing');
  }

  onFragment(ev) {
    const key = this.keyOf(ev);
    if (!key) return;
    const ks = keyStr(key);
    let rec = this.d.calls[ks];
    if (!rec) {
      // data for a call that was never announced: it can never run
      rec = this.newRecord(key, null);
      this.d.calls[ks] = rec;
      this.finish(ks, 'failed', 'fragment for a call never opened');
      return;
    }
    if (FINAL.has(rec.state)) return; // late data for a finished call: inert, not counted
    const buf = this.buffers.get(ks);
    const pos = ev.position;
    const text = typeof ev.text === 'string' ? ev.text : null;
    if (!buf || text === null || !Number.isSafeInteger(pos) || pos < 0) {
      return void this.finish(ks, 'failed', 'malformed fragment');
    }
    if (buf.has(pos)) {
      if (buf.get(pos) === text) return; // a repeated delta: a delivery condition
      return void this.finish(ks, 'failed', 'conflicting fragment');
    }
    if (rec.state !== 'collecting') {
      // new data after the call's terminal event: the text it was validated on is not the call's
      return void this.finish(ks, 'failed', 'fragment after terminal');
    }
    const cost = Math.max(1, utf8Bytes(text));
    const tk = JSON.stringify([key.tenant, key.turn]);
    const turnTotal = this.d.turnBytes[tk] || 0;
    if (rec.bytes + cost > this.limits.call_bytes) return void this.finish(ks, 'failed', 'call byte limit');
    if (turnTotal + cost > this.limits.turn_bytes) return void this.finish(ks, 'failed', 'turn byte limit');
    buf.set(pos, text);
    rec.bytes += cost;
    rec.fragments += 1;
    this.d.turnBytes[tk] = turnTotal + cost;
  }

  async onCallTerminal(ev) {
    const key = this.keyOf(ev);
    if (!key) return;
    const ks = keyStr(key);
    // "an event_id seen before is a replay (ignore it)" (docs/adapters.md): ids are global
    const tid = String(ev.event_id);
    if (Object.prototype.hasOwnProperty.call(this.d.terminals, tid)) return; // a replayed terminal event
    this.d.terminals[tid] = true;
    const reason = typeof ev.reason === 'string' ? ev.reason : 'completed';
    let rec = this.d.calls[ks];
    if (!rec) {
      rec = this.newRecord(key, null);
      rec.terminalReason = reason;
      this.d.calls[ks] = rec;
      this.finish(ks, 'failed', 'terminal for a call never opened');
      return;
    }
    if (FINAL.has(rec.state)) return; // late terminal: rejected, nothing runs
    if (rec.state !== 'collecting') {
      // a second terminal event of the call (another id): a stop there still stops it
      if (reason !== 'completed') {
        rec.terminalReason = reason;
        this.finish(ks, 'failed', `stopped: ${reason}`);
      }
      return;
    }
    rec.terminalReason = reason;
    if (reason !== 'completed') return void this.finish(ks, 'failed', `stopped: ${reason}`);
    const buf = this.buffers.get(ks) || new Map();
    const count = buf.size;
    for (let p = 0; p < count; p++) {
      if (!buf.has(p)) {
        rec.parse = 'failed';
        return void this.finish(ks, 'failed', 'missing fragment');
      }
    }
    let text = '';
    for (let p = 0; p < count; p++) text += buf.get(p);
    let parsed;
    try {
      parsed = parse(text);
    } catch (err) {
      if (!(err instanceof ParseError) && !(err instanceof RangeError)) throw err;
      rec.parse = 'failed';
      return void this.finish(ks, 'failed', 'malformed arguments');
    }
    rec.parse = 'ok';
    const v = parsed.value;
    if (v === null || typeof v !== 'object' || Array.isArray(v)) {
      rec.validation = 'not_an_object';
      return void this.finish(ks, 'failed', 'arguments are not an object');
    }
    const decl = this.declaration(rec.tool);
    if (!decl) {
      rec.validation = 'unknown_tool';
      return void this.finish(ks, 'failed', 'unknown tool');
    }
    if (JSON.stringify(decl) !== rec.declaration) {
      return void this.finish(ks, 'cancelled', 'tool declaration changed');
    }
    const schema = decl.schema === undefined ? { type: 'object' } : decl.schema;
    const bad = schemaCheck(schema, v);
    if (bad) {
      rec.validation = bad;
      return void this.finish(ks, 'failed', 'schema');
    }
    rec.state = 'validating';
    this.save();
    const refusal = await this.io.validate(key, rec.tool, parsed.canon);
    // events may have arrived while the validator ran: check again now
    rec = this.d.calls[ks];
    if (!rec || rec.state !== 'validating') return;
    if (refusal !== null && refusal !== undefined) {
      rec.validation = 'business_refused';
      return void this.finish(ks, 'failed', 'business rule');
    }
    rec.validation = 'ok';
    const blocked = this.dispatchBlocked(rec);
    if (blocked) return void this.finish(ks, blocked.state, blocked.why, blocked.status);
    if (decl.confirm) {
      rec.state = 'awaiting_confirmation';
      rec.decision = 'await_confirmation';
      rec.args = null;
      this.buffers.set(ks, buf); // kept so a late, different fragment still fails it
      this.pendingArgs = this.pendingArgs || new Map();
      this.pendingArgs.set(ks, parsed.canon);
      this.ledger(rec);
      send({ type: 'observe', observation: { confirmation_requested: { key: rec.key, tool: rec.tool } } });
      this.status(key.turn, 'awaiting_confirmation');
      return;
    }
    this.dispatch(ks, parsed.canon);
  }

  // The execution-time check: turn currency, cancellation, operator controls, an
  // unchanged declaration, permission.
  dispatchBlocked(rec) {
    const b = this.binding(rec.key.turn);
    if (!this.turnIsCurrent(rec.key.turn)) return { state: 'cancelled', why: 'turn no longer current' };
    if (Object.prototype.hasOwnProperty.call(this.d.quarantined, rec.key.response)) {
      return { state: 'cancelled', why: 'response quarantined', status: 'handoff' };
    }
    if (Object.prototype.hasOwnProperty.call(this.d.disabled, rec.tool)) {
      return { state: 'cancelled', why: 'tool disabled', status: 'handoff' };
    }
    const decl = this.declaration(rec.tool);
    if (!decl || JSON.stringify(decl) !== rec.declaration) {
      return { state: 'cancelled', why: 'tool declaration changed' };
    }
    if (Array.isArray(decl.actors) && !decl.actors.includes(b.actor)) {
      rec.validation = 'not_permitted';
      return { state: 'cancelled', why: 'actor not permitted' };
    }
    return null;
  }

  dispatch(ks, canon) {
    const rec = this.d.calls[ks];
    const b = this.binding(rec.key.turn);
    rec.state = 'dispatched';
    rec.decision = 'dispatched';
    this.buffers.delete(ks);
    if (this.pendingArgs) this.pendingArgs.delete(ks);
    this.save(); // the claim is durable before the executor sees the call
    sendRaw(
      '{"type":"execute","key":' + JSON.stringify(rec.key) +
        ',"actor":' + JSON.stringify(b.actor) +
        ',"tool":' + JSON.stringify(rec.tool) +
        ',"arguments":' + canon +
        ',"traceparent":' + JSON.stringify(b.traceparent || null) + '}',
    );
    this.ledger(rec);
    this.status(rec.key.turn, 'done');
  }

  onResponseTerminal(ev) {
    const b = this.binding(ev.turn);
    if (!b) return;
    this.d.deadResponses[JSON.stringify([b.tenant, ev.turn, ev.response])] = 'ended';
    for (const ks of this.unfinishedCalls(
      (r) => r.state === 'collecting' && r.key.tenant === b.tenant && r.key.turn === ev.turn && r.key.response === ev.response,
    )) {
      const rec = this.d.calls[ks];
      this.finish(ks, 'failed', 'response ended before the call did');
      void rec;
    }
  }

  onCancelTurn(ev) {
    const b = this.binding(ev.turn);
    if (!b) return;
    const wasLive = b.live;
    b.live = false;
    let any = false;
    for (const ks of this.unfinishedCalls((r) => r.key.turn === ev.turn && r.key.tenant === b.tenant)) {
      any = this.finish(ks, 'cancelled', 'cancelled by the user') || any;
    }
    if (wasLive || any) this.status(ev.turn, 'retry');
  }

  onDisconnect(ev) {
    const b = this.binding(ev.turn);
    if (!b) return;
    this.d.deadResponses[JSON.stringify([b.tenant, ev.turn, ev.response])] = 'disconnected';
    for (const ks of this.unfinishedCalls(
      (r) => r.key.tenant === b.tenant && r.key.turn === ev.turn && r.key.response === ev.response,
    )) {
      this.finish(ks, 'failed', 'connection lost');
    }
  }

  onToolChanged(ev) {
    if (PROBE) {
      for (const ks of this.unfinishedCalls((r) => r.tool === ev.tool)) this.finish(ks, 'cancelled', 'tool changed');
    }
    // the harness already gave us the new catalog (the event message's `tools`); a call
    // validated against a declaration that no longer stands cannot run on it
    for (const ks of this.unfinishedCalls(() => true)) {
      const rec = this.d.calls[ks];
      const decl = this.declaration(rec.tool);
      if (!decl || JSON.stringify(decl) !== rec.declaration) this.finish(ks, 'cancelled', 'tool declaration changed');
    }
  }

  onConfirm(ev) {
    const key = this.keyOf(ev);
    if (!key) return;
    const ks = keyStr(key);
    const rec = this.d.calls[ks];
    if (!rec || FINAL.has(rec.state)) return;
    // a refusal stops the call whenever it comes; an approval counts only when we asked
    if (ev.approved === false) return void this.finish(ks, 'cancelled', 'denied by the user');
    if (rec.state !== 'awaiting_confirmation') return;
    const blocked = this.dispatchBlocked(rec);
    if (blocked) return void this.finish(ks, blocked.state, blocked.why, blocked.status);
    const canon = this.pendingArgs && this.pendingArgs.get(ks);
    if (canon === undefined) return void this.finish(ks, 'failed', 'arguments lost');
    this.dispatch(ks, canon);
  }

  onQuarantine(ev) {
    const response = ev.response;
    this.d.quarantined[response] = ev.reason || 'operator';
    const keys = [];
    for (const ks of this.unfinishedCalls((r) => r.key.response === response)) {
      keys.push(this.d.calls[ks].key);
      this.finish(ks, 'cancelled', 'response quarantined', 'handoff');
    }
    this.audit('quarantine_response', ev.reason || 'operator', keys);
  }

  onDisableTool(ev) {
    this.d.disabled[ev.tool] = ev.reason || 'operator';
    const keys = [];
    for (const ks of this.unfinishedCalls((r) => r.tool === ev.tool)) {
      keys.push(this.d.calls[ks].key);
      this.finish(ks, 'cancelled', 'tool disabled', 'handoff');
    }
    this.audit('disable_tool', ev.reason || 'operator', keys);
  }

  onStopTenant(ev) {
    const keys = [];
    for (const ks of this.unfinishedCalls((r) => r.key.tenant === ev.tenant)) {
      keys.push(this.d.calls[ks].key);
      this.finish(ks, 'cancelled', 'tenant stopped', 'handoff');
    }
    for (const [turn, b] of Object.entries(this.d.turns)) {
      if (b.tenant === ev.tenant && b.live) {
        b.live = false;
        this.status(turn, 'handoff');
      }
    }
    this.audit('stop_tenant', ev.reason || 'operator', keys);
  }
}

// ------------------------------------------------------------------------------------
// protocol plumbing
// ------------------------------------------------------------------------------------

const inbox = [];
let waiting = null;
let inputClosed = false;

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  if (!line.trim()) return;
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    process.stderr.write('cleanroom: a line that is not JSON\n');
    process.exit(2);
  }
  if (waiting) {
    const w = waiting;
    waiting = null;
    w(msg);
  } else inbox.push(msg);
});
rl.on('close', () => {
  inputClosed = true;
  if (waiting) {
    const w = waiting;
    waiting = null;
    w(null);
  }
});

function next() {
  if (inbox.length) return Promise.resolve(inbox.shift());
  if (inputClosed) return Promise.resolve(null);
  return new Promise((resolve) => {
    waiting = resolve;
  });
}

let app = null;
let validationIds = 0;

const io = {
  async validate(key, tool, canon) {
    const id = validationIds++;
    sendRaw(
      '{"type":"validate","id":' + id + ',"key":' + JSON.stringify(key) + ',"tool":' + JSON.stringify(tool) +
        ',"arguments":' + canon + '}',
    );
    for (;;) {
      const msg = await next();
      if (msg === null) throw new Crash(null);
      if (msg.type === 'validation' && msg.id === id) return msg.reason;
      if (msg.type === 'restart') throw new Crash(msg);
      if (msg.type === 'validation') continue; // an answer nobody waits for
      await handle(msg); // delivered "during validation"
    }
  },
};

function errorText(err) {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}

async function handle(msg) {
  const id = msg.id;
  switch (msg.type) {
    case 'init':
      send({
        type: 'init_ok',
        id,
        protocol: 'callsafe-target',
        version: 1,
        name: 'cleanroom-node-assembler',
        reads: 'abstract',
        capabilities: CAPABILITIES,
      });
      return;
    case 'shutdown':
      process.exit(0);
      return;
    default:
      break;
  }
  let error = null;
  try {
    switch (msg.type) {
      case 'start':
        app = new Assembler(io, msg);
        break;
      case 'event':
        if (!app) throw new Error('event before start');
        if (msg.tools) app.tools = msg.tools;
        await app.receive(msg.event);
        break;
      case 'restart':
        if (app) app.restart();
        break;
      case 'reset':
        app = null;
        break;
      default:
        throw new Error(`unexpected message ${msg.type}`);
    }
  } catch (err) {
    if (err instanceof Crash) throw err; // unwinding to the top
    error = errorText(err);
    process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  }
  send({ type: 'done', id, error });
}

async function main() {
  for (;;) {
    const msg = await next();
    if (msg === null) process.exit(0);
    try {
      await handle(msg);
    } catch (err) {
      if (!(err instanceof Crash)) throw err;
      if (err.message === null) process.exit(0);
      // crashed inside the validator: the process restarts
      let error = null;
      try {
        if (app) app.restart();
      } catch (e) {
        error = errorText(e);
      }
      send({ type: 'done', id: err.message.id, error });
    }
  }
}

main();
