"""Where the protocol's documentation is silent, every defensible reading of a stream is
allowed (``callsafe.providers.readings``, ``callsafe.certify.wire_readings``): a library that
assembles by index where callsafe's parser refuses is judged under its reading, and what no
reading allows (a second execution, other arguments, a phantom call, a run on a stop) is
still a violation.

The targets are small in-process stand-ins for libraries (no capability, like the library
adapters): the reference implementation behind a reading's parser is a correct
implementation of that reading; wrapped so that it runs a call twice or with other
arguments, it is a wrong one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from wire_targets import ParsedReference

from callsafe.certify.checking import run_checked
from callsafe.certify.wire_adversities import adversity_traces
from callsafe.contract.target import TargetEnv
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import CallKey, Event
from callsafe.providers.adversities import WireTrace
from callsafe.providers.base import ProviderError
from callsafe.providers.readings import READINGS, WireReading, differing_readings, read_under, readings_for
from callsafe.providers.streams import parse_payloads

NONE: frozenset[str] = frozenset()

# (reading, operator, a phrase of the variant's label): the shapes callsafe's parser refuses
# (or, for the done events, reads as a failed call) that each reading reads otherwise
CASES = (
    ("the done events' arguments are final", "duplicated-delta", "sent twice"),
    ("the done events' arguments are final", "dropped-delta", "dropped"),
    ("index-keyed assembly", "arguments-before-id", "first arguments before the chunk with its id and name"),
    ("items keyed by item_id", "duplicated-output-index-or-item-id", "reuses the first item's output_index"),
    ("items keyed by output_index", "duplicated-output-index-or-item-id", "reuses the first item's id"),
    ("replays by sequence_number", "replayed-responses-events", "response.created replayed"),
    ("a replayed start is the same message or block", "replayed-block-or-message-start", "message_start replayed"),
    ("a replayed start is the same message or block", "replayed-block-or-message-start", "content_block_start"),
)
_BY_NAME = {r.name: r for r in READINGS}


def _traces(reading: WireReading, operator: str, phrase: str) -> list[WireTrace]:
    out = [t for t in adversity_traces((reading.protocol,), sse=False) if t.operator == operator and phrase in t.name]
    assert out, (reading.name, operator, phrase)
    return out


def _refused(trace: WireTrace) -> bool:
    return parse_payloads(trace.protocol, trace.payloads, turn="t1", response="r1", clean=trace.clean).error is not None


class ReadingReference(ParsedReference):
    """The reference implementation reading the wire through ``reading``'s parser: an
    implementation that assembles as the reading does, correct in every other way."""

    def __init__(self, reading: WireReading) -> None:
        super().__init__(reading.protocol, NONE)
        self.reading = reading
        self.name = f"reading-reference:{reading.name}"

    def receive_wire(self, payload: Mapping[str, Any]) -> None:
        if self.parser is None:
            self.parser = self.reading.parser(self.turn, "r1")  # type: ignore[assignment]
        assert self.parser is not None
        try:
            events = self.parser.feed(dict(payload))
        except ProviderError:
            events = []
        for parsed in events:
            self.inner.receive(parsed)


class Twice(ReadingReference):
    """Runs every call its reading runs, twice."""

    def start(self, env: TargetEnv) -> None:
        run = env.executor

        def twice(key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None = None) -> None:
            run(key, actor, tool, arguments, traceparent)
            run(key, actor, tool, arguments, traceparent)

        super().start(_with_executor(env, twice))


class OtherArguments(ReadingReference):
    """Runs every call its reading runs, with a prefix of its arguments instead."""

    def start(self, env: TargetEnv) -> None:
        run = env.executor

        def prefix(key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None = None) -> None:
            run(key, actor, tool, {"amount": 1}, traceparent)

        super().start(_with_executor(env, prefix))


def _with_executor(env: TargetEnv, executor: Any) -> TargetEnv:
    import dataclasses

    return dataclasses.replace(env, executor=executor)


class RunsAtEnd:
    """Runs one fixed call at the end of the body, whatever the stream said (a library
    that repairs a cut-off call, or merges a spliced message)."""

    capabilities = NONE

    def __init__(self, protocol: str, key: CallKey, arguments: Any) -> None:
        self.name, self.protocol, self.key, self.arguments = "runs-at-end", protocol, key, arguments
        self.env: TargetEnv | None = None

    def start(self, env: TargetEnv) -> None:
        self.env = env

    def receive(self, event: Event) -> None: ...

    def receive_wire(self, payload: Mapping[str, Any]) -> None: ...

    def end_stream(self) -> None:
        assert self.env is not None
        self.env.executor(self.key, "u1", "pay", self.arguments)

    def restart(self) -> None: ...

    def close(self) -> None: ...


@pytest.mark.parametrize(("reading", "operator", "phrase"), CASES)
def test_the_refused_shape_has_another_reading_that_runs_calls(reading: str, operator: str, phrase: str) -> None:
    """Each reading reads each stream of its shape without the parser's refusal, and on at
    least one of them its verdicts differ from callsafe's (a call that may run)."""
    chosen = _BY_NAME[reading]
    differs = 0
    for trace in _traces(chosen, operator, phrase):
        assert _refused(trace) == (reading != "the done events' arguments are final"), trace.name
        primary = [e for e in trace.events[1:]]
        found = dict(
            (r.name, events)
            for r, events in differing_readings(
                trace.protocol, trace.payloads, primary, turn="t1", response="r1", clean=trace.clean
            )
        )
        if reading not in found:
            assert not _refused(trace), trace.name  # every refused stream of the shape has the reading
            continue
        read = read_under(chosen, trace.payloads, turn="t1", response="r1", clean=trace.clean)
        assert read.error is None, (trace.name, read.error)
        verdicts = judge(trace.__class__(events=(trace.events[0], *read.events), tools=trace.tools)).verdicts
        differs += any(v.execute == "must" for v in verdicts.values())
    assert differs


@pytest.mark.parametrize(("reading", "operator", "phrase"), CASES)
def test_a_correct_implementation_of_the_reading_is_not_blamed(reading: str, operator: str, phrase: str) -> None:
    """The reference assembling as the reading does passes every stream of the shape, and
    the judgement names the reading where callsafe's own would have blamed it."""
    chosen = _BY_NAME[reading]
    named = 0
    for trace in _traces(chosen, operator, phrase):
        checked = run_checked(lambda: ReadingReference(chosen), NONE, trace)
        assert not checked.missing, (trace.name, checked.missing)
        assert not checked.violated, (trace.name, checked.explain())
        if checked.judgement.reading:
            assert checked.judgement.reading == f"{reading} ({operator})"
            assert checked.judgement.spared
            named += 1
    assert named, "no stream of the shape needed the reading"


@pytest.mark.parametrize(("reading", "operator", "phrase"), CASES)
def test_callsafes_own_refusal_is_not_blamed_either(reading: str, operator: str, phrase: str) -> None:
    protocol = _BY_NAME[reading].protocol
    for trace in _traces(_BY_NAME[reading], operator, phrase):
        checked = run_checked(lambda: ParsedReference(protocol, NONE), NONE, trace)
        assert not checked.violated and not checked.judgement.reading, (trace.name, checked.explain())


@pytest.mark.parametrize(("reading", "operator", "phrase"), CASES)
@pytest.mark.parametrize(("wrong", "invariant"), [(Twice, "INV-ONCE"), (OtherArguments, "INV-EXACT-ARGS")])
def test_what_no_reading_allows_is_still_a_violation(
    reading: str, operator: str, phrase: str, wrong: type[ReadingReference], invariant: str
) -> None:
    """Executing a call twice, or with arguments its fragments never made, is a violation
    under every reading: the judge passes no wrong implementation of a reading."""
    chosen = _BY_NAME[reading]
    caught = 0
    for trace in _traces(chosen, operator, phrase):
        checked = run_checked(lambda: wrong(chosen), NONE, trace)
        if checked.run is not None and any(getattr(o, "tool", None) for o in checked.run.observations):
            assert invariant in checked.violated, (trace.name, checked.explain())
            caught += 1
    assert caught


def test_a_spliced_message_and_a_stopped_call_have_no_reading_that_runs_them() -> None:
    """A second message_start with another id inside the open message is never the same
    message, and a call cut off by a stop reason never runs, under any reading."""
    anthropic = [t for t in adversity_traces(("anthropic-messages",), sse=False)]
    spliced = next(t for t in anthropic if "a second message_start (another id)" in t.name)
    key = CallKey("acme", "t1", "r1", "0", "call_a")
    checked = run_checked(lambda: RunsAtEnd("anthropic-messages", key, {"amount": 100}), NONE, spliced)
    assert checked.violated & {"INV-TERMINAL", "INV-CANCEL"}, checked.explain()
    chat = [t for t in adversity_traces(("openai-chat",), sse=False) if t.operator == "arguments-before-id"]
    stopped = next(t for t in chat if "stopped: length" in t.name)
    checked = run_checked(lambda: RunsAtEnd("openai-chat", key, {"amount": 10}), NONE, stopped)
    assert checked.violated, checked.explain()
    # the index-keyed reading of that stream is a call stopped by length: it must not run
    trace = stopped
    read = read_under(_BY_NAME["index-keyed assembly"], trace.payloads, turn="t1", response="r1")
    verdicts = judge(trace.__class__(events=(trace.events[0], *read.events), tools=trace.tools)).verdicts
    assert {v.execute for v in verdicts.values()} == {"must_not"}


def test_readings_are_per_protocol_and_change_no_verdict_on_streams_the_parser_reads() -> None:
    """On a stream the parser reads, a reading gives the same verdicts (it may drop a replay
    the parser reads as a repeat), except where the done events disagree with the deltas:
    there the parser fails the call and the done events' reading runs it. Only the
    protocols with a silent shape have readings."""
    assert {r.protocol for r in READINGS} == {"openai-chat", "openai-responses", "anthropic-messages"}
    assert readings_for("gemini") == ()
    for trace in adversity_traces(sse=False):
        if _refused(trace):
            continue
        want = {k: (v.execute, v.arguments) for k, v in judge(trace).verdicts.items()}
        for reading in readings_for(trace.protocol):
            read = read_under(reading, trace.payloads, turn="t1", response="r1", clean=trace.clean)
            alternative = trace.__class__(events=(trace.events[0], *read.events), tools=trace.tools)
            got = {k: (v.execute, v.arguments) for k, v in judge(alternative).verdicts.items()}
            if got == want:
                continue
            # a replay the parser reads as a repeated position is "may" (failing the call on a
            # repeat is allowed); a reading that drops the replay reads the call whole: "must"
            differ = {k for k in want if got.get(k) != want[k]}
            if all(want[k][0] == "may" and got.get(k) == ("must", want[k][1]) for k in differ):
                continue
            # the done events' arguments taken as final, or a call ended at its arguments' done
            # event in a body that ends before the item's own done event
            assert reading.name.startswith("the done events' arguments are final") or ENDS in reading.name, (
                reading.name,
                trace.name,
            )
            for key in {k for k in want if got.get(k) != want[k]}:
                assert want[key][0] in ("must_not", "may"), (trace.name, key)


class RunsEach(RunsAtEnd):
    """Runs each of several keys with the same arguments at the end of the body."""

    def __init__(self, protocol: str, keys: list[CallKey], arguments: Any) -> None:
        super().__init__(protocol, keys[0], arguments)
        self.keys = keys

    def end_stream(self) -> None:
        assert self.env is not None
        for key in self.keys:
            self.env.executor(key, "u1", "pay", self.arguments)


def test_a_call_named_by_its_id_is_the_call_of_that_id() -> None:
    """A library that keeps a call's id and not the wire's index (Mistral sends none; a
    rebuilt tool_calls list numbers from 0) ran the call of that id; run under two names,
    it is still a violation (a second run, or a key the stream never carried)."""
    chat = {t.name: t for t in adversity_traces(("openai-chat",), sse=False)}
    base = "base: wire: 1 call (whole); completed at the end"
    missing = chat[f"wire adversity missing-index (openai-chat): tool-call deltas without index (Mistral); {base}"]
    shifted = chat[f"wire adversity sparse-and-reused-indexes (openai-chat): indexes starting at 1; {base}"]
    for trace, item in ((missing, ""), (shifted, "0")):
        key = CallKey("acme", "t1", "r1", item, "call_a")
        checked = run_checked(lambda k=key: RunsAtEnd("openai-chat", k, {"amount": 100}), NONE, trace)  # type: ignore[misc]
        assert not checked.violated, (trace.name, checked.explain())
        assert checked.judgement.reading.startswith("calls named by their id"), checked.judgement.reading
    keys = [CallKey("acme", "t1", "r1", "1", "call_a"), CallKey("acme", "t1", "r1", "0", "call_a")]
    checked = run_checked(lambda: RunsEach("openai-chat", keys, {"amount": 100}), NONE, shifted)
    assert checked.violated & {"INV-ONCE", "INV-EXACT-ARGS"}, checked.explain()
    other = CallKey("acme", "t1", "r1", "0", "call_b")  # an id the stream never sent is never renamed
    checked = run_checked(lambda: RunsAtEnd("openai-chat", other, {"amount": 100}), NONE, shifted)
    assert "INV-EXACT-ARGS" in checked.violated, checked.explain()


def test_inspect_names_the_other_readings_of_a_refused_stream(tmp_path: Any) -> None:
    """``callsafe inspect`` on a stream callsafe's parser refuses says which defensible
    reading reads it otherwise and what that reading would run; on one it reads, none."""
    import json

    import jsonschema

    from callsafe.inspection.inspect import JSON_SCHEMA, inspect_recording
    from callsafe.inspection.recording import read_recording

    chat = [t for t in adversity_traces(("openai-chat",), sse=False) if t.operator == "arguments-before-id"]
    for trace, want in ((chat[0], [{"call": "t1/call_a", "execute": "must", "arguments": {"amount": 100}}]),):
        path = tmp_path / "stream.jsonl"
        path.write_text("\n".join(json.dumps(dict(p)) for p in trace.payloads) + "\n", encoding="utf-8")
        doc = inspect_recording(read_recording(path.read_bytes()), libraries=(), file=str(path)).to_json()
        jsonschema.validate(doc, JSON_SCHEMA)
        assert doc["stream"]["error"] is not None
        assert [(r["name"], r["runs"]) for r in doc["stream"]["readings"]] == [("index-keyed assembly", want)]
    plain = next(t for t in adversity_traces(("openai-chat",), sse=False) if t.operator == "content-null-chunks")
    path = tmp_path / "plain.jsonl"
    path.write_text("\n".join(json.dumps(dict(p)) for p in plain.payloads) + "\n", encoding="utf-8")
    assert (
        inspect_recording(read_recording(path.read_bytes()), libraries=(), file=str(path)).to_json()["stream"][
            "readings"
        ]
        == []
    )


ENDS = "the arguments' done event ends the call"


def test_a_call_run_at_its_arguments_done_event_is_judged_under_that_reading() -> None:
    """Issue 30: ``response.function_call_arguments.done`` is a terminal point a client may
    take (its arguments are final there). On rendered streams, where both done events come
    from one abstract terminal event, a run at the arguments' done event is judged where
    that reading ends the call; a run before it, or twice, is still a violation."""
    from wire_targets import Recorder

    from callsafe.campaigns.findings import WHOLE, _one, _two

    ends = _BY_NAME[ENDS]
    for trace in (_one(WHOLE), _one(WHOLE, "completed", None), _two(WHOLE, WHOLE, interleaved=True)):
        checked = run_checked(lambda: ReadingReference(ends), NONE, trace)
        assert not checked.violated, checked.explain()
        assert checked.judgement.reading == ENDS and "INV-TERMINAL" in checked.judgement.spared
        strict = run_checked(lambda: ParsedReference("openai-responses", NONE), NONE, trace)
        assert not strict.violated and not strict.judgement.reading, strict.explain()
        assert "INV-ONCE" in run_checked(lambda: Twice(ends), NONE, trace).violated
    at_done = run_checked(lambda: Recorder(run_at="response.function_call_arguments.done"), NONE, _one(WHOLE))
    assert not at_done.violated and at_done.judgement.reading == ENDS, at_done.explain()
    early = run_checked(lambda: Recorder(run_at="response.output_item.added"), NONE, _one(WHOLE))
    assert "INV-TERMINAL" in early.violated, early.explain()


def test_the_arguments_done_reading_reads_the_same_events_at_another_payload() -> None:
    """The reading ends the call at its arguments' done event and reads nothing else
    differently: the same events, the call's terminal one payload earlier."""
    from callsafe.campaigns.findings import WHOLE, _one
    from callsafe.certify.wire_adversities import base_payloads

    payloads = base_payloads(_one(WHOLE), "openai-responses")
    strict = parse_payloads("openai-responses", payloads, turn="t1", response="r1").events
    read = read_under(_BY_NAME[ENDS], payloads, turn="t1", response="r1").events
    assert read == strict
    found = differing_readings("openai-responses", payloads, strict, turn="t1", response="r1")
    assert ENDS in [r.name for r, _ in found]
