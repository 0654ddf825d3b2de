"""``callsafe render``: the design-review diagrams, and that each one draws all of its data.

The diagrams are generated from the model (the lifecycle table, the broadcasts and guards
of the system rules) and from a certification report (hit counts, counterexamples); these
tests read the generated DOT back and check that nothing in the data was left out of the
picture, and that the data itself is complete (every control event has a broadcast rule,
every guard function is listed with exactly the outcomes it can return).
"""

from __future__ import annotations

import dataclasses
import html
import inspect
import itertools
import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import callsafe.model.system as system
import callsafe.model.vocabulary as vocabulary
from callsafe.certify.harness import Options, certify
from callsafe.cli.main import main
from callsafe.diagrams.coverage import HEAT, UNTAKEN, coverage_heatmap, heat_edges, hits_from_report
from callsafe.diagrams.model import lifecycle_diagram, shared_stops, system_diagram
from callsafe.diagrams.rules import broadcast_effect, system_rules_diagram
from callsafe.diagrams.style import UNFINISHED
from callsafe.formal.graph import explore
from callsafe.model.lifecycle import TRANSITIONS, CallEvent, State
from callsafe.model.system import BROADCASTS, GUARDS, RESTART_KEEPS, SystemState
from callsafe.model.vocabulary import Limits
from callsafe.reporting.diagram_files import SMALL
from callsafe.reporting.report import write_reports

DOCS = Path(__file__).resolve().parent.parent / "docs"
needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None, reason="Graphviz 'dot' is not installed (apt-get install graphviz)"
)

_EDGE = re.compile(r"^\t(\w+)(?::\w+)*? -> (\w+)(?::\w+)* \[(.*?)\]$", re.M | re.S)


def edges(source: str) -> list[tuple[str, str, str]]:
    """(tail, head, attribute text) of every edge in a DOT source written by ``graphviz``."""
    return [(m[1], m[2], m[3]) for m in _EDGE.finditer(source)]


# --------------------------------------------------------------------------------------
# The lifecycle on one page
# --------------------------------------------------------------------------------------


def test_lifecycle_draws_every_transition_of_the_table() -> None:
    """Grouping the shared stops into one edge from the box must not lose a transition:
    each one is on its own (source, target) edge, or in the box's group for its target."""
    drawn = edges(lifecycle_diagram().source)
    groups = shared_stops()
    assert set(groups) == {State.CANCELLED, State.FAILED}
    assert CallEvent.CANCEL in groups[State.CANCELLED] and CallEvent.RESTART in groups[State.FAILED]
    for source, row in TRANSITIONS.items():
        for event, result in row.items():
            if not isinstance(result, State):
                continue
            own = [attrs for tail, head, attrs in drawn if (tail, head) == (source.value, result.value)]
            on_own_edge = any(re.search(rf"\b{event.value}\b", attrs) for attrs in own)
            grouped = source in UNFINISHED and event in groups.get(result, [])
            assert on_own_edge or grouped, (source, event, result)
            if grouped:  # the box edge carries it, and it really is the same for every unfinished state
                assert all(TRANSITIONS[s][event] is result for s in UNFINISHED)
    boxed = {head: attrs for _, head, attrs in drawn if "ltail=cluster_unfinished" in attrs}
    assert set(boxed) == {target.value for target in groups}
    for target, events in groups.items():
        assert all(re.search(rf"\b{e.value}\b", boxed[target.value]) for e in events), target


def test_committed_model_diagrams_match_the_model() -> None:
    for name, dot in (("system-rules", system_rules_diagram()), ("system", system_diagram(explore(SMALL)))):
        committed = (DOCS / f"{name}.dot").read_text(encoding="utf-8")
        assert committed == dot.source, f"docs/{name}.dot is stale: regenerate with `callsafe render --out docs`"


# --------------------------------------------------------------------------------------
# The system rules: data complete, and all of it drawn
# --------------------------------------------------------------------------------------

# Events about one call (its own data, its own confirmation) and delivery conditions: no
# broadcast. Every other input event is a control that reaches many calls.
PER_CALL = {"call_opened", "fragment", "text_fragment", "call_terminal", "confirm", "replay"}


def test_every_control_event_has_a_broadcast_rule() -> None:
    kinds = {
        cls.kind
        for _, cls in inspect.getmembers(vocabulary, inspect.isclass)
        if issubclass(cls, vocabulary.Event) and cls not in (vocabulary.Event, vocabulary.CallAddressed)
    }
    broadcast = {rule.event_type.kind for rule in BROADCASTS}
    assert kinds - PER_CALL == broadcast, "a control event without a broadcast rule is missing from the diagram"


def test_guards_list_every_guard_function_with_exactly_its_outcomes() -> None:
    functions = {name for name, _ in inspect.getmembers(system, inspect.isfunction) if name.startswith("classify_")}
    assert {g.function.__name__ for g in GUARDS} == functions
    for guard in GUARDS:
        params = inspect.signature(guard.function).parameters
        if all(p.annotation in ("bool", bool) for p in params.values()):
            returned = {guard.function(*combo) for combo in itertools.product((False, True), repeat=len(params))}
        elif guard.function is system.classify_terminal:
            returned = {guard.function(seen, r) for seen in (False, True) for r in vocabulary.STOP_REASONS}
        else:
            assert guard.function is system.classify_fragment
            limits = Limits(call_bytes=10, turn_bytes=20)
            returned = {
                guard.function(same, diff, call, turn, limits)
                for same, diff in ((True, False), (False, True), (False, False))
                for call, turn in ((5, 5), (11, 11), (5, 21))
            }
        assert returned == set(guard.outcomes), guard.name
    checked = {fact for guard in GUARDS for fact in guard.checks}
    for rule in BROADCASTS:
        assert set(rule.breaks) <= checked, f"{rule.event_type.kind} breaks a fact no guard checks"


def test_restart_keeps_says_something_about_every_field_of_the_system_state() -> None:
    assert set(RESTART_KEEPS) == {f.name for f in dataclasses.fields(SystemState)}


def fact_node(source: str, fact: str) -> str:
    """The id of the node that says ``fact`` no longer holds."""
    match = re.search(rf'\t(fact_\w+) \[label="✗ {re.escape(fact)}"', source)
    assert match is not None, fact
    return match[1]


def test_system_rules_diagram_draws_every_broadcast_guard_and_durable_fact() -> None:
    source = system_rules_diagram().source
    drawn = {(tail, head) for tail, head, _ in edges(source)}
    for rule in BROADCASTS:
        node = f"in_{rule.event_type.kind}"
        card = re.search(rf"\t{node} \[label=<(.*?)> ?\]", source, re.S)
        assert card is not None, rule.event_type.kind
        text = card[1]
        assert rule.call_event.value in text and rule.reaches.split("\n")[0] in text and rule.who in source
        for end in broadcast_effect(rule):
            assert f"→ {end.value}" in text, (rule.event_type.kind, end)
        for fact in rule.breaks:
            assert (node, fact_node(source, fact)) in drawn, (rule.event_type.kind, fact)
    for guard in GUARDS:
        card = re.search(rf"\tguard_{guard.name} \[label=<(.*?)> ?\]", source, re.S)
        assert card is not None, guard.name
        for n, fact in enumerate(guard.checks):
            assert f'PORT="c{n}"' in card[1] and fact in card[1]
        for event in guard.outcomes:
            assert event.value in card[1], (guard.name, event)
    # each fact a broadcast breaks is linked to the row of every guard that checks it
    for guard in GUARDS:
        for n, fact in enumerate(guard.checks):
            if any(fact in rule.breaks for rule in BROADCASTS):
                assert f"\t{fact_node(source, fact)} -> guard_{guard.name}:c{n}:w " in source, (guard.name, fact)
    for words in RESTART_KEEPS.values():
        assert html.escape(words) in source
    assert "in_restart -> restart_keeps" in source
    for field in dataclasses.fields(vocabulary.CallKey):
        assert field.name in source  # turn ownership: the call key, field by field


def test_response_end_reaches_only_collecting_calls_as_the_table_says() -> None:
    rule = next(r for r in BROADCASTS if r.call_event is CallEvent.RESPONSE_ENDED)
    assert broadcast_effect(rule) == {State.FAILED: [State.COLLECTING]}
    cancel = next(r for r in BROADCASTS if r.call_event is CallEvent.CANCEL)
    assert broadcast_effect(cancel) == {State.CANCELLED: list(UNFINISHED)}


# --------------------------------------------------------------------------------------
# The coverage heat map
# --------------------------------------------------------------------------------------


def _attr(attrs: str, name: str) -> str | None:
    match = re.search(rf'\b{name}="?([^" \]]+)"?', attrs)
    return match[1] if match else None


def test_heat_map_shades_follow_the_hit_counts() -> None:
    hits = {
        (State.ABSENT, CallEvent.OPEN): 900,
        (State.COLLECTING, CallEvent.FRAGMENT): 300,
        (State.COLLECTING, CallEvent.TERMINAL_COMPLETED): 40,
        (State.TERMINAL_CANDIDATE, CallEvent.VALID): 3,
        (State.VALIDATED, CallEvent.DISPATCH): 1,
    }
    dot = coverage_heatmap(hits)
    drawn = {(t, h): attrs for t, h, attrs in edges(dot.source)}
    data = {(e.source.value, e.target.value): e for e in heat_edges(hits)}
    assert set(drawn) == set(data)
    hottest = drawn[("absent", "collecting")]
    assert _attr(hottest, "color") == HEAT[-1]
    widths = {pair: float(_attr(a, "penwidth") or 0) for pair, a in drawn.items()}
    assert widths[("absent", "collecting")] == max(widths.values())
    # darker and wider with more traces, on every taken edge
    taken = sorted((e.total, HEAT.index(_attr(drawn[p], "color") or ""), widths[p]) for p, e in data.items() if e.total)
    assert [lvl for _, lvl, _ in taken] == sorted(lvl for _, lvl, _ in taken)
    assert [w for _, _, w in taken] == sorted(w for _, _, w in taken)
    assert _attr(drawn[("validated", "dispatched")], "color") == HEAT[0]
    # untaken: grey and dashed, and its events greyed out in the label
    untaken = drawn[("terminal_candidate", "failed")]
    assert _attr(untaken, "color") == UNTAKEN and "style=dashed" in untaken
    assert f'<FONT COLOR="{UNTAKEN}">parse_failed 0</FONT>' in untaken
    assert "900" in hottest and "valid 3" in drawn[("terminal_candidate", "validated")]
    # the legend, in the graph's label: every shade with its count range, and the untaken style
    legend = re.search(r"label=<(<TABLE.*?</TABLE>)> labelloc", dot.source, re.S)
    assert legend is not None and "not taken" in legend[1] and "traces that took the edge" in legend[1]
    for colour in HEAT:
        assert f'BGCOLOR="{colour}"' in legend[1]
    assert (
        re.search(r"> 1(–\d+)? <", legend[1]) and "–900 <" in legend[1]
    )  # the lightest shade starts at 1, the darkest ends at most


def test_coverage_map_without_counts_keeps_the_old_call() -> None:
    source = lifecycle_diagram(covered=[(State.ABSENT, CallEvent.OPEN)]).source
    drawn = {(t, h): attrs for t, h, attrs in edges(source)}
    assert "open ✓" in drawn[("absent", "collecting")]
    assert _attr(drawn[("validated", "dispatched")], "color") == UNTAKEN
    assert "style=dotted" in drawn[("validated", "dispatched")]


# --------------------------------------------------------------------------------------
# The command: from a mutant's report to every diagram
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def report_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A mutant that lets an old turn's call run: several counterexamples, INV-TURN among them."""
    cert = certify(
        "callsafe.campaigns.mutants:no_turn_check",
        Options(depth=1, generators=("catalog",), counterexamples=2, minimize_budget=10.0),
    )
    assert not cert.ok
    return write_reports(cert, tmp_path_factory.mktemp("mutant")).json


def test_render_without_a_report_writes_the_model_diagrams_and_says_what_needs_one(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["render", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for name in ("lifecycle", "system-rules", "system"):
        assert (tmp_path / f"{name}.dot").exists(), name
    assert "need a report" in result.output and "--report" in result.output
    assert not (tmp_path / "coverage-heatmap.dot").exists() and not (tmp_path / "sequences").exists()


@needs_dot
def test_render_with_a_report_writes_a_heat_map_and_one_sequence_per_counterexample(
    report_json: Path, tmp_path: Path
) -> None:
    result = CliRunner().invoke(main, ["render", "--out", str(tmp_path), "--report", str(report_json), "--png"])
    assert result.exit_code == 0, result.output
    doc = json.loads(report_json.read_text())
    for name in ("lifecycle", "system-rules", "system", "coverage-heatmap"):
        for suffix in ("dot", "svg", "png"):
            assert (tmp_path / f"{name}.{suffix}").stat().st_size > 0, (name, suffix)
    assert (tmp_path / "coverage-heatmap.png").read_bytes().startswith(b"\x89PNG")
    expected = {
        Path(ce["files"]["trace"]).stem: inv["id"] for inv in doc["invariants"] for ce in inv["counterexamples"]
    }
    assert len(expected) >= 2
    assert {p.stem for p in (tmp_path / "sequences").glob("*.svg")} == set(expected)
    assert {p.stem for p in (tmp_path / "sequences").glob("*.png")} == set(expected)
    for stem, inv in expected.items():
        svg = html.unescape((tmp_path / "sequences" / f"{stem}.svg").read_text())  # Graphviz writes - as &#45;
        assert f"{inv} violated" in svg, stem  # the title names the violated invariant
    turn = next(s for s, inv in expected.items() if inv == "INV-TURN")
    dot = (tmp_path / "sequences" / f"{turn}.dot").read_text()
    assert "#c62828" in dot and "execute pay" in dot  # the forbidden execution, drawn red
    assert "what the model says happened" in dot and "supersede" in dot
    heat = (tmp_path / "coverage-heatmap.dot").read_text()
    hits = hits_from_report(doc)
    assert heat == coverage_heatmap(hits, title=f"callsafe: lifecycle coverage of {doc['target']['name']}").source
    page = (report_json.parent / "report.html").read_text()
    assert "lifecycle coverage of" in page and "not taken" in page  # the report page shows the heat map too


def test_render_refuses_a_file_that_is_not_a_report(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.json"
    bogus.write_text('{"events": []}')
    result = CliRunner().invoke(main, ["render", "--out", str(tmp_path / "out"), "--report", str(bogus)])
    assert result.exit_code == 2 and "not a certification report" in result.output
