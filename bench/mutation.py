"""Mutation testing of ``reference_impl/`` with the default certification as the only killer.

Why: the mutant zoo (``campaigns/mutants.py``) measures the zoo, written by the same people
as the certifier. cosmic-ray (PyPI, ``callsafe[mutation]``) writes the mutants here: every
operator it knows, at every place it applies, in the modules ``callsafe certify
reference:memory`` runs. A mutant is killed when that certification, with its default
options, exits non-zero (a violation, a crash) or runs past the timeout; the test suite is
not consulted.

Why cosmic-ray and not mutmut: mutmut 3 runs pytest on ``tests/`` with its own trampolines
in a ``mutants/`` copy, so a CLI command cannot be the killer; cosmic-ray's
``test-command`` is any command.

How the source is kept safe: cosmic-ray mutates files on disk, so the run works on a copy
of the working tree (tracked and untracked, not ignored files) in a temporary folder named
``callsafe``, imported through ``PYTHONPATH``; the worktree and its editable install are
never touched.

Why a sample: each certification takes seconds and there are about 1,500 mutants, so the
full run takes hours on a shared machine. ``--sample N`` draws N mutants, stratified by
module in proportion to its mutant count, from a seeded generator (``--seed``); the rest
are marked skipped in cosmic-ray's session (its own mechanism, as its filters do).
``--only`` re-runs named mutants (``module:operator:occurrence``) after a judge change.

Usage: ``python -m bench.mutation [--sample N] [--seed S] [--modules a.py,b.py]
[--timeout SECONDS] [--only SPEC,...] [--json OUT]``; ``make mutation`` runs the default.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = ["DEFAULT_MODULES", "Mutant", "main", "run"]

ROOT = Path(__file__).resolve().parent.parent

# The modules `callsafe certify reference:memory` runs. Left out: the SQLite and
# PostgreSQL stores (the memory target never loads them), conformance.py (a checking
# helper for tests and benchmarks, not part of the implementation) and errors.py (two
# exception classes).
DEFAULT_MODULES: tuple[str, ...] = (
    "buffer.py",
    "core.py",
    "driver.py",
    "effects.py",
    "memory_store.py",
    "redaction.py",
    "scanner.py",
    "schema_check.py",
    "store.py",
)
KILLER: tuple[str, ...] = ("certify", "reference:memory")


@dataclass(frozen=True)
class Mutant:
    """One mutant and what the certification made of it."""

    module: str
    operator: str
    occurrence: int
    line: int
    outcome: str  # killed | survived | timeout | incompetent | skipped
    diff: str

    @property
    def spec(self) -> str:
        return f"{self.module}:{self.operator}:{self.occurrence}"

    def to_json(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "module": self.module,
            "operator": self.operator,
            "occurrence": self.occurrence,
            "line": self.line,
            "outcome": self.outcome,
            "diff": self.diff,
        }


def _copy_tree(dest: Path) -> None:
    """The working tree (tracked and untracked files, not ignored ones) into ``dest``."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, check=True, capture_output=True
    ).stdout.split(b"\0")
    for raw in names:
        if not raw:
            continue
        rel = raw.decode()
        src = ROOT / rel
        if not src.is_file():
            continue  # deleted in the worktree, not yet in the index
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)


def _config(work: Path, modules: Sequence[str], timeout: float, extra: Sequence[str]) -> str:
    paths = ", ".join(json.dumps(f"callsafe/reference_impl/{m}") for m in modules)
    command = " ".join([sys.executable, "-m", "callsafe", *KILLER, *extra, "--report", str(work / "report")])
    return (
        "[cosmic-ray]\n"
        f"module-path = [{paths}]\n"
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(command)}\n\n"
        '[cosmic-ray.distributor]\nname = "local"\n'
    )


Select = Callable[[str, str, int], bool]  # (module, operator, line) -> run it?


def _select(db: Any, sample: int | None, seed: int, only: set[str] | None, select: Select | None) -> int:
    """Mark every work item outside the sample (or outside ``only``, or not chosen by
    ``select``) skipped; how many remain."""
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    items = list(db.work_items)
    by_module: dict[str, list[Any]] = defaultdict(list)
    for item in items:
        by_module[Path(item.mutations[0].module_path).name].append(item)
    keep: set[str] = set()
    if only is not None or select is not None:
        for item in items:
            m = item.mutations[0]
            module, operator = Path(m.module_path).name, m.operator_name.removeprefix("core/")
            if (only is not None and f"{module}:{operator}:{m.occurrence}" in only) or (
                select is not None and select(module, operator, m.start_pos[0])
            ):
                keep.add(item.job_id)
    elif sample is None or sample >= len(items):
        keep = {item.job_id for item in items}
    else:
        rng = random.Random(seed)
        for module in sorted(by_module):
            group = sorted(by_module[module], key=lambda i: (i.mutations[0].operator_name, i.mutations[0].occurrence))
            share = max(1, round(sample * len(group) / len(items)))
            keep.update(i.job_id for i in rng.sample(group, min(share, len(group))))
    skipped = [item.job_id for item in items if item.job_id not in keep]
    if skipped:
        db.set_multiple_results(skipped, WorkResult(output="not sampled", worker_outcome=WorkerOutcome.SKIPPED))
    return len(keep)


def _outcome(result: Any) -> str:
    if result.worker_outcome.value == "skipped":
        return "skipped"
    if result.test_outcome is None:
        return "incompetent"
    if result.test_outcome.value == "killed":
        return "timeout" if (result.output or "").strip() == "timeout" else "killed"
    return str(result.test_outcome.value)


def _mutants(db: Any) -> list[Mutant]:
    out = []
    for item, result in db.completed_work_items:
        m = item.mutations[0]
        out.append(
            Mutant(
                Path(m.module_path).name,
                m.operator_name.removeprefix("core/"),
                m.occurrence,
                m.start_pos[0],
                _outcome(result),
                result.diff or "",
            )
        )
    return sorted(out, key=lambda x: (x.module, x.line, x.operator, x.occurrence))


def run(
    modules: Sequence[str] = DEFAULT_MODULES,
    sample: int | None = 160,
    seed: int = 0,
    timeout: float = 90.0,
    only: set[str] | None = None,
    log: Any = print,
    select: Select | None = None,
    extra: Sequence[str] = (),
) -> dict[str, Any]:
    """One mutation run; its summary (counts, score, every non-skipped mutant). ``extra``:
    more options for the certification (none: the default run, as ``make mutation``)."""
    from cosmic_ray.work_db import WorkDB, use_db

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="callsafe-mutation-") as tmp:
        work = Path(tmp)
        _copy_tree(work / "callsafe")
        (work / "cr.toml").write_text(_config(work, modules, timeout, extra))
        env = dict(os.environ, PYTHONPATH=str(work))
        cr = [sys.executable, "-m", "cosmic_ray.cli"]
        subprocess.run([*cr, "init", "cr.toml", "session.sqlite"], cwd=work, env=env, check=True, capture_output=True)
        with use_db(str(work / "session.sqlite"), WorkDB.Mode.open) as db:
            total = db.num_work_items
            chosen = _select(db, sample, seed, only, select)
        log(f"{total} mutants in {', '.join(modules)}; running {chosen} (timeout {timeout:g} s each)")
        subprocess.run([*cr, "exec", "cr.toml", "session.sqlite"], cwd=work, env=env, check=True, capture_output=True)
        with use_db(str(work / "session.sqlite"), WorkDB.Mode.open) as db:
            mutants = [m for m in _mutants(db) if m.outcome != "skipped"]
    counts: dict[str, int] = defaultdict(int)
    for m in mutants:
        counts[m.outcome] += 1
    killed = counts["killed"] + counts["timeout"]
    ran = killed + counts["survived"]
    return {
        "killer": "callsafe " + " ".join([*KILLER, *extra]) + ("" if extra else " (default options)"),
        "modules": list(modules),
        "mutants_total": total,
        "sample": sample,
        "seed": seed,
        "ran": len(mutants),
        "counts": dict(counts),
        "score": killed / ran if ran else None,
        "seconds": round(time.monotonic() - started, 1),
        "timeout": timeout,
        "mutants": [m.to_json() for m in mutants],
    }


def _changed_line(diff: str) -> tuple[str, str]:
    """The original and the mutated line of a one-line mutation diff."""
    minus = next((ln[1:].strip() for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")), "")
    plus = next((ln[1:].strip() for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")), "")
    return minus, plus


def _reading(spec: str, original: str) -> tuple[str, str, str] | None:
    """The reading recorded for this mutant: its spec's reading of this original line, or
    the same operator's reading of the same line under another occurrence number (a change
    elsewhere in the module renumbers every later occurrence of an operator; the line and
    the operator are what a reading is about), only when every such reading agrees (two
    places on one line read apart stay unclassified)."""
    from bench.mutation_survivors import READINGS, SURVIVORS

    exact = [r for r in SURVIVORS.get(spec, ()) if r[0] == original]
    if exact:
        return exact[0]
    operator = spec.rsplit(":", 1)[0]
    same = {(k, r) for s, line, k, r in READINGS if line == original and s.rsplit(":", 1)[0] == operator}
    if len(same) != 1:
        return None
    kind, reason = next(iter(same))
    return original, kind, reason


ANNOTATION: Final = "a type annotation: never evaluated (from __future__ import annotations)"


def _common(a: str, b: str) -> int:
    """The length of the longest common prefix of two texts."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def _in_annotation(module: str, line: int, original: str, mutated: str) -> bool:
    """Whether the mutation changes only a type annotation of a module that never evaluates
    its annotations: read from the module's source by its syntax tree, and only while that
    source still has the mutated line as it was (an edited file proves nothing)."""
    path = ROOT / "reference_impl" / module
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    lines = source.splitlines()
    if not original or not 0 < line <= len(lines) or lines[line - 1].strip() != original:
        return False
    future = any(
        isinstance(node, ast.ImportFrom)
        and node.module == "__future__"
        and any(a.name == "annotations" for a in node.names)
        for node in tree.body
    )
    if not future:
        return False
    prefix = _common(original, mutated)
    suffix = _common(original[prefix:][::-1], mutated[prefix:][::-1])
    indent = len(lines[line - 1]) - len(lines[line - 1].lstrip())
    start, end = indent + prefix, indent + len(original) - suffix
    annotations = [
        a
        for node in ast.walk(tree)
        for a in (
            [node.annotation]
            if isinstance(node, (ast.arg, ast.AnnAssign))
            else [node.returns]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            else []
        )
        if a is not None
    ]
    return any(
        a.lineno == a.end_lineno == line and a.col_offset <= start and end <= (a.end_col_offset or 0)
        for a in annotations
    )


def classify(summary: dict[str, Any]) -> dict[str, Any]:
    """The survivors with the reading recorded for each in :mod:`bench.mutation_survivors`
    (matched by spec and original line, or by operator and original line when only the
    occurrence number moved: a changed line is "unclassified", never a stale reason; a
    change inside an annotation is read from the source), and the score over the mutants
    that are not equivalent."""

    rows = []
    equivalent = 0
    unreachable = 0
    for m in summary["mutants"]:
        if m["outcome"] != "survived":
            continue
        original, mutated = _changed_line(m["diff"])
        known = _reading(m["spec"], original)
        if known is not None:
            kind, reason = known[1], known[2]
        elif _in_annotation(m["module"], m["line"], original, mutated):
            kind, reason = "equivalent", ANNOTATION
        else:
            kind, reason = "unclassified", "not yet read"
        equivalent += kind == "equivalent"
        unreachable += kind == "unreachable"
        rows.append({**m, "original": original, "mutated": mutated, "class": kind, "reason": reason})
    killed = summary["counts"].get("killed", 0) + summary["counts"].get("timeout", 0)
    ran = killed + summary["counts"].get("survived", 0)
    since = sum(r["class"] == "killed since" for r in rows)
    relevant = ran - equivalent
    reachable = relevant - unreachable
    return {
        "survivors": rows,
        "equivalent": equivalent,
        "unreachable": unreachable,
        "killed_since": since,
        # an unreachable mutant is not equivalent (it changes what a failing or second store
        # would see): it counts as a survivor here, and only the second score sets it aside
        "score_non_equivalent": (killed + since) / relevant if relevant else None,
        "score_reachable": (killed + since) / reachable if reachable else None,
    }


def section(summary: dict[str, Any], command: str) -> Any:
    """The ``bench/RESULTS.md`` section for a run."""
    from bench.common import Section

    read = classify(summary)
    c = summary["counts"]
    killed = c.get("killed", 0) + c.get("timeout", 0)
    sampled = (
        f"a seeded sample of {summary['ran']} (seed {summary['seed']}, stratified by module)"
        if summary["sample"]
        else f"{summary['ran']} run"
    )
    lines = [
        "## Mutation testing: `reference_impl/` against the default certification",
        "",
        f"Mutants by cosmic-ray {_version()} (every operator it has), killed only by `{summary['killer']}`"
        f" exiting non-zero or running past {summary['timeout']:g} s; the test suite plays no part. "
        f"{summary['mutants_total']} mutants in {', '.join(summary['modules'])}; {sampled}, "
        f"in {summary['seconds']:.0f} s on this shared 2-CPU machine (one mutant at a time).",
        "",
        "| mutants run | killed | timed out | survived | killed since by a judge or generator change "
        "| equivalent (read) | unreachable by the killer | score | score over non-equivalent, with those killed "
        "since | the same without the unreachable |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {summary['ran']} | {c.get('killed', 0)} | {c.get('timeout', 0)} | {c.get('survived', 0)} | "
        f"{read['killed_since']} | {read['equivalent']} | {read['unreachable']} | {_pct(summary['score'])} | "
        f"**{_pct(read['score_non_equivalent'])}** | {_pct(read['score_reachable'])} |",
        "",
        f"Killed {killed} of {summary['ran']}. Each survivor, with what it needs (`equivalent`: no behaviour the "
        "spec judges differs; `unreachable`: a behaviour differs, but only with a second "
        "replica on the same store or in the guard's bounded memory (`forget_over_turns`), which the killer "
        "(`reference:memory`, one process, every turn kept) never has: a survivor, "
        "counted in the score; `generator`: a trace the default run does not generate would kill it; "
        "`killed since`: a judge or generator change after the run kills it; "
        "`unclassified`: not yet read):",
        "",
        "| mutant | line | change | class | reason |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in read["survivors"]:
        change = f"`{r['original']}` -> `{r['mutated']}`".replace("|", "\\|")
        lines.append(f"| {r['spec']} | {r['line']} | {change} | {r['class']} | {r['reason']} |")
    if summary.get("note"):
        lines += ["", summary["note"]]
    lines += ["", f"Command: `{summary.get('command', command)}`"]
    return Section("mutation", "Mutation testing", "\n".join(lines) + "\n")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _version() -> str:
    from importlib.metadata import version

    return version("cosmic-ray")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mutation", description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=160, help="mutants to run (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--modules", default=",".join(DEFAULT_MODULES))
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds per certification; past it: killed")
    parser.add_argument("--only", default="", help="comma-separated module:operator:occurrence to run")
    parser.add_argument("--json", type=Path, help="write the summary here")
    parser.add_argument("--from-json", type=Path, help="report a summary written before instead of running")
    parser.add_argument("--results", type=Path, help="write the section into this results file (bench/RESULTS.md)")
    args = parser.parse_args(argv)
    only = {s for s in args.only.split(",") if s} or None
    if args.from_json:
        summary = json.loads(args.from_json.read_text())
    else:
        modules = [m for m in args.modules.split(",") if m]
        summary = run(modules, args.sample or None, args.seed, args.timeout, only, print)
    summary.setdefault("timeout", args.timeout)
    summary.setdefault("command", "python -m bench.mutation " + " ".join(argv if argv is not None else sys.argv[1:]))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    c = summary["counts"]
    score = summary["score"]
    print(
        f"mutation score {score:.1%}: killed {c.get('killed', 0)}, timed out {c.get('timeout', 0)}, "
        f"survived {c.get('survived', 0)}, incompetent {c.get('incompetent', 0)} of {summary['ran']} run "
        f"({summary['mutants_total']} mutants in scope), {summary['seconds']} s"
        if score is not None
        else "no mutant ran"
    )
    read = classify(summary)
    print(
        f"{read['equivalent']} survivors read as equivalent, {read['unreachable']} unreachable by the killer; "
        f"score over the non-equivalent {_pct(read['score_non_equivalent'])} "
        f"({_pct(read['score_reachable'])} without the unreachable)"
    )
    for r in read["survivors"]:
        print(f"  survived {r['spec']} line {r['line']}: {r['mutated']}  [{r['class']}: {r['reason']}]")
    if args.results:
        from bench.__main__ import _FILE_HEADER
        from bench.common import update_results

        # the command of the run (a --from-json report keeps the command that measured it)
        update_results(args.results, _FILE_HEADER, [section(summary, summary["command"])])
        print(f"wrote {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
