"""The README's lifecycle picture is generated from the table, not drawn by hand."""

from __future__ import annotations

from pathlib import Path

from callsafe.diagrams.model import lifecycle_diagram

ROOT = Path(__file__).resolve().parents[1]


def test_committed_lifecycle_diagram_matches_the_table() -> None:
    committed = (ROOT / "docs" / "lifecycle.dot").read_text(encoding="utf-8")
    assert committed == lifecycle_diagram().source, (
        "docs/lifecycle.dot is stale: regenerate it with `callsafe render --out docs` "
        "(and keep docs/lifecycle.svg with it)"
    )


def test_readme_starts_with_the_two_commands() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    block = lines[lines.index("```sh") + 1 : lines.index("```sh") + 3]
    assert block[0].startswith("make certify") and block[1].startswith("make test")


def test_the_inv_status_section_names_every_stopping_event_and_its_claims_hold() -> None:
    """docs/invariants.md, "INV-STATUS, precisely": the table of stops is the oracle's, and
    what it says of offers (at or after the stop, or one still standing; per turn; what
    follows an offer does not take it back; a superseded turn is no stop) is what is judged."""
    from callsafe.model.builder import TraceBuilder
    from callsafe.model.invariants import Context, check_status
    from callsafe.model.oracle import STOPPING_EVENTS, judge
    from callsafe.model.vocabulary import StatusShown, Trace

    text = (ROOT / "docs" / "invariants.md").read_text(encoding="utf-8")
    section = text.split("## INV-STATUS, precisely", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1].strip() for line in section.splitlines() if line.startswith("| `")]
    assert sorted(r.strip("`") for r in rows) == sorted(e.value for e in STOPPING_EVENTS)

    b = TraceBuilder(tools={"pay": {"type": "object"}}).turn("t1").open("a", "pay").fragment("a", '{"amount":')
    dropped = b.disconnect().turn("t2", conversation="other").build()  # the stop is at step 3

    def violations(trace: Trace, *shown: tuple[int, str, str]) -> int:
        observations = [StatusShown(step, turn, status) for step, turn, status in shown]
        return len(list(check_status(Context(trace, judge(trace), observations))))

    assert violations(dropped) == 1
    assert violations(dropped, (3, "t1", "retry")) == 0
    assert violations(dropped, (4, "t1", "handoff"), (4, "t1", "preparing")) == 0
    assert violations(dropped, (1, "t1", "retry")) == 0  # still standing at the stop
    assert violations(dropped, (1, "t1", "retry"), (2, "t1", "preparing")) == 1  # replaced before it
    assert violations(dropped, (4, "t2", "retry")) == 1  # another turn's offer
    superseded = TraceBuilder(tools={"pay": {"type": "object"}}).turn("t1").open("a", "pay").turn("t2").build()
    assert violations(superseded) == 0
