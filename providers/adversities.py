"""Wire adversities: mutations of a rendered stream, each from a public bug report or a
provider's documented rules, and the verdict the mutated stream deserves.

Why on the wire, not in the abstract model: the bug classes that break client libraries are
shapes of the wire (a cumulative snapshot instead of a delta, a ``finish_reason`` on every
chunk, a replayed ``content_block_start``, the name arriving in a later chunk, a stream
that just ends). An abstract trace cannot say them, and a renderer never writes them, so a
generator of abstract traces never reaches them. An operator takes the payloads a renderer
wrote for an ordinary trace and returns variants that a real server (or a proxy) has been
seen to send; :func:`expected_events` parses each variant back with the protocol's own
parser, and the oracle judges the events it reads. The expected verdict is therefore never
written by hand: it is what the spec says about what the wire said, through the one mapping
(:mod:`callsafe.providers`) that the reference implementation also reads the wire with.

Where the parser refuses a shape the protocol's documentation does not settle (arguments
before the Chat tool name, an ``output_index`` or item id used twice, a replayed
``response.created`` or Anthropic start) or fails a call the documentation would let run
(Responses deltas that disagree with the finalized arguments), its reading is one of several
defensible ones: :mod:`callsafe.providers.readings` holds the others, and a library's run is
judged under each (:mod:`callsafe.certify.wire_readings`); their verdicts come from the same
parser and oracle, so none is written by hand either.

Each :class:`Operator` names its ``source`` (an issue in a public tracker, from
``research/public-streaming-bugs.md``, or the provider's rule it bends) and the protocols it
applies to; it returns no variant for a stream it has nothing to change in (a stream with
one call has no second index to reuse), which the generator counts as not applicable.
Operators that act on SSE bytes (:data:`SSE_OPERATORS`: every byte boundary, keep-alive
comments, CRLF) change no payload; what they check is that the byte-level reader decodes the
same payloads, so their expected events are those of the unmutated stream.

Every function here is pure: the payloads given are never changed (variants are deep
copies), so one rendering serves every operator.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from callsafe.model.vocabulary import Event, Trace, TurnStarted
from callsafe.providers import registry
from callsafe.providers.sse import encode_payloads
from callsafe.providers.streams import ParsedStream, as_servers_send, parse_payloads, render_payloads

__all__ = [
    "OPERATORS",
    "SSE_OPERATORS",
    "Operator",
    "SseOperator",
    "Variant",
    "WireTrace",
    "expected_events",
    "operator",
    "operators_for",
    "wire_trace",
]

Payload = dict[str, Any]
Payloads = list[Payload]


@dataclass(frozen=True)
class Variant:
    """One mutated stream: its payloads, whether the transport ends normally after them, and
    what was done (for the trace's name)."""

    label: str
    payloads: tuple[Payload, ...]
    clean: bool = True


@dataclass(frozen=True)
class Operator:
    """A payload-level mutation: ``apply(protocol, payloads)`` gives the variants (none when
    the stream has nothing this operator changes)."""

    name: str
    source: str
    protocols: frozenset[str]
    apply: Callable[[str, Payloads], list[Variant]]

    def variants(self, protocol: str, payloads: Sequence[Payload]) -> list[Variant]:
        if protocol not in self.protocols:
            return []
        return self.apply(protocol, copy.deepcopy(list(payloads)))


@dataclass(frozen=True)
class SseOperator:
    """A byte-level mutation: ``chunks(sse_bytes)`` gives the ways to deliver the bytes."""

    name: str
    source: str
    chunks: Callable[[bytes], Iterator[list[bytes]]]


def expected_events(protocol: str, variant: Variant, turn: str, response: str) -> ParsedStream:
    """What the protocol's parser reads from a variant: the events the oracle judges."""
    payloads = copy.deepcopy(list(variant.payloads))
    return parse_payloads(protocol, payloads, turn=turn, response=response, clean=variant.clean)


@dataclass(frozen=True)
class WireTrace(Trace):
    """An abstract trace read from a recorded or mutated stream, with the stream itself.

    ``events`` are the turn, then what ``protocol``'s parser read from ``payloads`` (ended
    cleanly after them when ``clean``, else as a dropped connection); ``operator`` names the
    wire adversity that made the stream, if any. A target that reads ``protocol`` is given
    the payloads themselves (:func:`callsafe.certify.wire.plan_recorded`), an abstract target
    the events, a target of another protocol nothing (not applicable). Minimisation leaves
    it whole: its events and payloads stand or fall together."""

    protocol: str = ""
    payloads: tuple[Mapping[str, Any], ...] = ()
    clean: bool = True
    operator: str = ""


def read_back(base: Trace, protocol: str, op: str, source: str, variant: Variant) -> WireTrace:
    """The :class:`WireTrace` of a variant of ``base``'s stream: the base's turn, then what
    the parser reads from the variant; named after the operator, the variant and the base."""
    turn = next(e for e in base.events if isinstance(e, TurnStarted))
    parsed = expected_events(protocol, variant, turn.turn, "r1")
    events: tuple[Event, ...] = (turn, *parsed.events)
    return WireTrace(
        events=events,
        tools=base.tools,
        limits=base.limits,
        name=f"wire adversity {op} ({protocol}): {variant.label}; base: {base.name}",
        source=f"{source}; expected verdicts: the oracle on what {protocol}'s parser reads from the mutated stream",
        protocol=protocol,
        payloads=variant.payloads,
        clean=variant.clean,
        operator=op,
    )


def operator(name: str) -> Operator:
    """The payload operator called ``name``."""
    for op in OPERATORS:
        if op.name == name:
            return op
    raise KeyError(f"no wire adversity {name!r}; known: {', '.join(o.name for o in OPERATORS)}")


def wire_trace(base: Trace, protocol: str, name: str, label: str) -> WireTrace:
    """The :class:`WireTrace` of operator ``name``'s variant ``label`` of ``base`` (one
    stream, items already as ``protocol`` addresses them), rendered as servers send it (a
    finding's witness, named as the generator names the same variant)."""
    payloads = [dict(p) for p in render_payloads(protocol, [e for e in base.events if not isinstance(e, TurnStarted)])]
    as_servers_send(protocol, [payloads])
    op = operator(name)
    for variant in op.variants(protocol, payloads):
        if variant.label == label:
            return read_back(base, protocol, op.name, op.source, variant)
    raise KeyError(f"{name} has no variant {label!r} for this {protocol} stream")


# --------------------------------------------------------------------------------------
# Where each protocol keeps a call's argument deltas
# --------------------------------------------------------------------------------------

CHAT: Final = "openai-chat"
RESPONSES: Final = "openai-responses"
ANTHROPIC: Final = "anthropic-messages"
_DELTA_PROTOCOLS: Final = frozenset(
    {CHAT, RESPONSES, ANTHROPIC, "bedrock-converse", "cohere-v2", "gemini-interactions"}
)


def _chat_entry(p: Payload) -> dict[str, Any] | None:
    choices = p.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return None
    calls = (choices[0].get("delta") or {}).get("tool_calls") or []
    return calls[0] if calls and isinstance(calls[0], dict) else None


def _delta_slot(protocol: str, p: Payload) -> tuple[dict[str, Any], str, str] | None:
    """For an argument delta payload: (the dict holding the text, its key, the call's key on
    the wire). None for any other payload."""
    if protocol == CHAT:
        entry = _chat_entry(p)
        function = (entry or {}).get("function") or {}
        if entry is None or function.get("name") or not function.get("arguments"):
            return None
        return function, "arguments", str(entry.get("index"))
    if protocol == RESPONSES and p.get("type") == "response.function_call_arguments.delta":
        return p, "delta", str(p.get("item_id"))
    if protocol == ANTHROPIC and p.get("type") == "content_block_delta":
        delta = p.get("delta") or {}
        if delta.get("type") == "input_json_delta":
            return delta, "partial_json", str(p.get("index"))
    if protocol == "bedrock-converse" and "contentBlockDelta" in p:
        body = p["contentBlockDelta"]
        use = (body.get("delta") or {}).get("toolUse")
        if isinstance(use, dict) and "input" in use:
            return use, "input", str(body.get("contentBlockIndex"))
    if protocol == "cohere-v2" and p.get("type") == "tool-call-delta":
        function = p["delta"]["message"]["tool_calls"]["function"]
        return function, "arguments", str(p.get("index"))
    if protocol == "gemini-interactions" and p.get("event_type") == "step.delta":
        delta = p.get("delta") or {}
        if delta.get("type") == "arguments_delta":
            return delta, "arguments", str(p.get("index"))
    return None


def _deltas(protocol: str, payloads: Payloads) -> list[int]:
    return [i for i, p in enumerate(payloads) if _delta_slot(protocol, p) is not None]


def _text(protocol: str, p: Payload) -> str:
    slot = _delta_slot(protocol, p)
    assert slot is not None
    return str(slot[0][slot[1]])


def _set_text(protocol: str, p: Payload, text: str) -> None:
    slot = _delta_slot(protocol, p)
    assert slot is not None
    slot[0][slot[1]] = text


def _call_of(protocol: str, p: Payload) -> str:
    slot = _delta_slot(protocol, p)
    assert slot is not None
    return slot[2]


def _renumber(protocol: str, payloads: Payloads) -> Payloads:
    """Responses: sequence numbers in arrival order again (they are positions to the parser,
    so an operator that adds or removes a delta renumbers, unless the replay is its point)."""
    if protocol == RESPONSES:
        for n, p in enumerate(payloads):
            if "sequence_number" in p:
                p["sequence_number"] = n
    return payloads


def _set_final_arguments(protocol: str, payloads: Payloads, call: str, text: str) -> None:
    """Responses: the done events carry the complete arguments; keep them equal to the
    deltas, so that an operator about the deltas is not also about a disagreeing done."""
    if protocol != RESPONSES:
        return
    for p in payloads:
        kind = p.get("type")
        if kind == "response.function_call_arguments.done" and str(p.get("item_id")) == call:
            p["arguments"] = text
        items = [p.get("item")] if kind == "response.output_item.done" else []
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            items = list((p.get("response") or {}).get("output") or [])
        for item in items:
            if isinstance(item, dict) and str(item.get("id")) == call and "arguments" in item:
                item["arguments"] = text


def _rewrite(protocol: str, payloads: Payloads, call: str, parts: Sequence[str]) -> Payloads:
    """The call's deltas replaced by ``parts``, in the places its deltas had (extra parts go
    right after its last delta; surplus deltas are removed)."""
    places = [i for i in _deltas(protocol, payloads) if _call_of(protocol, payloads[i]) == call]
    if not places:
        return payloads
    template = payloads[places[0]]
    out: Payloads = []
    used = 0
    for i, p in enumerate(payloads):
        if i not in places:
            out.append(p)
            continue
        if i == places[-1]:
            for part in parts[used:]:
                q = copy.deepcopy(template if used else p)
                _set_text(protocol, q, part)
                out.append(q)
                used += 1
        elif used < len(parts):
            _set_text(protocol, p, parts[used])
            out.append(p)
            used += 1
    _set_final_arguments(protocol, out, call, "".join(parts))
    return _renumber(protocol, out)


def _calls(protocol: str, payloads: Payloads) -> list[str]:
    return list(dict.fromkeys(_call_of(protocol, payloads[i]) for i in _deltas(protocol, payloads)))


def _joined(protocol: str, payloads: Payloads, call: str) -> str:
    return "".join(
        _text(protocol, payloads[i]) for i in _deltas(protocol, payloads) if _call_of(protocol, payloads[i]) == call
    )


# --------------------------------------------------------------------------------------
# Operators on argument deltas (every protocol with deltas)
# --------------------------------------------------------------------------------------


def _duplicated(protocol: str, payloads: Payloads) -> list[Variant]:
    out: list[Variant] = []
    for i in _deltas(protocol, payloads)[:2]:
        copied = copy.deepcopy(payloads)
        copied.insert(i + 1, copy.deepcopy(copied[i]))
        if protocol == RESPONSES:  # a replay keeps its sequence number; a resend gets a new one
            out.append(Variant(f"delta {i} replayed with its sequence number", tuple(copied)))
            copied = _renumber(protocol, copy.deepcopy(copied))
        out.append(Variant(f"delta {i} sent twice", tuple(copied)))
    return out


def _dropped(protocol: str, payloads: Payloads) -> list[Variant]:
    out: list[Variant] = []
    for i in _deltas(protocol, payloads)[:2]:
        copied = copy.deepcopy(payloads)
        del copied[i]
        out.append(Variant(f"delta {i} dropped", tuple(copied)))
    return out


def _cumulative(protocol: str, payloads: Payloads) -> list[Variant]:
    copied = copy.deepcopy(payloads)
    sofar: dict[str, str] = {}
    changed = False
    for i in _deltas(protocol, copied):
        call = _call_of(protocol, copied[i])
        text = sofar.get(call, "") + _text(protocol, copied[i])
        changed |= text != _text(protocol, copied[i])
        sofar[call] = text
        _set_text(protocol, copied[i], text)
    return [Variant("every delta is the arguments so far (a snapshot)", tuple(copied))] if changed else []


def _one_character(protocol: str, payloads: Payloads) -> list[Variant]:
    if not _calls(protocol, payloads):
        return []
    copied = payloads
    for call in _calls(protocol, payloads):
        copied = _rewrite(protocol, copied, call, list(_joined(protocol, copied, call)))
    return [Variant("one character per delta: equal consecutive deltas are real data", tuple(copied))]


def _escapes(protocol: str, payloads: Payloads) -> list[Variant]:
    calls = _calls(protocol, payloads)
    if not calls:
        return []
    call = calls[0]
    text = _joined(protocol, payloads, call)
    if not text.endswith("}"):
        return []
    out: list[Variant] = []
    for label, tail in (
        ("an invalid escape \\q", '"\\q"}'),
        ("a lone high surrogate \\ud800", '"\\ud800"}'),
        ("a lone low surrogate \\udc00", '"\\udc00"}'),
        ("a valid pair \\ud83d\\ude00", '"\\ud83d\\ude00"}'),
    ):
        head = text[:-1] + ',"memo":' + tail[:2]  # the escape's backslash ends a delta
        rewritten = _rewrite(protocol, copy.deepcopy(payloads), call, [head, tail[2:]])
        out.append(Variant(f"{label} split across deltas", tuple(rewritten)))
    return out


def _surrogate_split(protocol: str, payloads: Payloads) -> list[Variant]:
    """A character outside the BMP (U+1F600) in the first call's arguments, its UTF-16 pair
    split between two events: one delta's text ends with the high surrogate, the next starts
    with the low one (each event's JSON holds one ``\\uXXXX`` escape of the pair). Each event
    is valid JSON; the pair is whole only once the deltas are joined."""
    calls = _calls(protocol, payloads)
    if not calls:
        return []
    call = calls[0]
    text = _joined(protocol, payloads, call)
    if not text.endswith("}"):
        return []
    head = text[:-1] + ',"memo":"\ud83d'
    rewritten = _rewrite(protocol, copy.deepcopy(payloads), call, [head, '\ude00"}'])
    return [Variant("the pair \\ud83d \\ude00 split between two events", tuple(rewritten))]


def _ends_early(protocol: str, payloads: Payloads) -> list[Variant]:
    """The stream ends without its closing events: after its last delta and after each
    payload from there to the end (each closing event missing in turn, the last one alone
    included), cleanly (EOF) and as a dropped connection."""
    out: list[Variant] = []
    last_delta = max(_deltas(protocol, payloads), default=len(payloads) - 2)
    for cut in range(last_delta + 1, len(payloads)):
        if 0 < cut < len(payloads):
            for clean in (True, False):
                how = "the body ends" if clean else "the connection drops"
                out.append(Variant(f"{how} after payload {cut - 1} of {len(payloads)}", tuple(payloads[:cut]), clean))
    return out


# --------------------------------------------------------------------------------------
# Chat Completions
# --------------------------------------------------------------------------------------


def _choice(p: Payload) -> dict[str, Any] | None:
    choices = p.get("choices") or []
    return choices[0] if choices and isinstance(choices[0], dict) else None


def _finish_index(payloads: Payloads) -> int | None:
    for i, p in enumerate(payloads):
        choice = _choice(p)
        if choice is not None and choice.get("finish_reason"):
            return i
    return None


def _chunk(payloads: Payloads, delta: dict[str, Any], finish: str | None = None) -> Payload:
    rid = next((p.get("id") for p in payloads if p.get("id")), "r1")
    return {
        "id": rid,
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _tool_chunks(payloads: Payloads) -> list[int]:
    return [i for i, p in enumerate(payloads) if _chat_entry(p) is not None]


def _chat_finish_early(protocol: str, payloads: Payloads) -> list[Variant]:
    end = _finish_index(payloads)
    chunks = _tool_chunks(payloads)
    if end is None or len(chunks) < 2:
        return []
    reason = _choice(payloads[end])["finish_reason"]  # type: ignore[index]
    out: list[Variant] = []
    for before in chunks[1:][-2:]:
        copied = copy.deepcopy(payloads)
        moved = copied.pop(end)
        copied.insert(before, moved)
        out.append(Variant(f"finish_reason {reason!r} before tool chunk {before}", tuple(copied)))
    return out


def _chat_finish_every(protocol: str, payloads: Payloads) -> list[Variant]:
    end = _finish_index(payloads)
    if end is None:
        return []
    reason = _choice(payloads[end])["finish_reason"]  # type: ignore[index]
    copied = copy.deepcopy(payloads)
    for p in copied:
        choice = _choice(p)
        if choice is not None:
            choice["finish_reason"] = reason
    return [Variant(f"finish_reason {reason!r} on every chunk", tuple(copied))]


def _chat_finish_twice(protocol: str, payloads: Payloads) -> list[Variant]:
    end = _finish_index(payloads)
    if end is None:
        return []
    reason = _choice(payloads[end])["finish_reason"]  # type: ignore[index]
    out: list[Variant] = []
    for second in ("length", "tool_calls", "content_filter"):
        if second != reason:
            copied = copy.deepcopy(payloads)
            copied.insert(end + 1, _chunk(copied, {}, second))
            out.append(Variant(f"finish_reason {reason!r}, then {second!r}", tuple(copied)))
    return out


def _chat_content_null(protocol: str, payloads: Payloads) -> list[Variant]:
    chunks = _tool_chunks(payloads)
    if not chunks:
        return []
    copied = copy.deepcopy(payloads)
    for i in reversed(chunks):
        copied.insert(i + 1, _chunk(copied, {"content": None, "tool_calls": None}))
        copied.insert(i + 1, _chunk(copied, {"content": None}))
    return [Variant("content: null chunks between the tool-call chunks", tuple(copied))]


def _chat_role(protocol: str, payloads: Payloads) -> list[Variant]:
    """The stream without the assistant's role, or with ``role: ""`` where it was: what some
    OpenAI-compatible servers and gateways send (a keep-alive or translated first chunk)."""
    places = [i for i, p in enumerate(payloads) if "role" in ((_choice(p) or {}).get("delta") or {})]
    if not places:
        return []
    missing, empty = copy.deepcopy(payloads), copy.deepcopy(payloads)
    for i in places:
        del missing[i]["choices"][0]["delta"]["role"]
        empty[i]["choices"][0]["delta"]["role"] = ""
    return [
        Variant("no role in any delta", tuple(missing)),
        Variant('role "" in the first delta', tuple(empty)),
    ]


def _chat_name_later(protocol: str, payloads: Payloads) -> list[Variant]:
    out: list[Variant] = []
    for field in ("name", "id"):
        copied = copy.deepcopy(payloads)
        changed = False
        for i in reversed(_tool_chunks(copied)):
            entry = _chat_entry(copied[i])
            assert entry is not None
            function = entry.get("function") or {}
            if not function.get("name"):
                continue
            later_function: dict[str, Any] = {"arguments": ""}
            later: dict[str, Any] = {"index": entry.get("index"), "function": later_function}
            if field == "name":
                later_function["name"] = function.pop("name")
            else:
                later["id"] = entry.pop("id")
            copied.insert(i + 1, _chunk(copied, {"tool_calls": [later]}))
            changed = True
        if changed:
            out.append(Variant(f"each call's {field} in a later chunk than its first", tuple(copied)))
    return out


def _chat_arguments_first(protocol: str, payloads: Payloads) -> list[Variant]:
    chunks = _tool_chunks(payloads)
    for n, i in enumerate(chunks):
        entry = _chat_entry(payloads[i])
        if entry and (entry.get("function") or {}).get("name") and n + 1 < len(chunks):
            j = chunks[n + 1]
            if _delta_slot(CHAT, payloads[j]) is not None:
                copied = copy.deepcopy(payloads)
                copied[i], copied[j] = copied[j], copied[i]
                return [Variant("a call's first arguments before the chunk with its id and name", tuple(copied))]
    return []


def _chat_indexes(protocol: str, payloads: Payloads) -> list[Variant]:
    indexes = sorted({e.get("index") for p in payloads if (e := _chat_entry(p)) is not None}, key=str)
    out: list[Variant] = []
    for label, remap in (
        ("sparse indexes (0, 2, 5, ...)", {old: 0 if n == 0 else n * (n + 3) // 2 for n, old in enumerate(indexes)}),
        ("indexes starting at 1", {old: n + 1 for n, old in enumerate(indexes)}),
        ("every call reuses index 0", dict.fromkeys(indexes, 0)),
    ):
        if all(k == v for k, v in remap.items()):
            continue
        copied = copy.deepcopy(payloads)
        for p in copied:
            entry = _chat_entry(p)
            if entry is not None:
                entry["index"] = remap[entry.get("index")]
        out.append(Variant(label, tuple(copied)))
    return out


def _chat_repeated_id_name(protocol: str, payloads: Payloads) -> list[Variant]:
    copied = copy.deepcopy(payloads)
    named: dict[Any, tuple[Any, Any]] = {}
    changed = False
    for p in copied:
        entry = _chat_entry(p)
        if entry is None:
            continue
        function = entry.setdefault("function", {})
        if function.get("name"):
            named[entry.get("index")] = (entry.get("id"), function["name"])
        elif entry.get("index") in named:
            entry["id"], function["name"] = named[entry.get("index")]
            entry.setdefault("type", "function")
            changed = True
    return [Variant("the id and name repeated on every chunk of a call", tuple(copied))] if changed else []


def _chat_missing_index(protocol: str, payloads: Payloads) -> list[Variant]:
    copied = copy.deepcopy(payloads)
    if len({e.get("index") for p in copied if (e := _chat_entry(p)) is not None}) != 1:
        return []  # without an index, a call is its entry's place in the list: one call only
    for p in copied:
        entry = _chat_entry(p)
        if entry is not None:
            entry.pop("index", None)
    return [Variant("tool-call deltas without index (Mistral)", tuple(copied))]


def _chat_created(protocol: str, payloads: Payloads) -> list[Variant]:
    copied = copy.deepcopy(payloads)
    chunks = [p for p in copied if _choice(p) is not None]
    if len(chunks) < 2:
        return []
    for n, p in enumerate(chunks):
        p["created"] = 1_700_000_000 + len(chunks) - n  # each chunk says it is older than the one before
    return [Variant("chunk created times decreasing in arrival order", tuple(copied))]


# --------------------------------------------------------------------------------------
# Responses
# --------------------------------------------------------------------------------------


def _of_type(payloads: Payloads, kind: str) -> list[int]:
    return [i for i, p in enumerate(payloads) if p.get("type") == kind]


def _resp_only_in_done(protocol: str, payloads: Payloads) -> list[Variant]:
    deltas = set(_deltas(protocol, payloads))
    if not deltas:
        return []
    no_deltas = [p for i, p in enumerate(payloads) if i not in deltas]
    no_done = [p for p in no_deltas if p.get("type") != "response.function_call_arguments.done"]
    return [
        Variant(
            "no deltas: the arguments only in arguments.done and output_item.done",
            tuple(_renumber(protocol, copy.deepcopy(no_deltas))),
        ),
        Variant(
            "no deltas, no arguments.done: the arguments only in output_item.done",
            tuple(_renumber(protocol, copy.deepcopy(no_done))),
        ),
    ]


def _resp_done_disagrees(protocol: str, payloads: Payloads) -> list[Variant]:
    out: list[Variant] = []
    for kind in ("response.function_call_arguments.done", "response.output_item.done"):
        for i in _of_type(payloads, kind)[:1]:
            copied = copy.deepcopy(payloads)
            body = copied[i] if kind.endswith("arguments.done") else copied[i].get("item") or {}
            if isinstance(body.get("arguments"), str):
                body["arguments"] = '{"amount":999}'
                out.append(Variant(f"{kind} carries other arguments than the deltas", tuple(copied)))
    return out


def _resp_duplicate_index(protocol: str, payloads: Payloads) -> list[Variant]:
    added = _of_type(payloads, "response.output_item.added")
    if len(added) < 2:
        return []
    first, second = payloads[added[0]], payloads[added[1]]
    out: list[Variant] = []
    copied = copy.deepcopy(payloads)
    index = second.get("output_index")
    for p in copied:
        if p.get("output_index") == index:
            p["output_index"] = first.get("output_index")
    out.append(Variant("the second item reuses the first item's output_index", tuple(copied)))
    copied = copy.deepcopy(payloads)
    old, new = (second.get("item") or {}).get("id"), (first.get("item") or {}).get("id")
    for p in copied:
        if p.get("item_id") == old:
            p["item_id"] = new
        for item in [p.get("item"), *((p.get("response") or {}).get("output") or [])]:
            if isinstance(item, dict) and item.get("id") == old:
                item["id"] = new
    out.append(Variant("the second item reuses the first item's id", tuple(copied)))
    return out


def _resp_replayed(protocol: str, payloads: Payloads) -> list[Variant]:
    out: list[Variant] = []
    for kind in (
        "response.created",
        "response.output_item.added",
        "response.function_call_arguments.done",
        "response.output_item.done",
    ):
        for i in _of_type(payloads, kind)[:1]:
            copied = copy.deepcopy(payloads)
            copied.insert(i + 1, copy.deepcopy(copied[i]))
            out.append(Variant(f"{kind} replayed (same sequence_number)", tuple(copied)))
    return out


def _resp_after_done(protocol: str, payloads: Payloads) -> list[Variant]:
    deltas = _deltas(protocol, payloads)
    out: list[Variant] = []
    for kind in ("response.output_item.done", "response.completed"):
        places = _of_type(payloads, kind)
        if deltas and places:
            copied = copy.deepcopy(payloads)
            late = copy.deepcopy(copied[deltas[0]])
            _set_text(protocol, late, "0")
            copied.insert(places[0] + 1, late)
            out.append(Variant(f"a delta after {kind}", tuple(_renumber(protocol, copied))))
    return out


def _resp_sequence(protocol: str, payloads: Payloads) -> list[Variant]:
    deltas = _deltas(protocol, payloads)
    if len(deltas) < 2:
        return []
    copied = copy.deepcopy(payloads)
    a, b = deltas[0], deltas[1]
    copied[a]["sequence_number"], copied[b]["sequence_number"] = (
        copied[b].get("sequence_number"),
        copied[a].get("sequence_number"),
    )
    swapped = copy.deepcopy(payloads)
    swapped[a], swapped[b] = swapped[b], swapped[a]
    return [
        Variant("two deltas' sequence numbers swapped (arrival order kept)", tuple(copied)),
        Variant("two deltas arrive swapped (sequence numbers kept)", tuple(swapped)),
    ]


# --------------------------------------------------------------------------------------
# Anthropic Messages
# --------------------------------------------------------------------------------------


def _an_replayed(protocol: str, payloads: Payloads) -> list[Variant]:
    out: list[Variant] = []
    for kind in ("message_start", "content_block_start", "content_block_stop"):
        for i in _of_type(payloads, kind)[:1]:
            copied = copy.deepcopy(payloads)
            copied.insert(i + 1, copy.deepcopy(copied[i]))
            out.append(Variant(f"{kind} replayed", tuple(copied)))
    starts = _of_type(payloads, "content_block_start")
    deltas = _deltas(protocol, payloads)
    if starts and deltas:
        copied = copy.deepcopy(payloads)
        copied.insert(deltas[-1] + 1, copy.deepcopy(copied[starts[0]]))
        out.append(Variant("content_block_start replayed after the block's deltas", tuple(copied)))
        copied = copy.deepcopy(payloads)
        second = copy.deepcopy(copied[0])
        second["message"]["id"] = str(second["message"].get("id")) + "-2"
        copied.insert(deltas[0] + 1, second)
        out.append(Variant("a second message_start (another id) inside the open message", tuple(copied)))
    return out


def _an_after_stop(protocol: str, payloads: Payloads) -> list[Variant]:
    deltas = _deltas(protocol, payloads)
    out: list[Variant] = []
    if not deltas:
        return out
    for kind in ("content_block_stop", "message_delta", "message_stop"):
        places = _of_type(payloads, kind)
        if places:
            copied = copy.deepcopy(payloads)
            late = copy.deepcopy(copied[deltas[0]])
            _set_text(protocol, late, "0")
            copied.insert(places[0] + 1, late)
            out.append(Variant(f"a delta after {kind}", tuple(copied)))
    return out


def _an_reused_index(protocol: str, payloads: Payloads) -> list[Variant]:
    """A second tool_use block started at the content block index of the first, with its own
    id: the index names two blocks (after the first stopped, and while it is still open)."""
    starts = [
        i
        for i in _of_type(payloads, "content_block_start")
        if (payloads[i].get("content_block") or {}).get("type") == "tool_use"
    ]
    if len(starts) < 2:
        return []
    first, second = payloads[starts[0]].get("index"), payloads[starts[1]].get("index")
    copied = copy.deepcopy(payloads)
    for q in copied:
        if q.get("type") in ("content_block_start", "content_block_delta", "content_block_stop") and (
            q.get("index") == second
        ):
            q["index"] = first
    return [Variant(f"the second tool_use block (a new id) at the first one's index {first}", tuple(copied))]


def _late_call(protocol: str, payloads: Payloads) -> Payloads:
    """A copy of the first call's own payloads as a new call (a new id, the next free index,
    its arguments '{"amount":5}' in one delta), as a server writes one; [] when the stream
    has no call to copy."""
    calls = _calls(protocol, payloads)
    if not calls:
        return []
    call = calls[0]
    if protocol == CHAT:
        entries = [q for q in payloads if (e := _chat_entry(q)) is not None and str(e.get("index")) == call]
        indexes = {e.get("index") for q in payloads if (e := _chat_entry(q)) is not None}
        index = max((i for i in indexes if isinstance(i, int)), default=0) + 1
        named = [q for q in entries if ((_chat_entry(q) or {}).get("function") or {}).get("name")]
        if not named:
            return []
        late = copy.deepcopy(named[0])
        entry = _chat_entry(late)
        assert entry is not None
        entry["index"], entry["id"] = index, f"{entry.get('id')}-late"
        entry["function"]["arguments"] = '{"amount":5}'
        return [late]
    if protocol == ANTHROPIC:
        blocks = [q for q in payloads if q.get("type", "").startswith("content_block_") and str(q.get("index")) == call]
        index = max((int(q["index"]) for q in payloads if isinstance(q.get("index"), int)), default=0) + 1
        out: Payloads = []
        for q in blocks:
            if q.get("type") == "content_block_delta" and out and out[-1].get("type") == "content_block_delta":
                continue
            late = copy.deepcopy(q)
            late["index"] = index
            if late.get("type") == "content_block_start":
                late["content_block"]["id"] = f"{late['content_block'].get('id')}-late"
            if late.get("type") == "content_block_delta":
                late["delta"]["partial_json"] = '{"amount":5}'
            out.append(late)
        return out
    if protocol == RESPONSES:
        mine = [q for q in payloads if str(q.get("item_id")) == call or str((q.get("item") or {}).get("id")) == call]
        index = max((int(q["output_index"]) for q in payloads if isinstance(q.get("output_index"), int)), default=0) + 1
        out = []
        for q in mine:
            kind = q.get("type")
            if kind == "response.function_call_arguments.delta" and any(o.get("type") == kind for o in out):
                continue
            late = copy.deepcopy(q)
            late["output_index"] = index
            if "item_id" in late:
                late["item_id"] = f"{call}-late"
            item = late.get("item")
            if isinstance(item, dict):
                item["id"], item["call_id"] = f"{call}-late", f"{item.get('call_id')}-late"
                if "arguments" in item and item.get("status") == "completed":
                    item["arguments"] = '{"amount":5}'
            if kind == "response.function_call_arguments.delta":
                late["delta"] = '{"amount":5}'
            if kind == "response.function_call_arguments.done":
                late["arguments"] = '{"amount":5}'
            out.append(late)
        return out
    return []


def _after_final_stop(protocol: str, payloads: Payloads) -> list[Variant]:
    """Data after the stream's final stop event (Chat: the chunk with the finish reason;
    Responses: response.completed / incomplete / failed; Anthropic: message_stop): a late
    delta for the first call, and a whole new call. What a library hands out once the body
    ended must not have them."""
    deltas = _deltas(protocol, payloads)
    if not deltas:
        return []
    if protocol == CHAT:
        final = _finish_index(payloads)
    elif protocol == RESPONSES:
        ends = [i for i, q in enumerate(payloads) if q.get("type") in _RESPONSE_ENDS]
        final = ends[-1] if ends else None
    else:
        stops = _of_type(payloads, "message_stop")
        final = stops[-1] if stops else None
    if final is None:
        return []
    out: list[Variant] = []
    late = copy.deepcopy(payloads[deltas[0]])
    _set_text(protocol, late, "0")
    copied = copy.deepcopy(payloads)
    copied.insert(final + 1, late)
    out.append(Variant("a delta after the final stop event", tuple(_renumber_tail(protocol, copied, final + 1))))
    extra = _late_call(protocol, payloads)
    if extra:
        copied = copy.deepcopy(payloads)
        copied[final + 1 : final + 1] = extra
        out.append(Variant("a new call after the final stop event", tuple(_renumber_tail(protocol, copied, final + 1))))
    return out


_RESPONSE_ENDS: Final = frozenset({"response.completed", "response.incomplete", "response.failed"})


def _renumber_tail(protocol: str, payloads: Payloads, start: int) -> Payloads:
    """Responses: the payloads from ``start`` on numbered after every sequence number before
    them (what follows the end is new events, not replays)."""
    if protocol == RESPONSES:
        seqs = [q["sequence_number"] for q in payloads[:start] if isinstance(q.get("sequence_number"), int)]
        n = max(seqs, default=-1) + 1
        for q in payloads[start:]:
            if "sequence_number" in q:
                q["sequence_number"] = n
                n += 1
    return payloads


BEDROCK: Final = "bedrock-converse"


def _bedrock_blocks(payloads: Payloads, key: str) -> list[int]:
    return [i for i, p in enumerate(payloads) if key in p]


def _bedrock_tool_blocks(payloads: Payloads) -> list[int]:
    """The content block indexes that a ``contentBlockStart`` opened as tool-use blocks."""
    return [
        int(p["contentBlockStart"]["contentBlockIndex"])
        for p in payloads
        if "contentBlockStart" in p and "toolUse" in (p["contentBlockStart"].get("start") or {})
    ]


def _bedrock_no_block_stop(protocol: str, payloads: Payloads) -> list[Variant]:
    """A tool-use block whose ``contentBlockStop`` never comes, the message still stopping
    normally after it (opencode #44630, bifrost #4262: a gateway or client that drops it)."""
    out: list[Variant] = []
    for index in _bedrock_tool_blocks(payloads):
        stops = [
            i
            for i in _bedrock_blocks(payloads, "contentBlockStop")
            if payloads[i]["contentBlockStop"].get("contentBlockIndex") == index
        ]
        if stops:
            copied = copy.deepcopy(payloads)
            del copied[stops[0]]
            out.append(Variant(f"no contentBlockStop for tool block {index}", tuple(copied)))
    return out


def _bedrock_text_without_start(protocol: str, payloads: Payloads) -> list[Variant]:
    """Text deltas at a block index of their own, with no ``contentBlockStart`` (Bedrock
    sends none for text), right after a tool-use block stopped: a client that keys blocks by
    their start, or takes the text as the tool block's, loses or corrupts the call."""
    tools = _bedrock_tool_blocks(payloads)
    stops = _bedrock_blocks(payloads, "contentBlockStop")
    if not tools or not stops:
        return []
    used = {
        int(p[k]["contentBlockIndex"])
        for p in payloads
        for k in p
        if isinstance(p[k], dict) and "contentBlockIndex" in p[k]
    }
    index = max(used) + 1
    copied = copy.deepcopy(payloads)
    at = stops[0] + 1
    copied[at:at] = [
        {"contentBlockDelta": {"contentBlockIndex": index, "delta": {"text": "Done"}}},
        {"contentBlockStop": {"contentBlockIndex": index}},
    ]
    return [Variant(f"text block {index} with no contentBlockStart after a tool block", tuple(copied))]


def _live_tool_calls(payloads: Payloads) -> list[int]:
    """The indexes of Gemini Live ``toolCall`` messages."""
    return [i for i, p in enumerate(payloads) if isinstance(p.get("toolCall"), dict)]


def _live_call_repeated(protocol: str, payloads: Payloads) -> list[Variant]:
    """A ``toolCall`` message sent again right after itself, the same ids and arguments
    (mastra #22969: a Live call dispatched from two frames, every tool ran twice)."""
    calls = _live_tool_calls(payloads)
    if not calls:
        return []
    copied = copy.deepcopy(payloads)
    copied.insert(calls[0] + 1, copy.deepcopy(payloads[calls[0]]))
    return [Variant("the first toolCall message twice", tuple(copied))]


def _live_cancelled(protocol: str, payloads: Payloads) -> list[Variant]:
    """The user speaks over the model after a call was issued: ``toolCallCancellation``
    names the calls issued so far, and the turn ends ``interrupted`` instead of completing
    (the Live API's toolCallCancellation; livekit/agents #3702, a refund committed after
    "stop"). A call that already ran stays run; one not dispatched yet must never run."""
    calls = _live_tool_calls(payloads)
    if not calls:
        return []
    ids = [c.get("id") for c in payloads[calls[0]]["toolCall"].get("functionCalls", []) if isinstance(c, dict)]
    head = copy.deepcopy(payloads[: calls[0] + 1])
    tail: Payloads = [{"toolCallCancellation": {"ids": ids}}, {"serverContent": {"interrupted": True}}]
    return [Variant("toolCallCancellation after the first toolCall, then interrupted", (*head, *tail))]


def _live_empty_id(protocol: str, payloads: Payloads) -> list[Variant]:
    """A function call with an empty ``id`` (pipecat #4987: an empty tool_call_id; a tool
    response is matched to its call by id, so nobody can answer it)."""
    calls = _live_tool_calls(payloads)
    if not calls:
        return []
    copied = copy.deepcopy(payloads)
    for call in copied[calls[0]]["toolCall"].get("functionCalls", []):
        call["id"] = ""
    return [Variant("the first toolCall's id empty", tuple(copied))]


# --------------------------------------------------------------------------------------
# The catalog
# --------------------------------------------------------------------------------------

_ANY = _DELTA_PROTOCOLS | {"gemini"}  # Gemini sends whole arguments: only the stream-level operators apply
_C, _R, _A = frozenset({CHAT}), frozenset({RESPONSES}), frozenset({ANTHROPIC})
_B = frozenset({BEDROCK})
_L = frozenset({"gemini-live"})

OPERATORS: Final[tuple[Operator, ...]] = (
    Operator(
        "duplicated-delta",
        "new-api #6278 (duplicates at response.completed); README: a duplicated fragment turns amount:100 into 1000",
        _ANY,
        _duplicated,
    ),
    Operator(
        "dropped-delta",
        "a lost delta: Responses' sequence_number documents the order that reveals it; issue 18",
        _ANY,
        _dropped,
    ),
    Operator(
        "cumulative-snapshots",
        "vercel/ai #12052 / PR #15888 (a provider sends cumulative argument snapshots)",
        _ANY,
        _cumulative,
    ),
    Operator(
        "repeated-legitimate-delta",
        "eliza #17123, chatlas #435 (de-duplicating legitimate repeated deltas)",
        _ANY,
        _one_character,
    ),
    Operator(
        "escapes-in-deltas",
        "anthropic-sdk-typescript #996, PRs #1006/#1007 (invalid escape, lone surrogate in partial_json)",
        _ANY,
        _escapes,
    ),
    Operator(
        "ends-without-closing-events",
        "issue 18 (streams that simply end); litellm / pydantic-ai: no finish_reason taken as stop",
        _ANY,
        _ends_early,
    ),
    Operator(
        "surrogate-pair-split-across-events",
        "issue 30 (a character's UTF-16 pair split between two stream events, each event's JSON holding one "
        "escape of the pair: the reference refuses it as lone surrogates, a client that joins the escapes reads "
        "the character); RFC 8259 section 8.2",
        _C | _R | _A,
        _surrogate_split,
    ),
    Operator(
        "data-after-final-stop",
        "issue 30 (a delta after message_stop changes what get_final_message() returns); issue 18 (a late delta "
        "still changes what was already handed out)",
        _C | _R | _A,
        _after_final_stop,
    ),
    Operator(
        "finish-reason-before-trailing-fragments",
        "claux #43 (finish_reason before trailing tool-call fragments)",
        _C,
        _chat_finish_early,
    ),
    Operator("finish-reason-on-every-chunk", "jcode #1326 (finish_reason after every chunk)", _C, _chat_finish_every),
    Operator(
        "finish-reason-twice", "issue 18 (after finish_reason: length, a later tool_calls won)", _C, _chat_finish_twice
    ),
    Operator(
        "content-null-chunks", "goose #6312 (content: null chunks between tool-call chunks)", _C, _chat_content_null
    ),
    Operator(
        "role-missing-or-empty",
        'langchainjs #11157 (no role before the tool-call deltas) and #11468 (role ""), omlx #2074 / PR #2117 '
        "(a keep-alive first chunk without a role): a client that types the message from its first chunk drops "
        "every tool call",
        _C,
        _chat_role,
    ),
    Operator(
        "name-or-id-later",
        "vercel/ai #14722 / PR #14725, Zoo-Code #695 (the name arrives in a later fragment)",
        _C,
        _chat_name_later,
    ),
    Operator(
        "arguments-before-id",
        "vercel/ai #14722 (a fragment for a call not yet named); OpenAI: the first tool-call delta carries id and name",
        _C,
        _chat_arguments_first,
    ),
    Operator(
        "sparse-and-reused-indexes",
        "google-adk lite_llm.py (index 0 is falsy), new-api #6278 (indices [0, 0, 1]), openai-node #771",
        _C,
        _chat_indexes,
    ),
    Operator(
        "repeated-id-and-name",
        "Alibaba/Qwen and others repeat id and name on every chunk; llama-index #22580, autogen #6193 (id +=, name +=)",
        _C,
        _chat_repeated_id_name,
    ),
    Operator(
        "missing-index",
        "Mistral sends tool-call deltas without index; openai-node #771 / PR #1031 (an accumulator that ignored it)",
        _C,
        _chat_missing_index,
    ),
    Operator(
        "created-out-of-order", "issue 18 (a library that re-sorts chunks by their created time)", _C, _chat_created
    ),
    Operator(
        "arguments-only-in-done",
        "pi #917, forgecode #2558, OpenRouter provider #336 (arguments only in arguments.done / the done item)",
        _R,
        _resp_only_in_done,
    ),
    Operator(
        "done-disagrees-with-deltas",
        "OpenAI Responses: arguments.done carries the final arguments; pi #917 (done differs from the deltas)",
        _R,
        _resp_done_disagrees,
    ),
    Operator(
        "duplicated-output-index-or-item-id",
        "new-api #6278 (indices [0, 0, 1] at response.completed); issue 18",
        _R,
        _resp_duplicate_index,
    ),
    Operator(
        "replayed-responses-events",
        "openai-python passes a replayed arguments.done on again (openai_responses_replayed_done.py)",
        _R,
        _resp_replayed,
    ),
    Operator(
        "delta-after-item-done",
        "issue 18 (a late delta that still changes what was already handed out)",
        _R,
        _resp_after_done,
    ),
    Operator(
        "sequence-numbers-out-of-order",
        "OpenAI Responses: sequence_number orders the events; issue 18",
        _R,
        _resp_sequence,
    ),
    Operator(
        "replayed-block-or-message-start",
        "issue 18 (a replayed content_block_start yields a phantom {} call); anthropic_second_message_start.py",
        _A,
        _an_replayed,
    ),
    Operator(
        "delta-after-block-or-message-stop",
        "issue 18 (a late delta still changes the message message_stop already handed out)",
        _A,
        _an_after_stop,
    ),
    Operator(
        "reused-block-index-new-id",
        "issue 30 (a second Anthropic tool_use block at a reused content block index with a new id; the Chat "
        "Completions index reused by a new id is sparse-and-reused-indexes' 'every call reuses index 0')",
        _A,
        _an_reused_index,
    ),
    Operator(
        "bedrock-missing-block-stop",
        "opencode #44630, bifrost #4262 (contentBlockStop dropped by a gateway; the call must not run unfinished)",
        _B,
        _bedrock_no_block_stop,
    ),
    Operator(
        "bedrock-text-without-block-start",
        "AWS ConverseStream: text blocks have no contentBlockStart; strands harness-sdk #2051, langchain-aws #843",
        _B,
        _bedrock_text_without_start,
    ),
    Operator(
        "live-call-repeated",
        "mastra #22969 (a Gemini Live call dispatched from two frames: every tool ran twice)",
        _L,
        _live_call_repeated,
    ),
    Operator(
        "live-cancelled-after-call",
        "Gemini Live API toolCallCancellation ('should have been not executed'); livekit/agents #3702 (orders "
        "placed twice after an interruption); a Gemini Live forum thread (a refund committed after 'stop')",
        _L,
        _live_cancelled,
    ),
    Operator(
        "live-empty-call-id",
        "pipecat #4987 (an empty tool_call_id; a Live tool response is matched to its call by id)",
        _L,
        _live_empty_id,
    ),
)


def operators_for(protocol: str) -> list[Operator]:
    """The payload operators that apply to ``protocol``."""
    return [op for op in OPERATORS if protocol in op.protocols]


# --------------------------------------------------------------------------------------
# SSE framing
# --------------------------------------------------------------------------------------


def _every_boundary(data: bytes) -> Iterator[list[bytes]]:
    for cut in range(1, len(data)):
        yield [data[:cut], data[cut:]]


def _keepalive(data: bytes) -> Iterator[list[bytes]]:
    events = data.split(b"\n\n")
    yield [b": keep-alive\n\n" + b"\n\n: ping\n\n".join(events)]


def _crlf(data: bytes) -> Iterator[list[bytes]]:
    crlf = data.replace(b"\n", b"\r\n")
    yield [crlf]
    yield [crlf[k : k + 1] for k in range(len(crlf))]


SSE_OPERATORS: Final[tuple[SseOperator, ...]] = (
    SseOperator(
        "sse-cut-at-every-byte",
        "WHATWG SSE: a client must reassemble events split anywhere by the transport",
        _every_boundary,
    ),
    SseOperator(
        "sse-keep-alive-comments",
        "WHATWG SSE comments (':' lines); OpenRouter and Anthropic send ': ping' keep-alives",
        _keepalive,
    ),
    SseOperator("sse-crlf", "WHATWG SSE: CRLF, LF and CR all end a line; CRLF delivered one byte at a time", _crlf),
)


def sse_bytes(protocol: str, payloads: Sequence[Mapping[str, Any]], clean: bool = True) -> bytes:
    """The SSE body for ``payloads`` (with the protocol's ``[DONE]`` when it ends cleanly)."""
    spec = registry.get(protocol)
    return encode_payloads(list(payloads), spec.event_name, done=spec.done_sentinel and clean)
