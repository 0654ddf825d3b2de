"""The rich concrete domain: what it holds, that it is reproducible, that the plain domain
is the old one, and that expected verdicts still come from the oracle alone."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from callsafe.certify.harness import Options, certify, plan_partitions
from callsafe.certify.targets import describe, resolve_target
from callsafe.contract.target import CAPABILITIES
from callsafe.generators.domain import (
    AXES,
    PLAIN,
    Domain,
    Variant,
    document,
    features,
    place_limits,
    send_order,
    split_pieces,
)
from callsafe.generators.walks import WALK_CONFIG, random_walks, walk_configs
from callsafe.model.oracle import judge
from callsafe.model.system import utf8_len
from callsafe.model.vocabulary import Fragment, Trace

SPEC = "reference:memory"


def _traces(options: Options) -> list[Trace]:
    info = describe(resolve_target(SPEC), SPEC)
    return [t for p in plan_partitions(options, info, {}, None) for t in p.traces()]


def test_the_plain_domain_is_the_walks_of_old() -> None:
    plain = list(random_walks(3, 30, WALK_CONFIG))
    again = list(random_walks(3, 30, (WALK_CONFIG,), domain=Domain.for_capabilities(CAPABILITIES, rich=False)))
    assert [t.dumps() for t in plain] == [t.dumps() for t in again]
    assert walk_configs(CAPABILITIES, rich=False) == (walk_configs(CAPABILITIES)[0],)


def test_a_seed_gives_the_same_traces_and_another_seed_other_data() -> None:
    options = Options(generators=("walks", "coverage"), walks=60, seed=5)
    first = [t.dumps() for t in _traces(options)]
    assert first == [t.dumps() for t in _traces(options)]
    other = [t.dumps() for t in _traces(Options(generators=("walks",), walks=60, seed=6))]
    assert other != first[: len(other)]


def test_generated_traces_carry_no_hand_set_verdicts() -> None:
    for trace in _traces(Options(generators=("coverage", "walks", "exhaustive"), walks=40, depth=2)):
        assert not trace.verdicts
        assert judge(trace).verdicts or not any(isinstance(e, Fragment) for e in trace.events)


def test_the_default_plan_reaches_every_part_of_the_domain() -> None:
    seen: set[str] = set()
    for trace in _traces(Options(generators=("coverage", "walks"))):
        seen |= features(trace)
    wanted = {
        "identities: several tenants",
        "identities: ids shared across turns",
        "identities: several responses per turn",
        "tools: business rule",
        "tools: confirmation",
        "tools: confirmation and business rule",
        "values: 2-byte UTF-8",
        "values: 3-byte UTF-8",
        "values: 4-byte UTF-8",
        "values: escapes",
        "values: repeated digits",
        "order: out of position order",
        "limits: call just under its cap",
        "limits: call at its cap",
        "limits: call just over its cap",
        "limits: turn just under its cap",
        "limits: turn at its cap",
        "limits: turn just over its cap",
        "events: turn re-announced with another binding",
        "events: a turn's calls on both sides of a restart",
        "events: ids reused by a later call",
        "events: confirm repeated",
        "events: cancel_turn repeated",
        "events: disable_tool repeated",
        "events: quarantine_response repeated",
        "events: stop_tenant repeated",
        "events: tool_changed repeated",
    }
    assert wanted - seen == set()


def test_the_report_says_which_part_of_the_domain_each_generator_covered() -> None:
    options = Options(generators=("coverage", "walks"), walks=40, minimize=False)
    first = certify(SPEC, options)
    second = certify(SPEC, options)
    assert first.ok
    walks = first.generators["walks"].to_json()
    assert walks["domain_covered"] == second.generators["walks"].to_json()["domain_covered"]
    assert walks["domain_covered"]["identities: ids shared across turns"] > 0
    assert set(walks["info"]["domain"]) == set(AXES)
    plain = certify(SPEC, Options(generators=("walks",), walks=40, minimize=False, domain="plain"))
    assert "domain" not in plain.generators["walks"].info
    assert not any(k.startswith(("identities", "limits")) for k in plain.generators["walks"].covered)


def test_middle_pieces_are_digits_so_every_order_of_them_parses() -> None:
    variant = Variant(order="out-of-order")
    text = document(1, variant)
    pieces = split_pieces(text, 4, variant)
    assert "".join(pieces) == text
    values = set()
    for middle in itertools.permutations(pieces[1:-1]):
        values.add(json.loads(pieces[0] + "".join(middle) + pieces[-1])["v"])
    assert len(values) == 2  # both orders parse, to different numbers
    assert send_order(4, variant) == [0, 2, 1, 3]
    assert send_order(2, variant) == [1, 0]
    repeated = split_pieces(document(0, Variant(values="repeated")), 4, Variant(values="repeated"))
    assert repeated[1] == repeated[2]  # equal pieces at different positions: a repeat is not a duplicate


def test_values_hold_multi_byte_text_and_escapes() -> None:
    utf8 = document(0, Variant(values="utf8"))
    assert {len(ch.encode()) for ch in utf8} >= {1, 2, 3, 4}
    escaped = document(0, Variant(values="escapes"))
    assert escaped.isascii() and "\\u" in escaped and '\\"' in escaped
    assert json.loads(escaped)["memo"].endswith("🦄0")


@pytest.mark.parametrize(("where", "delta"), [("under", 1), ("at", 0), ("over", -1)])
def test_caps_are_placed_by_the_trace_s_own_sizes(where: str, delta: int) -> None:
    call = place_limits(Variant(limits=f"call-{where}"), [10, 30], [10, 30])
    assert call.call_bytes == 30 + delta and call.turn_bytes >= 4096
    turn = place_limits(Variant(limits=f"turn-{where}"), [10, 30], [40, 7])
    assert turn.turn_bytes == 40 + delta and turn.call_bytes >= 60
    assert place_limits(PLAIN, [10], [10]).call_bytes == 64


def test_walk_caps_sit_at_the_sizes_of_the_walk_itself() -> None:
    hits = 0
    for trace in random_walks(0, 120, walk_configs(CAPABILITIES), domain=Domain.for_capabilities(CAPABILITIES)):
        if "limits=call-at" not in trace.source:
            continue
        sizes: dict[tuple[str, str, str, str], int] = {}
        for e in trace.events:
            if isinstance(e, Fragment) and e.text.strip(" "):
                ident = (e.turn, e.response, e.item, e.call)
                sizes[ident] = sizes.get(ident, 0) + utf8_len(e.text)
        hits += trace.limits.call_bytes in sizes.values()
    assert hits > 0


def test_the_domain_is_cut_to_what_a_target_can_take() -> None:
    bare = Domain.for_capabilities(frozenset())
    choices = dict(bare.choices)
    assert "tenants" not in choices["identities"] and "rebound" not in choices["events"]
    assert choices["tools"] == ("one",) and "restart-reuse" not in choices["events"]
    assert not Domain.for_capabilities(CAPABILITIES, rich=False).rich
    rng = random.Random(1)
    assert all(bare.sample(rng).identities != "tenants" for _ in range(50))
    everything = {getattr(Domain().nth(n), axis) for n in range(8) for axis in AXES}
    assert everything >= {v for values in AXES.values() for v in values}


def test_a_bad_domain_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown domain"):
        Options(domain="huge")
    with pytest.raises(ValueError, match="identities"):
        Variant(identities="everyone")
