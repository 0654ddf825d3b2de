"""The explorer's search over slot-coded states, with the compiled step memoised per slot.

Why: on the benchmark's configuration (3 calls, 2 turns: 204,811 states, 6.5 million
transitions) the compiled step (:mod:`callsafe.formal.compiled`) took about 80% of the
search's CPU, evaluating some sixty conditions and building a 39-byte successor per
transition, and the seen-set most of the rest. Yet the reachable space is built from few
parts: 21 distinct calls, 20 turn records and a handful of system records at that
configuration. So a state is coded as one integer, a code per *slot* (each call; each turn's
status, ``ended`` and ``quarantined``; the system's tool flags and restart count), each code
an index into the slot's interned byte records at a fixed bit offset; and the successors of
a state are read from tables, filled by the compiled step itself the first time a state
needs an entry that is missing:

* an action on call ``x`` (its inputs and internal steps) reads only call ``x``, its turn's
  slot and the system slot (:func:`~callsafe.formal.abstract.symmetric`'s argument), and
  canonicalisation reads whether each other call is in a terminal lifecycle state; so the
  call's actions and the change each makes to the state's integer (a difference of codes at
  their offsets) are one table entry per call, keyed by those slots and the other calls'
  terminal flags;
* a turn or system action is enabled by the turn and system slots alone; it moves the calls
  it reaches, each by its own lifecycle event (a function of the calls' slots alone), and
  sets the turn and system slots from those slots and the calls' terminal flags after the
  move (canonicalisation); so which of them are enabled is one entry per turn-and-system
  code, and each one's change two entries: the calls' by the calls' codes, the rest by the
  turn-and-system code and the new terminal flags;
* the invariants and "every call is terminal" read the calls alone: one entry per calls' code.

Where a state needs an entry not yet made, :meth:`SlotSearch.fill` runs the compiled step on
it (decoded to bytes) and enters every group of its successors; an entry made again from
another state must come out equal, or the search stops with an error (what these reads
rely on is checked on every state the compiled step runs on, besides
``tests/test_model_compiled.py`` and ``tests/test_model_symmetry.py``, which compare whole
explorations with the interpreted rules). States are integers in the seen-set and the store
(32 bytes each instead of a 72-byte ``bytes`` object), the symmetry reduction sorts a turn's
call codes by their bytes (the order of :func:`~callsafe.formal.abstract.call_key`), and the
breadth-first loop itself is generated per configuration and variant (symmetry, graph kept),
unrolled over the calls, like the step. Successors come out in the order of
``SystemModel.all_actions``, as from the step, so the states are numbered as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from callsafe.formal.abstract import KINDS, AbsCall, SystemModel
from callsafe.formal.compiled import STATES, CompiledModel
from callsafe.model.lifecycle import TERMINAL_STATES

__all__ = ["SlotOverflow", "SlotSearch", "SlotsFound"]

_CALL_FIELDS: Final = len(AbsCall._fields)
_STATE_FIELD: Final = AbsCall._fields.index("state")
_TERMINAL_CODES: Final = frozenset(n for n, s in enumerate(STATES) if s in TERMINAL_STATES)
CALL_BITS: Final = 12  # up to 4,096 distinct calls (21 at 3 calls, 2 turns, 1 fragment)
TURN_BITS: Final = 6  # a turn's status, ended and quarantined: at most 40 records
SYSTEM_BITS: Final = 8  # the tool flags and the restart count


class SlotOverflow(Exception):
    """More distinct records in a slot than its bits hold (the caller searches over bytes)."""


class _Interned:
    """One slot's records (byte strings) and their codes, in order of first sight."""

    def __init__(self, bits: int) -> None:
        self.codes: dict[bytes, int] = {}
        self.records: list[bytes] = []
        self.limit = 1 << bits

    def code(self, record: bytes) -> int:
        found = self.codes.get(record)
        if found is None:
            found = len(self.records)
            if found >= self.limit:
                raise SlotOverflow(f"more than {self.limit} distinct slot records")
            self.codes[record] = found
            self.records.append(record)
        return found


@dataclass
class SlotsFound:
    """What the search found: the states (integers, breadth-first order), the indices of
    the states whose compiled invariant check failed, the counts and the table-entry mask."""

    keys: list[int]
    parents: Any
    via: Any
    targets: Any
    labels: Any
    offsets: Any
    failing: list[int] = field(default_factory=list)
    transitions: int = 0
    terminal: int = 0
    deadlocks: int = 0
    mask: int = 0


def _put(table: dict[int, Any], key: int, value: Any) -> None:
    """Enter ``value``; one already entered under ``key`` (from another state) must be equal."""
    old = table.get(key)
    if old is None:
        table[key] = value
    elif old != value:
        raise AssertionError(
            "the slot-memoised explorer found a state whose successors depend on more than its "
            "slots' reads (a rule read another call or turn): explore(..., compiled=False) is the reference"
        )


class SlotSearch:
    """The slot coding of one compiled model, its tables, and the generated search."""

    def __init__(self, model: SystemModel, cm: CompiledModel) -> None:
        c = model.config
        self.cm = cm
        self.calls, self.turns = c.calls, c.turns
        self.call_codes = _Interned(CALL_BITS)
        self.turn_codes = _Interned(TURN_BITS)
        self.system_codes = _Interned(SYSTEM_BITS)
        self.terminal: list[int] = []  # per call code: 1 if its lifecycle state is terminal
        self.call_off = [CALL_BITS * x for x in range(c.calls)]
        self.g_off = CALL_BITS * c.calls  # the turn and system slots start here
        self.turn_off = [self.g_off + TURN_BITS * t for t in range(c.turns)]
        self.sys_off = self.g_off + TURN_BITS * c.turns
        self.g_bits = TURN_BITS * c.turns + SYSTEM_BITS
        self.base = _CALL_FIELDS * c.calls  # where the turns begin in the flat state
        self.call_mask = (1 << self.g_off) - 1
        m = (1 << CALL_BITS) - 1
        turn_of = [c.turn_of(x) for x in range(c.calls)]
        sys_mask = ((1 << SYSTEM_BITS) - 1) << self.sys_off
        self.keep = [
            (m << self.call_off[x]) | (((1 << TURN_BITS) - 1) << self.turn_off[turn_of[x]]) | sys_mask
            for x in range(c.calls)
        ]
        # per action: ("call", x) or ("turn"/"global", record of its tables)
        self.local: list[dict[int, tuple[int, tuple[tuple[int, int], ...]]]] = [{} for _ in range(c.calls)]
        self.graph = True  # whether the search keeps every transition (set by :meth:`run`)
        self.per_calls: dict[int, tuple[int, ...]] = {}  # calls code -> (bits, keys...)
        self.enabled: dict[int, tuple[tuple[Any, ...], tuple[Any, ...]]] = {}  # g -> (turn, global)
        self.enabled_actions: dict[int, tuple[int, ...]] = {}  # g -> the actions, to check a refill
        self.kind: list[tuple[str, int]] = []
        self.records: list[tuple[int, dict[int, tuple[int, int]], dict[int, int]]] = []
        for a, action in enumerate(model.all_actions):
            scope = KINDS[action.name].scope
            self.kind.append(("call", action.target) if scope in ("call", "internal") else (scope, -1))
            self.records.append((a, {}, {}))
        self.mask = 0
        self.calls_of_turn = c.calls_of_turn

    # -- coding ---------------------------------------------------------------------

    def encode(self, flat: bytes) -> int:
        """A flat state (bytes, :mod:`~callsafe.formal.compiled`'s) as slot codes."""
        code = 0
        calls, get = self.call_codes, self.call_codes.codes.get
        for x, off in enumerate(self.call_off):
            record = flat[_CALL_FIELDS * x : _CALL_FIELDS * (x + 1)]
            n = get(record)
            if n is None:
                n = calls.code(record)
                self.terminal.append(1 if record[_STATE_FIELD] in _TERMINAL_CODES else 0)
            code |= n << off
        b, t = self.base, self.turns
        turn_code = self.turn_codes.code
        for k, off in enumerate(self.turn_off):  # the turn's status, ended and quarantined
            code |= turn_code(flat[b + k : b + 3 * t : t]) << off
        return code | self.system_codes.code(flat[b + 3 * t :]) << self.sys_off

    def decode(self, code: int) -> bytes:
        """The flat state (bytes) of a slot-coded one."""
        m = (1 << CALL_BITS) - 1
        calls = b"".join(self.call_codes.records[(code >> off) & m] for off in self.call_off)
        tm = (1 << TURN_BITS) - 1
        turns = b"".join(self.turn_codes.records[(code >> off) & tm] for off in self.turn_off)
        system = self.system_codes.records[code >> self.sys_off]
        return calls + turns[0::3] + turns[1::3] + turns[2::3] + system

    # -- filling the tables from the compiled step -------------------------------------

    def _terminal_flags(self, code: int) -> list[int]:
        m = (1 << CALL_BITS) - 1
        return [self.terminal[(code >> off) & m] for off in self.call_off]

    def calls_entry(self, s: int) -> tuple[int, ...]:
        """The entry of ``s``'s calls: whether they satisfy every invariant (bit 0) and are all
        terminal (bit 1), and per call the other calls' terminal flags at their offsets."""
        cc = s & self.call_mask
        found = self.per_calls.get(cc)
        if found is None:
            flat = self.decode(s)
            flags = self._terminal_flags(s)
            keys = [sum(flags[y] << self.call_off[y] for y in range(self.calls) if y != x) for x in range(self.calls)]
            found = self.per_calls[cc] = (int(self.cm.holds(flat)) | int(self.cm.terminal(flat)) << 1, *keys)
        return found

    def fill_local(self, s: int, x: int) -> tuple[int, tuple[tuple[int, int], ...]]:
        """The entry of call ``x``'s actions in ``s``, from the compiled step of those actions:
        how many there are and their actions and changes; without the graph, only the first
        action of each change that is not a self-loop (the others find their successor seen)."""
        step = self.cm.group_steps.get(f"call{x}")
        moves: list[tuple[int, int]] = []
        if step is not None:  # else: no action on a call in this configuration
            m, succs = step(self.decode(s))
            self.mask |= m
            moves = [(a, self.encode(succ) - s) for a, succ in succs]
        kept = moves
        if not self.graph:
            firsts: dict[int, int] = {}
            for a, d in moves:
                if d:
                    firsts.setdefault(d, a)
            kept = [(a, d) for d, a in firsts.items()]
        entry = (len(moves), tuple(kept))
        _put(self.local[x], (s & self.keep[x]) | self.calls_entry(s)[1 + x], entry)
        return entry

    def fill_broadcast(self, s: int) -> None:
        """Enter the tables that ``s``'s turn and system actions read, from the compiled step
        of those actions."""
        step = self.cm.group_steps.get("broadcast")
        cc, g = s & self.call_mask, s >> self.g_off
        turn: list[Any] = []
        glob: list[Any] = []
        if step is not None:
            m, succs = step(self.decode(s))
            self.mask |= m
            for a, succ in succs:
                t = self.encode(succ)
                tcc = t & self.call_mask
                tf = sum(f << y for y, f in enumerate(self._terminal_flags(t))) << self.g_bits
                record = self.records[a]
                _put(record[1], cc, (tcc - cc, tf))
                _put(record[2], g | tf, (t - tcc) - (s - cc))
                (turn if self.kind[a][0] == "turn" else glob).append(record)
        _put(self.enabled_actions, g, tuple(r[0] for r in (*turn, *glob)))
        self.enabled[g] = (tuple(turn), tuple(glob))

    # -- the symmetry reduction -----------------------------------------------------

    def symmetric(self, s: int) -> int:
        """The representative: each turn's call codes sorted by their records' bytes."""
        m, records = (1 << CALL_BITS) - 1, self.call_codes.records
        for members in self.calls_of_turn:
            if len(members) < 2:
                continue
            offs = [self.call_off[x] for x in members]
            codes = [(s >> off) & m for off in offs]
            ordered = sorted(codes, key=records.__getitem__)
            if ordered != codes:
                for off, old, new in zip(offs, codes, ordered, strict=True):
                    s += (new - old) << off
        return s

    def _symmetric_function(self) -> Callable[[int], int]:
        """:meth:`symmetric` unrolled: a compare-and-swap for a turn of two calls."""
        m = (1 << CALL_BITS) - 1
        lines = ["def sym(s):"]
        for members in self.calls_of_turn:
            if len(members) == 2:
                a, b = (self.call_off[x] for x in members)
                lines += [
                    f"    a = (s >> {a}) & {m}",
                    f"    b = (s >> {b}) & {m}",
                    "    if a != b and R[a] > R[b]:",
                    f"        s += ((b - a) << {a}) + ((a - b) << {b})",
                ]
            elif len(members) > 2:
                lines.append("    s = SORT(s)")
                break
        lines.append("    return s")
        namespace: dict[str, Any] = {"R": self.call_codes.records, "SORT": self.symmetric}
        exec(compile("\n".join(lines) + "\n", "<callsafe.formal.slots sym>", "exec"), namespace)
        sym: Callable[[int], int] = namespace["sym"]
        return sym

    # -- the generated search -------------------------------------------------------

    def source(self, symmetry: bool, graph: bool) -> str:
        """The breadth-first loop, unrolled over the calls."""
        n = self.calls
        lines = [
            "def search(keys, parents, via, targets, labels, offsets, failing, limit):",
            "    seen = {keys[0]: 0}" if graph else "    seen = {keys[0]}",
            "    seen_get = seen.get" if graph else "    seen_add = seen.add",
            "    PER_CALLS_get, ENABLED_get = PER_CALLS.get, ENABLED.get",
            *(f"    LOCAL{x}_get = LOCAL{x}.get" for x in range(n)),
            "    keys_append, parents_append, via_append = keys.append, parents.append, via.append",
            "    targets_append, labels_append = targets.append, labels.append",
            "    transitions = terminals = deadlocks = 0",
            "    i = 0",
            "    while i < len(keys):",
            "        if len(keys) > limit:",
            "            raise BOUND(limit)",
            "        s = keys[i]",
            "        cc = s & CM",
            "        g = s >> GOFF",
            "        pc = PER_CALLS_get(cc)",
            "        if pc is None:",
            "            pc = CALLS_ENTRY(s)",
            f"        h, {''.join(f'k{x}, ' for x in range(n))}= pc",
            *(f"        L{x} = LOCAL{x}_get((s & KEEP{x}) | k{x})" for x in range(n)),
            *(f"        if L{x} is None:\n            L{x} = FILL_LOCAL(s, {x})" for x in range(n)),
            "        E = ENABLED_get(g)",
            "        if E is None:",
            "            FILL_BROADCAST(s)",
            "            E = ENABLED[g]",
            f"        moves = len(E[0]) + len(E[1]){''.join(f' + L{x}[0]' for x in range(n))}",
            "        transitions += moves",
            "        if not moves:",
            "            deadlocks += 1",
            "        if not h & 1:",
            "            failing.append(i)",
            "        if h & 2:",
            "            terminals += 1",
        ]

        def visit(indent: str) -> list[str]:
            out = []
            if symmetry:
                check = "seen_get(t) is None" if graph else "t not in seen"
                out += [f"{indent}if {check}:", f"{indent}    t = SYM(t)"]
            if graph:
                out += [
                    f"{indent}j = seen_get(t)",
                    f"{indent}if j is None:",
                    f"{indent}    j = seen[t] = len(keys)",
                    f"{indent}    keys_append(t)",
                    f"{indent}    parents_append(i)",
                    f"{indent}    via_append(a)",
                    f"{indent}targets_append(j)",
                    f"{indent}labels_append(a)",
                ]
            else:
                out += [
                    f"{indent}if t not in seen:",
                    f"{indent}    seen_add(t)",
                    f"{indent}    keys_append(t)",
                    f"{indent}    parents_append(i)",
                    f"{indent}    via_append(a)",
                ]
            return out

        broadcast = [
            "            r = cdb.get(cc)",
            "            if r is None:",
            "                FILL_BROADCAST(s)",
            "                r = cdb[cc]",
            "            q = hb.get(g | r[1])",
            "            if q is None:",
            "                FILL_BROADCAST(s)",
            "                q = hb[g | r[1]]",
            "            t = s + r[0] + q",
        ]
        lines += ["        for a, cdb, hb in E[0]:", *broadcast, *visit("            ")]
        for x in range(n):
            lines += [f"        for a, d in L{x}[1]:", "            t = s + d", *visit("            ")]
        lines += ["        for a, cdb, hb in E[1]:", *broadcast, *visit("            ")]
        if graph:
            lines.append("        offsets.append(len(targets))")
        lines += [
            "        i += 1",
            "    if len(keys) > limit:",
            "        raise BOUND(limit)",
            "    return transitions, terminals, deadlocks",
        ]
        return "\n".join(lines) + "\n"

    def run(
        self,
        start: bytes,
        found: SlotsFound,
        symmetry: bool,
        graph: bool,
        limit: int,
        bound: Callable[[int], Exception],
    ) -> None:
        """Search from ``start`` into ``found`` (whose arrays hold the initial state's entries)."""
        self.graph = graph
        s0 = self.encode(start)
        found.keys[:] = [s0]
        namespace: dict[str, Any] = {
            "CM": self.call_mask,
            "GOFF": self.g_off,
            "PER_CALLS": self.per_calls,
            "ENABLED": self.enabled,
            "FILL_LOCAL": self.fill_local,
            "FILL_BROADCAST": self.fill_broadcast,
            "CALLS_ENTRY": self.calls_entry,
            "SYM": self._symmetric_function(),
            "BOUND": bound,
        }
        for x in range(self.calls):
            namespace[f"LOCAL{x}"] = self.local[x]
            namespace[f"KEEP{x}"] = self.keep[x]
        source = self.source(symmetry, graph)
        exec(compile(source, "<callsafe.formal.slots search>", "exec"), namespace)  # generated here
        f = found
        counts = namespace["search"](f.keys, f.parents, f.via, f.targets, f.labels, f.offsets, f.failing, limit)
        f.transitions, f.terminal, f.deadlocks = counts
        f.mask = self.mask
