"""The report as a reader meets it (issue 32 item 7): diagrams scaled to the page, every
named scenario with its verdict, no link that lands nowhere, a wire counterexample with the
payloads the target read, and pytest-plugin failures a person can read."""

from __future__ import annotations

import json
import re
import shlex
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from callsafe.certify.harness import Options, certify
from callsafe.certify.pytest_plugin import TRACE_LINES
from callsafe.certify.targets import TargetInfo
from callsafe.certify.wire_adversities import adversity_traces
from callsafe.model.vocabulary import Trace
from callsafe.reporting.report import html_report, wire_lines

pytest_plugins = ("pytester",)
SAMPLE = Path(__file__).resolve().parents[1] / "docs" / "samples" / "serve-trace.json"


@pytest.fixture(scope="module")
def failing() -> object:
    return certify("toy_targets:ignore_cancel", Options(generators=("catalog",), counterexamples=2))


def test_diagrams_scale_to_the_column_and_keep_their_drawing(failing: object) -> None:
    page = html_report(failing)  # type: ignore[arg-type]
    assert ".diagram svg { max-width: 100%; height: auto; }" in page
    svgs = re.findall(r"<svg[^>]*>", page)
    assert svgs and all("viewBox" in tag for tag in svgs)  # scaled down, never cut off


def test_every_named_scenario_is_listed_with_its_verdict(failing: object) -> None:
    cert = failing
    page = html_report(cert)  # type: ignore[arg-type]
    section = page.split("<h2>Scenarios</h2>", 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr><td>catalog</td><td>([^<]+)</td><td><span class=\"badge (\w+)\"", section)
    assert len(rows) == len(cert.scenarios) and len(rows) > 20  # type: ignore[attr-defined]
    assert {name for name, _ in rows} == {r.name for r in cert.scenarios}  # type: ignore[attr-defined]
    outcomes = [outcome for _, outcome in rows]
    assert "passed" in outcomes and "violated" in outcomes
    assert outcomes.index("passed") > max(i for i, o in enumerate(outcomes) if o != "passed")  # failures first


@pytest.mark.parametrize("target", ["toy_targets:ignore_cancel", "toy_targets:model_target"])
def test_every_link_within_the_page_lands_somewhere(target: str) -> None:
    cert = certify(target, Options(generators=("catalog",), minimize=False))
    page = html_report(cert)
    links = set(re.findall(r"href='#([^']+)'", page))
    ids = set(re.findall(r"id='([^']*)'", page))
    assert links <= ids, links - ids
    assert "" not in ids  # no empty anchors
    if not cert.counterexamples:
        assert not links  # nothing fails: nothing to link to


def test_a_wire_counterexample_shows_the_payloads_the_target_read() -> None:
    """A mutated stream (a delta sent twice) reads as abstract events in which the repeat is
    invisible; the lines are the recorded payloads themselves, the repeat included."""
    chat = SimpleNamespace(target=TargetInfo("x", "x", "openai-chat", frozenset(), {"mode": "in process"}))
    trace = next(t for t in adversity_traces(("openai-chat",)) if t.operator == "duplicated-delta")
    lines = wire_lines(chat, trace)  # type: ignore[arg-type]
    shown = [line for line in lines if not line.endswith("(the body ends)")]
    assert len(shown) == len(trace.payloads)  # every payload, once each, in order
    texts = [json.dumps(p, ensure_ascii=False, separators=(",", ":"))[:400] for p in trace.payloads]
    assert [line.split(": ", 1)[1] for line in shown] == texts
    assert len(set(texts)) < len(texts)  # the duplicated delta is there to see
    sample = wire_lines(chat, Trace.loads(SAMPLE.read_bytes()))  # type: ignore[arg-type]
    assert any('"tool_calls":[{"index":0' in line for line in sample)  # an abstract trace, rendered as it ran
    abstract = SimpleNamespace(target=TargetInfo("x", "x", "abstract", frozenset()))
    assert wire_lines(abstract, Trace.loads(SAMPLE.read_bytes())) == []  # type: ignore[arg-type]


def test_the_html_shows_the_payloads_of_a_wire_counterexample() -> None:
    pytest.importorskip("openai", reason="openai is not installed: pip install -e '.[sdks]'")
    cert = certify("library:openai:openai-chat:final", Options(generators=("wire",), counterexamples=1))
    assert cert.counterexamples
    page = html_report(cert)
    assert page.count("what the target read:") == sum(len(c) for c in cert.counterexamples.values())
    assert '"choices":[' in page.replace("&quot;", '"')  # the Chat Completions chunks themselves


def test_a_plugin_failure_is_compact_and_says_how_to_replay(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(
        test_mine=textwrap.dedent(
            """
            import pytest

            @pytest.mark.callsafe(target="toy_targets:ignore_cancel", generators=["catalog"], counterexamples=2)
            def test_it(callsafe_invariant):
                callsafe_invariant.check()
            """
        )
    )
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent))
    result = pytester.runpytest_inprocess("-p", "callsafe.certify.pytest_plugin", "-p", "no:cacheprovider")
    out = result.stdout.str()
    failed = result.parseoutcomes()["failed"]
    assert failed >= 1
    # a few lines per failure: no JSON dump of the trace
    assert '"events": [' not in out and '"turn_started": {' not in out
    sections = [s for s in out.split("_ test_it[") if s.strip().startswith("INV-")]
    assert len(sections) == failed
    for section in sections:
        body = section.split("\n", 1)[1]
        lines = [line for line in body.splitlines() if line.strip() and not set(line) <= set("_= ")]
        assert len(lines) <= 8 + TRACE_LINES, body  # headline, findings, events, replay
        (replay,) = [line for line in lines if line.startswith("replay: ")]
        argv = shlex.split(replay.removeprefix("replay: "))
        assert argv[:2] == ["callsafe", "replay"] and Path(argv[2]).exists() and argv[3] == "toy_targets:ignore_cancel"
