"""The matrix against ground truth of its own (issue 30): ``campaigns/ground_truth/`` holds, per
Python library, a script that feeds the SDK hand-written adversarial streams directly (no
callsafe import) and tags what each surface presented with the invariants it breaks, by plain
rules of its own (``judge.py``). Here every script runs (a fresh interpreter, offline) and its
verdict per row is compared with the measured matrix, ``docs/matrix-summary.json``:

* every invariant a script shows broken on a surface is ``violated`` in that row (the matrix
  misses nothing the direct feed shows);
* every ``violated`` cell of the row is shown by at least one of the script's streams (the
  matrix blames nothing the direct feed does not show);

except for the disagreements listed, each with why, in :data:`MISSED` and :data:`UNSHOWN`.
An exception that no longer disagrees fails too, so the table stays exact.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import pytest
from loaded import TRACE_TIMEOUT
from skips import missing

ROOT: Final = Path(__file__).resolve().parents[1]
FOLDER: Final = ROOT / "campaigns" / "ground_truth"
SUMMARY: Final = ROOT / "docs" / "matrix-summary.json"

# script -> the modules it needs (the first is the library whose rows it judges)
SCRIPTS: Final[dict[str, tuple[str, ...]]] = {
    "openai_chat.py": ("openai",),
    "openai_responses.py": ("openai",),
    "anthropic_messages.py": ("anthropic",),
    "litellm_rebuild.py": ("litellm", "openai"),
    "langchain_core_chat.py": ("langchain_core",),
}
HELPERS: Final = frozenset({"judge", "chat_streams"})  # the folder's own modules (standard library only)
SDK_MODULES: Final = frozenset(
    {"openai", "anthropic", "litellm", "langchain_core", "httpx2"}
)  # httpx2: the SDKs' transport

# Invariants a script shows broken on a row whose matrix cell is not "violated": matrix misses,
# each with why it is left here rather than fixed.
MISSED: Final[dict[tuple[str, str], str]] = {
    ("library:openai:openai-responses:arguments_done", "INV-CANCEL"): (
        "done-then-incomplete: the call is handed out at arguments.done, then its item and the response end "
        "incomplete (max_output_tokens). The oracle judges that shape INV-CANCEL (it is the witness of finding "
        "OA-RESP-DONE-THEN-INCOMPLETE, recorded with INV-CANCEL on this surface), but no generator of the "
        "matrix makes it, so the measured cell holds; new-call-after-completed is the other stream (see UNSHOWN)"
    ),
    ("library:openai:openai-responses:final", "INV-TERMINAL"): (
        "schema-invalid: a completed response whose call breaks the tool's schema ({'amount': '100'}) runs "
        "through get_final_response() (the SDK does not check strict schemas), which the oracle judges "
        "INV-TERMINAL when it sees it (check_trace), but the matrix's exhaustive depth (3) never reaches the "
        "response's end after an invalid call and no random walk made one, so the measured cell holds"
    ),
}
# Violated cells that no stream of the script shows: what the direct feed cannot exercise, or a
# reading on which the script and the matrix name one fault differently.
UNSHOWN: Final[dict[tuple[str, str], str]] = {
    ("library:openai:openai-responses:arguments_done", "INV-EXACT-ARGS"): (
        "the matrix's counterexample is a whole new call after response.completed, which the oracle names "
        "INV-EXACT-ARGS ('a call key the stream never carried') over Responses and Anthropic but INV-TERMINAL "
        "and INV-CANCEL over Chat Completions; the script names it INV-TERMINAL and INV-CANCEL on every "
        "protocol (new-call-after-completed), as data after the response's final stop"
    ),
}


# Per stream and surface, where callsafe's adapter and oracle (``check_trace`` on the very
# payloads, read back by the protocol's parser) judge otherwise than the script:
# (script, stream, surface) -> (the script's invariants, callsafe's), grouped by why.
_TIMING: Final = (
    "callsafe: INV-TERMINAL, the call is presented before its terminal (openai's done event when the next index "
    "starts, langchain-core's preview mid-stream); the script's rules have no timing, and count a call run only "
    "with a prefix of its arguments as never run (LIVE-DISPATCH), where the oracle counts it as run"
)
_NO_DONE: Final = (
    "a Chat body that ends cleanly without [DONE]: the SDK ends the stream normally and the call runs; callsafe's "
    "wire has no such body (a body without [DONE] is a dropped connection, on which nothing is presented)"
)
_LATE_CALL: Final = (
    "a whole new call after the final stop: the oracle names it INV-EXACT-ARGS (a key the stream never carried) "
    "over Responses and Anthropic, INV-TERMINAL and INV-CANCEL over Chat; the script the Chat way everywhere"
)
_ONCE_BY_ID: Final = (
    "the same tool_use id runs twice, at two block indexes (the replayed start's phantom): the script counts ids, "
    "the oracle counts call keys, which hold the block index"
)
_NEW_ID: Final = (
    "a second call with its own id at a reused index: the script says it must run (a new id, a new call); the "
    "oracle allows refusing it (callsafe's parser refuses a reused index), so losing it is no LIVE-DISPATCH"
)
_REPLAYED_ADDED: Final = (
    "a replayed response.output_item.added makes the SDK raise ('Duplicate response output index'): the script "
    "says the call must run (a replay read once), the oracle allows refusing the stream"
)
_T, _X, _O, _C, _L = "INV-TERMINAL", "INV-EXACT-ARGS", "INV-ONCE", "INV-CANCEL", "LIVE-DISPATCH"


def _same(
    script: str,
    streams: tuple[str, ...],
    surfaces: tuple[str, ...],
    ours: tuple[str, ...],
    theirs: tuple[str, ...],
    why: str,
) -> dict[tuple[str, str, str], tuple[frozenset[str], frozenset[str], str]]:
    return {(script, st, su): (frozenset(ours), frozenset(theirs), why) for st in streams for su in surfaces}


AN_ALL: Final = ("block_stop", "final", "final+every-block", "block_stop+fine-grained")
STREAM_DIFFERENCES: Final = {
    **_same(
        "openai_chat.py",
        ("two-calls", "new-call-after-finish"),
        ("done_event", "done_event+nonstrict"),
        (),
        (_T,),
        _TIMING,
    ),
    **_same("langchain_core_chat.py", ("two-calls", "reused-index-new-id"), ("preview",), (), (_T,), _TIMING),
    **_same(
        "langchain_core_chat.py",
        ("clean", "interleaved", "repeated-id-and-name"),
        ("preview",),
        (_X, _L),
        (_X, _T),
        _TIMING,
    ),
    **_same(
        "langchain_core_chat.py", ("empty-arguments", "surrogate-pair-split"), ("preview",), (_X,), (_X, _T), _TIMING
    ),
    **_same("litellm_rebuild.py", ("no-finish-no-done",), ("final",), (_T, _C), (), _NO_DONE),
    **_same("langchain_core_chat.py", ("no-finish-no-done",), ("final",), (_T, _C), (), _NO_DONE),
    **_same("openai_responses.py", ("new-call-after-completed",), ("arguments_done",), (_T, _C), (_X,), _LATE_CALL),
    **_same("anthropic_messages.py", ("new-block-after-message-stop",), AN_ALL, (_T, _C), (_X,), _LATE_CALL),
    **_same(
        "anthropic_messages.py", ("replayed-block-start",), ("final", "final+every-block"), (_X, _O), (_X,), _ONCE_BY_ID
    ),
    **_same("anthropic_messages.py", ("replayed-block-start-two-calls",), AN_ALL, (_X, _O, _L), (_X, _L), _ONCE_BY_ID),
    **_same(
        "anthropic_messages.py",
        ("reused-index-new-id",),
        ("block_stop", "block_stop+fine-grained"),
        (_O, _L),
        (_O,),
        _NEW_ID,
    ),
    **_same(
        "anthropic_messages.py", ("reused-index-new-id",), ("final", "final+every-block"), (_X, _L), (_X,), _NEW_ID
    ),
    **_same("openai_responses.py", ("reused-output-index-new-item",), ("arguments_done", "final"), (_L,), (), _NEW_ID),
    **_same(
        "openai_responses.py", ("replayed-output-item-added",), ("arguments_done", "final"), (_L,), (), _REPLAYED_ADDED
    ),
}
PROTOCOL_OF: Final = {
    "openai_chat.py": "openai-chat",
    "openai_responses.py": "openai-responses",
    "anthropic_messages.py": "anthropic-messages",
    "litellm_rebuild.py": "openai-chat",
    "langchain_core_chat.py": "openai-chat",
}
JUDGED: Final = frozenset({_T, _X, _O, _C, _L})


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import"
            names.add((node.module or "").split(".")[0])
    return names


def test_scripts_import_only_their_sdk_and_the_standard_library() -> None:
    """No callsafe import (by the syntax tree, not by text): the verdicts are independent."""
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    files = sorted(FOLDER.glob("*.py"))
    assert {p.name for p in files} == set(SCRIPTS) | {f"{h}.py" for h in HELPERS}
    for path in files:
        foreign = _imports(path) - stdlib - HELPERS
        if path.stem in HELPERS:
            assert not foreign, f"{path.name} imports {sorted(foreign)}"
        else:
            assert foreign and foreign <= SDK_MODULES, f"{path.name} imports {sorted(foreign)}"


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


@functools.cache
def _document(script: str) -> dict[str, Any]:
    """The script's record, run once per test process (both tests of a script share an
    ``xdist_group``, so one worker runs the script for both)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env.update(LITELLM_OFFLINE_MODE="true", LITELLM_LOCAL_MODEL_COST_MAP="True", NO_PROXY="*")
    done = subprocess.run(
        [sys.executable, str(FOLDER / script)],
        capture_output=True,
        text=True,
        timeout=TRACE_TIMEOUT,
        env=env,
        cwd=FOLDER,
        check=False,
    )
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stderr[-2000:]}"
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def _matrix() -> dict[str, dict[str, Any]]:
    summary = json.loads(SUMMARY.read_text(encoding="utf-8"))
    return {row["spec"]: row for row in summary["rows"]}


def _run(script: str) -> dict[str, Any]:
    for module in SCRIPTS[script]:
        if not _installed(module):
            pytest.skip(missing(module))
    return _document(script)


# Surfaces on which a control stream (a clean call, two calls) is expected to break something:
# the surface itself is the finding.
CONTROL_FAULTS: Final[dict[tuple[str, str], str]] = {
    ("langchain_core_chat.py", "preview"): (
        "LC-PARTIAL-PREVIEW: mid-stream the aggregate's tool_calls already hold a call with a repaired prefix of "
        "its arguments ({'amount': 1} of '{\"amount\":1')"
    ),
}


@pytest.mark.parametrize("script", [pytest.param(s, marks=pytest.mark.xdist_group(s)) for s in sorted(SCRIPTS)])
def test_the_matrix_agrees_with_the_direct_feed(script: str) -> None:
    """One run of the script (tens of seconds for litellm): its record is well formed, its
    control streams go through cleanly, it saw the versions the matrix measured, and its
    verdict per row is the matrix's, but for the listed exceptions."""
    document = _run(script)
    surfaces = {s for stream in document["streams"] for s in stream["surfaces"]}
    assert len(document["streams"]) >= 10
    faulty: set[str] = set()  # surfaces on which some control stream breaks something
    for stream in document["streams"]:
        assert set(stream["surfaces"]) == surfaces, stream["name"]
        if stream["class"].startswith("control:"):
            for name, seen in stream["surfaces"].items():
                assert seen["presented"] and not seen["error"], (stream["name"], name, seen)
                if seen["violated"]:
                    faulty.add(name)
    assert faulty == {name for s, name in CONTROL_FAULTS if s == script}, f"{script}: controls break {sorted(faulty)}"
    import importlib.metadata

    measured = json.loads(SUMMARY.read_text(encoding="utf-8"))["versions"]
    for name, version in document["versions"].items():
        assert version == importlib.metadata.version(name), (script, name)
        if measured.get(name) != version:
            pytest.skip(f"the matrix measured {name} {measured.get(name)}, {version} is installed: measure it again")
    matrix = _matrix()
    problems: list[str] = []
    for row, shown in document["rows"].items():
        assert row in matrix, f"{script}: no matrix row {row}"
        cells = matrix[row]["cells"]
        violated = {inv for inv, status in cells.items() if status == "violated"}
        for inv, streams in shown.items():
            if (inv not in violated) != ((row, inv) in MISSED):
                stale = " (listed in MISSED: no longer a disagreement)" if (row, inv) in MISSED else ""
                problems.append(
                    f"{row} {inv}: the direct feed shows it ({', '.join(streams)}), the cell is {cells[inv]}{stale}"
                )
        for inv in violated:
            if (inv not in shown) != ((row, inv) in UNSHOWN):
                stale = " (listed in UNSHOWN: no longer a disagreement)" if (row, inv) in UNSHOWN else ""
                problems.append(
                    f"{row} {inv}: the cell is violated; streams of {script} that show it: {shown.get(inv)}{stale}"
                )
    assert not problems, "\n".join(problems)
    page = (ROOT / "docs" / "ground-truth.md").read_text(encoding="utf-8")
    for row, shown in document["rows"].items():
        line = (
            f"| `{row.removeprefix('library:')}` | "
            + " | ".join(_agreement(inv in shown, matrix[row]["cells"][inv] == "violated") for inv in PAGE_COLUMNS)
            + " |"
        )
        assert line in page, f"docs/ground-truth.md's agreement table lacks: {line}"


PAGE_COLUMNS: Final = ("INV-TERMINAL", "INV-EXACT-ARGS", "INV-ONCE", "INV-CANCEL", "LIVE-DISPATCH")


def _agreement(script: bool, matrix: bool) -> str:
    """A cell of the page's agreement table."""
    if script == matrix:
        return "both" if script else "neither"
    return "**script only**" if script else "**matrix only**"


def test_exceptions_name_rows_of_the_matrix() -> None:
    assert {row for row, _ in MISSED} | {row for row, _ in UNSHOWN} <= set(_matrix())


@pytest.mark.parametrize("script", [pytest.param(s, marks=pytest.mark.xdist_group(s)) for s in sorted(SCRIPTS)])
def test_callsafe_judges_each_stream_as_the_script_does(script: str) -> None:
    """Finer than the cells: every stream of the script, its payloads read back by callsafe's
    parser into a trace (as the matrix's recorded wire traces are) and run through the row's
    adapter and the oracle (``check_trace``), gets the invariants the script gives it on that
    surface, but for :data:`STREAM_DIFFERENCES` (exact: both sides, and a listed difference that
    no longer differs fails)."""
    from callsafe.certify.harness import check_trace
    from callsafe.model.builder import TraceBuilder
    from callsafe.model.vocabulary import ToolSpec
    from callsafe.providers.adversities import Variant, read_back

    document = _run(script)
    tools = {name: ToolSpec(schema=schema) for name, schema in document["tools"].items()}
    base = TraceBuilder(tools=tools).turn("t1", response="r1").build()
    problems: list[str] = []
    for stream in document["streams"]:
        variant = Variant(stream["name"], tuple(stream["payloads"]), stream["done"])
        trace = read_back(base, PROTOCOL_OF[script], "ground-truth", "campaigns/ground_truth", variant)
        for row, surface in document["surfaces"].items():
            checked = check_trace(row, trace, TRACE_TIMEOUT)
            assert not checked.missing, (stream["name"], row, checked.note)
            ours = frozenset(stream["surfaces"][surface]["violated"])
            theirs = frozenset(checked.violated) & JUDGED
            listed = STREAM_DIFFERENCES.get((script, stream["name"], surface))
            expected = (ours, theirs) if listed is None else listed[:2]
            if (ours, theirs) != expected or (listed is not None and ours == theirs):
                problems.append(f"{stream['name']} on {surface}: the script {sorted(ours)}, callsafe {sorted(theirs)}")
    assert not problems, "\n".join(problems)
