"""Following a growing log or span file: the first violation reported as soon as its
record is written, in bounded memory.

Why per turn: a long-running agent writes records for ever, and the judge's cost grows
with the trace it judges. Every record belongs to one turn (its call key's, or the turn it
names) or to all of them (an operator control, a tool change, a restart, a catalog line);
each live turn is judged on its own records and the shared ones, in record order, when a
record that can show a violation arrives. A turn is *finished* when a newer turn of its
tenant and conversation starts, when it is cancelled or its tenant stopped, or when more
than ``max_turns`` turns are live (the oldest); a finished turn is judged once more
(liveness and the records' obligations are due only then) and forgotten except for its
binding, its end and the keys it ran (``remember`` finished turns at most), so that a
late execution of a forgotten turn, or a second one, is still found.

At once means: a safety finding about an *action* (what reached the executor) is reported
on the record that shows it. Findings about records (a ledger row not yet written) and
liveness wait for the turn's end, since the record they miss may still come.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from callsafe.model.vocabulary import (
    AuditRow,
    BusinessValidated,
    CallKey,
    CancelTurn,
    ConfirmationRequested,
    Event,
    Executed,
    LogLine,
    Observation,
    StopTenant,
    TurnStarted,
)
from callsafe.observe.judging import ObservedFinding, judge_records
from callsafe.observe.records import Entry, Records

__all__ = ["Follower", "Reader", "follow_file"]


# Records that show an action: a turn is judged when one arrives.
_ACTIONS: Final = (Executed, ConfirmationRequested, BusinessValidated)
# What is kept of a finished turn (its binding, its end, what it ran) judges these kinds only.
_REMEMBERED: Final = frozenset({"executions", "turns", "arguments"})


class Reader(Protocol):
    records: Records

    def feed(self, line: bytes, number: int) -> None: ...


def _turn_of(entry: Entry) -> str | None:
    item: Event | Observation | None = entry.event if entry.event is not None else entry.observation
    key = getattr(item, "key", None)
    if isinstance(key, CallKey):
        return key.turn
    turn = getattr(item, "turn", None)
    return turn if isinstance(turn, str) else None


@dataclass
class _Turn:
    entries: list[tuple[int, Entry]] = field(default_factory=list)
    binding: TurnStarted | None = None


@dataclass
class Follower:
    """Judges records as a reader takes them in (see the module docstring)."""

    reader: Reader
    kinds: frozenset[str] | None = None
    max_turns: int = 1000
    remember: int = 10_000
    shared_limit: int = 1000
    on_finding: Callable[[ObservedFinding], None] | None = None
    lines: int = 0
    found: list[ObservedFinding] = field(default_factory=list)
    _seq: int = 0
    _taken: int = 0
    _turns: OrderedDict[str, _Turn] = field(default_factory=OrderedDict)
    _shared: deque[tuple[int, Entry]] = field(default_factory=deque)
    _finished: OrderedDict[str, list[tuple[int, Entry]]] = field(default_factory=OrderedDict)
    _reported: set[tuple[str, str, str]] = field(default_factory=set)

    def feed(self, line: bytes) -> None:
        self.lines += 1
        self.reader.feed(line, self.lines)
        fresh = self.reader.records.entries[self._taken :]
        # the reader's list is drained: only what is live is kept, here
        del self.reader.records.entries[:]
        self._taken = 0
        touched: set[str] = set()
        for entry in fresh:
            self._seq += 1
            touched |= self._take(self._seq, entry)
        for turn in touched:
            if turn in self._turns:
                self._judge(turn, final=False)
        while len(self._turns) > self.max_turns:
            self._finish(next(iter(self._turns)), final=False)

    def close(self) -> None:
        """The end of the records: every live turn is finished (judged whole)."""
        for turn in list(self._turns):
            self._finish(turn)

    # -- bookkeeping --------------------------------------------------------------------

    def _take(self, seq: int, entry: Entry) -> set[str]:
        turn = _turn_of(entry)
        event = entry.event
        if turn is None or isinstance(entry.observation, (AuditRow, LogLine)):
            self._shared.append((seq, entry))
            while len(self._shared) > self.shared_limit:
                self._shared.popleft()
            if isinstance(event, StopTenant):
                for t, state in list(self._turns.items()):
                    if state.binding is not None and state.binding.tenant == event.tenant:
                        self._finish(t)
            return set()
        if turn in self._finished:  # a late record of a forgotten turn: judged on what is kept
            kept = self._finished[turn]
            kept.append((seq, entry))
            self._judge_entries(turn, kept, final=False, forgotten=True)
            if not isinstance(entry.observation, Executed):
                kept.pop()
            return set()
        state = self._turns.setdefault(turn, _Turn())
        if isinstance(event, TurnStarted) and state.binding is None:
            state.binding = event
            for other, older in list(self._turns.items()):
                b = older.binding
                if other != turn and b is not None and (b.tenant, b.conversation) == (event.tenant, event.conversation):
                    self._finish(other, superseded_by=(seq, entry))
        state.entries.append((seq, entry))
        if isinstance(event, CancelTurn):
            self._finish(turn)
            return set()
        return {turn} if isinstance(entry.observation, _ACTIONS) else set()

    def _merged(self, own: Iterable[tuple[int, Entry]], *, forgotten: bool = False) -> Records:
        records = Records(self.reader.records.source)
        kinds = set(self.reader.records.kinds if self.kinds is None else self.kinds)
        records.kinds = kinds & _REMEMBERED if forgotten else kinds
        records.tools = self.reader.records.tools
        records.limits = self.reader.records.limits
        records.entries = [e for _, e in sorted([*own, *self._shared], key=lambda t: t[0])]
        return records

    def _judge(self, turn: str, *, final: bool) -> None:
        self._judge_entries(turn, self._turns[turn].entries, final=final)

    def _judge_entries(self, turn: str, own: list[tuple[int, Entry]], *, final: bool, forgotten: bool = False) -> None:
        observed = judge_records(self._merged(own, forgotten=forgotten))
        for verdict in observed.verdicts.values():
            for found in verdict.findings:
                f = found.finding
                if not final and (f.kind != "safety" or f.about != "action"):
                    continue
                ident = (turn, f.invariant, f"{f.key}:{f.message}")
                if ident in self._reported:
                    continue
                self._reported.add(ident)
                self.found.append(found)
                if self.on_finding is not None:
                    self.on_finding(found)

    def _finish(self, turn: str, superseded_by: tuple[int, Entry] | None = None, *, final: bool = True) -> None:
        """Judge ``turn`` whole (``final``: also liveness and the records' obligations; a
        turn evicted for room may still have calls to run, so it is judged for actions
        only) and forget it but for what a late record needs."""
        state = self._turns.pop(turn, None)
        if state is None:
            return
        ending = [superseded_by] if superseded_by is not None else []
        self._judge_entries(turn, [*state.entries, *ending], final=final)
        kept = [
            (s, e)
            for s, e in state.entries
            if isinstance(e.event, (TurnStarted, CancelTurn)) or isinstance(e.observation, Executed)
        ]
        if superseded_by is not None:
            kept.append(superseded_by)
        self._finished[turn] = kept
        while len(self._finished) > self.remember:
            self._finished.popitem(last=False)
        forget = getattr(self.reader, "forget", None)
        if forget is not None:
            forget(turn)
        self._reported = {r for r in self._reported if r[0] != turn}


def follow_file(
    path: Path,
    follower: Follower,
    *,
    stop: Callable[[], bool],
    poll: float = 0.2,
    from_start: bool = True,
) -> None:
    """Feed ``follower`` the lines of ``path`` as they are written, until ``stop()`` is
    true (checked after every line and every idle poll). A line is taken only once its
    newline is written; a file that shrinks (rotated, truncated) is read again from its
    start."""
    position = 0 if from_start else path.stat().st_size
    pending = b""
    while not stop():
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size < position:
            position, pending = 0, b""
        if size == position:
            time.sleep(poll)
            continue
        with path.open("rb") as handle:
            handle.seek(position)
            chunk = handle.read(min(size - position, 1 << 20))
        position += len(chunk)
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            follower.feed(line)
            if stop():
                return
