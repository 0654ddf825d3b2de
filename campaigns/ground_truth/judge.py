"""The rules that tag what an SDK presented with the invariants it breaks, for the ground-truth
scripts beside this file (standard library only: no callsafe import, so that the verdicts
are independent of callsafe's oracle).

Each script holds hand-written wire streams. For every stream it writes down, per call, the
readings a correct client may take (:class:`Call`), feeds the stream to the SDK as an
application does, records what each surface presented (:class:`Seen`) and asks :func:`judge`
which invariants that breaks. The rules, in plain words:

* a call presented and runnable whose only reading is "must not run" breaks INV-TERMINAL
  (it ran without a well-formed, normal end); if what stopped it was a cut (``length``,
  ``max_tokens``, an incomplete item), data after its end, or the end of its message while it
  was open, a splice of two responses, or a body that ended as a dropped connection ends,
  INV-CANCEL too;
  one whose arguments were the empty string, run with a value, breaks INV-EXACT-ARGS alone
  (the call ended; the value is invented);
* a call presented and runnable with an id, name or arguments that no reading gives breaks
  INV-EXACT-ARGS (arguments compared as JSON, as the tool would receive them);
* one call id run twice breaks INV-ONCE;
* a call every reading runs, not run with its arguments, breaks LIVE-DISPATCH.

"Runnable" is what an application checks before it runs a presented call: the tool name is in
its catalog, the arguments are a JSON object, and (on a final surface) the stop reason is a
normal end; each script sets it.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["CANCEL_WHYS", "Call", "Seen", "Stream", "emit", "judge", "record", "sse"]

TERMINAL, EXACT, ONCE, CANCEL, LIVE = "INV-TERMINAL", "INV-EXACT-ARGS", "INV-ONCE", "INV-CANCEL", "LIVE-DISPATCH"
# Why a call must not run: "open" (the body ended cleanly with no end for it); "dropped" (the
# body ended with no end marker at all, as a dropped connection does); "malformed" (its text is not one JSON
# object); "invalid" (it breaks the tool's schema, which the application does not check);
# "cut" (a length / max_tokens / incomplete stop); "late" (it came, or changed, after its end);
# "stopped-open" (its message ended while it was open); "spliced" (two responses in one);
# "empty" (its arguments were the empty string: a value run for it is one the stream never gave).
CANCEL_WHYS: Final = frozenset({"cut", "late", "stopped-open", "spliced", "dropped"})


@dataclass(frozen=True)
class Call:
    """One call of a stream and the argument objects a correct client may run it with;
    ``None`` among ``readings`` means not running it is correct too (``(None,)``: it must not
    run, for the reason ``why``)."""

    id: str
    name: str
    readings: tuple[Any, ...]
    why: str = ""


@dataclass(frozen=True)
class Stream:
    """A hand-written wire stream: its name, the bug class it stands for, the payloads (JSON
    objects; ``raw`` lines go out as written) and its calls."""

    name: str
    cls: str
    payloads: tuple[Any, ...]
    calls: tuple[Call, ...]
    done: bool = True  # the body ends with the protocol's [DONE] (Chat Completions)


@dataclass
class Seen:
    """What one surface presented for one stream."""

    presented: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""

    def add(self, call_id: Any, name: Any, arguments: Any, runs: bool, note: str = "") -> None:
        self.presented.append({"id": call_id, "name": name, "arguments": _plain(arguments), "runs": runs, "note": note})


def _plain(value: Any) -> Any:
    """A JSON-safe copy (a pydantic model or jiter output as plain data)."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return repr(value)


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def judge(stream: Stream, seen: Seen) -> dict[str, list[str]]:
    """The invariants ``seen`` breaks on ``stream``, each with why (see the module's rules)."""
    out: dict[str, list[str]] = {}

    def flag(inv: str, why: str) -> None:
        out.setdefault(inv, []).append(why)

    by_id = {c.id: c for c in stream.calls}
    runs = [p for p in seen.presented if p["runs"]]
    counts = Counter(str(p["id"]) for p in runs)
    for p in runs:
        call = by_id.get(str(p["id"]))
        if counts[str(p["id"])] > 1:
            flag(ONCE, f"{p['id']} runs {counts[str(p['id'])]} times")
        if call is None:
            flag(EXACT, f"runs {p['name']}{p['arguments']} under {p['id']!r}, an id the stream never carried")
            continue
        valid = [_canon(r) for r in call.readings if r is not None]
        if p["name"] == call.name and _canon(p["arguments"]) in valid:
            continue
        if not valid and call.why == "empty":
            flag(EXACT, f"{call.id} runs with {p['arguments']}, arguments its empty text never carried")
        elif not valid:
            flag(TERMINAL, f"{call.id} runs ({call.why}): {p['arguments']}")
            if call.why in CANCEL_WHYS:
                flag(CANCEL, f"{call.id} runs after a stop ({call.why})")
        else:
            flag(EXACT, f"{call.id} runs {p['name']}{p['arguments']}; readings: {call.name}{valid}")
    for call in stream.calls:
        if None in call.readings:
            continue
        valid = [_canon(r) for r in call.readings]
        if not any(
            str(p["id"]) == call.id and p["name"] == call.name and _canon(p["arguments"]) in valid for p in runs
        ):
            flag(LIVE, f"{call.id} ({call.name}{valid}) never runs")
    return out


def sse(payloads: tuple[Any, ...], *, event_names: bool = False, done: bool = False) -> bytes:
    """The SSE body for ``payloads``: one ``data:`` line each (with ``event: <type>`` when the
    protocol names its events), ``data: [DONE]`` last when ``done``. A ``str`` payload goes
    out as written (a line that is not one JSON object)."""
    lines: list[str] = []
    for payload in payloads:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        if event_names and isinstance(payload, dict):
            lines.append(f"event: {payload['type']}")
        lines.append(f"data: {data}")
        lines.append("")
    if done:
        lines += ["data: [DONE]", ""]
    return ("\n".join(lines) + "\n").encode()


def emit(
    library: str, versions: dict[str, str], rows: dict[str, str], results: list[dict[str, Any]], tools: dict[str, Any]
) -> None:
    """Print the script's JSON document: per matrix row (``rows``: row -> surface), the
    invariants some stream breaks there, with the streams; then every stream's record, and
    the tools' schemas (``tools``: what the application's catalog holds)."""
    summary: dict[str, dict[str, list[str]]] = {}
    for row, surface in rows.items():
        violated: dict[str, list[str]] = {}
        for result in results:
            for inv in result["surfaces"].get(surface, {}).get("violated", {}):
                violated.setdefault(inv, []).append(result["name"])
        summary[row] = violated
    document = {
        "library": library,
        "versions": versions,
        "tools": tools,
        "surfaces": rows,
        "rows": summary,
        "streams": results,
    }
    json.dump(document, sys.stdout, indent=1, ensure_ascii=True)
    sys.stdout.write("\n")


def record(stream: Stream, surfaces: dict[str, Seen]) -> dict[str, Any]:
    """One stream's entry: its class, the readings, and per surface what was presented and
    the invariants that breaks."""
    return {
        "name": stream.name,
        "class": stream.cls,
        "calls": [{"id": c.id, "name": c.name, "readings": list(c.readings), "why": c.why} for c in stream.calls],
        "payloads": list(stream.payloads),
        "done": stream.done,
        "surfaces": {
            name: {"presented": seen.presented, "error": seen.error, "violated": judge(stream, seen)}
            for name, seen in surfaces.items()
        },
    }
