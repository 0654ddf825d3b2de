"""A lost store never starts as new (issue 23, item 1): the crash tests' scenario (2
tenants, 11 calls, 6 of which run) is run to its end by one process, the store is then
damaged the way an operator, a redeploy or a disk does it, and a fresh process restarts
on it with a full re-delivery and with the provider's reconnect replay. Every execution
is counted in the child's fsync'd journal, as the crash tests count them.

Each case must be refused at open with a typed
:class:`~callsafe.reference_impl.errors.StoreLost` (or, for damaged pages, the corrupt
fault), and no call may run again. The sweeps (one changed byte in every page of the
main file, in every frame of the ``-wal``) report how each damage was taken, and assert
the same two things for every one of them: a typed refusal or an open that runs nothing
again; never an untyped error.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import reliability_child as child
from reliability_child import SCENARIO, ChildConfig, journal_entries, wire_events
from reliability_support import execution_counts, launch, report_figures

from callsafe.model.vocabulary import Event
from callsafe.reference_impl.errors import StoreError, StoreFault
from callsafe.reference_impl.sqlite_store import SqliteStore

RUN = 6  # calls the scenario runs
PAGE = 4096
WAL_HEADER, FRAME_HEADER = 32, 24


def _child(cfg: ChildConfig, result: Path) -> None:
    """The crash tests' child, reporting a typed error's class and fault (exit 3)."""
    try:
        child.run(cfg)
    except StoreError as exc:
        result.write_text(json.dumps({"type": type(exc).__name__, "fault": exc.fault.value, "text": str(exc)}))
        os._exit(3)
    except BaseException as exc:  # an untyped error: what the issue says must never happen
        result.write_text(json.dumps({"type": type(exc).__name__, "fault": None, "text": str(exc)}))
        os._exit(4)


class Deployment:
    """One store folder, its journal, and the processes that take turns on it."""

    def __init__(self, folder: Path, *, witness_apart: bool = False, existing: bool = False) -> None:
        self.folder = folder
        self.db = folder / "store" / "callsafe.sqlite3"
        self.witness = folder / "elsewhere" / "callsafe.witness" if witness_apart else None
        self.journal = folder / "journal"
        self.runs = 0
        if existing:  # a copy of another deployment's folder
            return
        self.db.parent.mkdir(parents=True)
        if self.witness is not None:
            self.witness.parent.mkdir()
        SqliteStore(self.db, create=True, witness=self.witness or True).close()  # `callsafe store init`

    def process(
        self, events: list[Event], *, db: Path | None = None, kill_before_close: bool = False
    ) -> dict[str, Any]:
        """One process on the store: ``{"code": exit code, ...the typed error, if any}``."""
        self.runs += 1
        result = self.folder / f"result-{self.runs}.json"
        cfg = ChildConfig(
            store=db or self.db,
            journal=self.journal,
            events=events,
            witness=self.witness,
            extra={"kill_before_close": kill_before_close},
        )
        code = launch(_child, cfg, result)
        out: dict[str, Any] = {"code": code}
        if result.exists():
            out.update(json.loads(result.read_text()))
        return out

    def executions(self) -> Counter[Any]:
        return execution_counts(journal_entries(self.journal))

    def files(self) -> dict[str, Path]:
        return {suffix or "db": Path(f"{self.db}{suffix}") for suffix in ("", "-wal", "-shm")}


def _ran_once(dep: Deployment, expected: int = RUN) -> None:
    counts = dep.executions()
    assert sum(counts.values()) == expected and set(counts.values()) == {1}, counts


def _restarts_refused(dep: Deployment, fault: StoreFault, db: Path | None = None, ran: int = RUN) -> list[str]:
    """A full re-delivery and a reconnect replay, each in a fresh process: both refused
    with ``fault``, and nothing ran again. The refusals' texts."""
    texts = []
    for events in (SCENARIO, wire_events(SCENARIO)):
        out = dep.process(events, db=db)
        assert out["code"] == 3 and out["type"] == "StoreLost", out
        assert out["fault"] == fault.value, out
        texts.append(out["text"])
    _ran_once(dep, ran)
    return texts


# -- the lost main file ------------------------------------------------------------------


def _truncate(dep: Deployment) -> None:
    dep.db.write_bytes(b"")


def _unlink(dep: Deployment) -> None:
    dep.db.unlink()


def _unlink_all(dep: Deployment) -> None:
    for path in dep.files().values():
        path.unlink(missing_ok=True)


@pytest.mark.parametrize(
    "damage", [_truncate, _unlink, _unlink_all], ids=["truncated-to-0", "unlinked", "unlinked-with-wal-and-shm"]
)
def test_a_missing_or_emptied_store_is_refused_and_nothing_runs_again(
    tmp_path: Path, damage: Callable[[Deployment], None]
) -> None:
    dep = Deployment(tmp_path)
    assert dep.process(SCENARIO)["code"] == 0
    _ran_once(dep)
    damage(dep)
    texts = _restarts_refused(dep, StoreFault.MISSING)
    assert "witness" in texts[0] and "Restore the database" in texts[0]
    assert not dep.db.exists() or dep.db.stat().st_size == 0  # nothing was created in its place


def test_a_wrong_path_after_a_redeploy_is_refused(tmp_path: Path) -> None:
    """The path moved (no database, no witness there): a start never creates a store."""
    dep = Deployment(tmp_path)
    assert dep.process(SCENARIO)["code"] == 0
    wrong = tmp_path / "redeployed" / "callsafe.sqlite3"
    wrong.parent.mkdir()
    texts = _restarts_refused(dep, StoreFault.MISSING, db=wrong)
    assert "callsafe store init" in texts[0]
    assert not wrong.exists()


def test_the_whole_folder_lost_is_seen_by_a_witness_kept_apart(tmp_path: Path) -> None:
    """A witness beside the database goes with its folder (then only "no store" refuses
    the start); one kept on another path still names what was lost."""
    dep = Deployment(tmp_path, witness_apart=True)
    assert dep.process(SCENARIO)["code"] == 0
    shutil.rmtree(dep.db.parent)
    dep.db.parent.mkdir()
    texts = _restarts_refused(dep, StoreFault.MISSING)
    assert "witness" in texts[0]


def test_another_stores_file_in_its_place_is_refused(tmp_path: Path) -> None:
    dep = Deployment(tmp_path)
    assert dep.process(SCENARIO)["code"] == 0
    other = tmp_path / "other.sqlite3"
    SqliteStore(other, create=True, witness=False).close()
    shutil.copyfile(other, dep.db)
    _restarts_refused(dep, StoreFault.MISMATCH)


def test_an_older_copy_restored_is_refused(tmp_path: Path) -> None:
    """A backup taken half-way, put back after the rest ran: its ledger ends below the
    witness's mark. (The globex call in flight at the cut fails at the restart: 5 run.)"""
    dep = Deployment(tmp_path)
    half = len(SCENARIO) // 2
    assert dep.process(SCENARIO[:half])["code"] == 0
    backup = tmp_path / "backup.sqlite3"
    shutil.copyfile(dep.db, backup)
    assert dep.process(SCENARIO)["code"] == 0
    _ran_once(dep, RUN - 1)
    shutil.copyfile(backup, dep.db)
    _restarts_refused(dep, StoreFault.BEHIND, ran=RUN - 1)


# -- the -wal: decisions not yet checkpointed ------------------------------------------------


def _killed_with_everything_in_the_wal(tmp_path: Path) -> Deployment:
    dep = Deployment(tmp_path)
    out = dep.process(SCENARIO, kill_before_close=True)
    assert out["code"] == -9, out
    _ran_once(dep)
    wal = dep.files()["-wal"]
    assert wal.stat().st_size > WAL_HEADER + FRAME_HEADER + PAGE, "the decisions should still be in the -wal"
    return dep


def _wal_frames(wal: Path) -> int:
    return (wal.stat().st_size - WAL_HEADER) // (FRAME_HEADER + PAGE)


def _flip(path: Path, offset: int) -> None:
    with path.open("r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x5A]))


def _wal_deleted(dep: Deployment) -> None:
    dep.files()["-wal"].unlink()
    dep.files()["-shm"].unlink(missing_ok=True)


def _wal_truncated(dep: Deployment) -> None:
    os.truncate(dep.files()["-wal"], 0)


def _wal_half(dep: Deployment) -> None:
    wal = dep.files()["-wal"]
    os.truncate(wal, WAL_HEADER + (_wal_frames(wal) // 2) * (FRAME_HEADER + PAGE))


def _wal_header(dep: Deployment) -> None:
    _flip(dep.files()["-wal"], 20)  # the header's salt: every frame stops matching


def _wal_early_frame(dep: Deployment) -> None:
    _flip(dep.files()["-wal"], WAL_HEADER + FRAME_HEADER + 1000)  # the first frame's page


@pytest.mark.parametrize(
    "damage",
    [_wal_deleted, _wal_truncated, _wal_half, _wal_header, _wal_early_frame],
    ids=["deleted", "truncated-to-0", "truncated-to-half", "header-byte", "early-frame-byte"],
)
def test_a_wal_that_lost_committed_decisions_is_refused(tmp_path: Path, damage: Callable[[Deployment], None]) -> None:
    """SQLite drops a bad frame and every frame after it without an error; the store's
    ledger then ends below its witness's mark."""
    dep = _killed_with_everything_in_the_wal(tmp_path)
    damage(dep)
    texts = _restarts_refused(dep, StoreFault.BEHIND)
    assert "-wal" in texts[0]


# -- sweeps: one changed byte anywhere --------------------------------------------------------


def _sweep(
    tmp_path: Path,
    name: str,
    prepare: Callable[[Path], Deployment],
    places: Callable[[Deployment], list[tuple[Path, int]]],
) -> Counter[str]:
    """For each place: a fresh copy of the prepared store, one byte changed there, a full
    re-delivery. Counted by how it was taken; asserted: typed, and nothing ran again."""
    template = prepare(tmp_path / f"{name}-template")
    seen: Counter[str] = Counter()
    problems = []
    for n, (file, offset) in enumerate(places(template)):
        case = tmp_path / f"{name}-{n}"
        shutil.copytree(template.folder, case)
        dep = Deployment(case, existing=True)
        _flip(case / file.relative_to(template.folder), offset)
        out = dep.process(SCENARIO)
        if out["code"] == 0:
            seen["opened, nothing ran again" if sum(dep.executions().values()) == RUN else "RAN AGAIN"] += 1
        elif out["code"] == 3:
            seen[f"refused: {out['fault']}"] += 1
        else:
            seen[f"untyped: {out.get('type')}"] += 1
        counts = dep.executions()
        if sum(counts.values()) != RUN or set(counts.values()) != {1} or out["code"] not in (0, 3):
            problems.append((file.name, offset, out, dict(counts)))
    report_figures(f"lost store: one byte changed, {name}", dict(seen))
    assert problems == [], problems[:3]
    return seen


def _clean(folder: Path) -> Deployment:
    folder.mkdir()
    dep = Deployment(folder)
    assert dep.process(SCENARIO)["code"] == 0
    return dep


def test_one_changed_byte_in_any_page_of_the_main_file(tmp_path: Path) -> None:
    def places(dep: Deployment) -> list[tuple[Path, int]]:
        pages = dep.db.stat().st_size // PAGE
        return [(dep.db, p * PAGE + at) for p in range(pages) for at in (0, 8, 100, PAGE // 2, PAGE - 1)]

    seen = _sweep(tmp_path, "main file", _clean, places)
    assert sum(n for k, n in seen.items() if k.startswith("refused")) > 0


def test_one_changed_byte_in_any_frame_of_the_wal(tmp_path: Path) -> None:
    def prepare(folder: Path) -> Deployment:
        folder.mkdir()
        return _killed_with_everything_in_the_wal(folder)

    def places(dep: Deployment) -> list[tuple[Path, int]]:
        wal = dep.files()["-wal"]
        frame = FRAME_HEADER + PAGE
        return [(wal, WAL_HEADER + f * frame + at) for f in range(_wal_frames(wal)) for at in (4, FRAME_HEADER + 500)]

    seen = _sweep(tmp_path, "-wal", prepare, places)
    assert seen["refused: history behind its witness"] > 0


# -- the certification target's restart ---------------------------------------------------------


def test_the_reference_targets_restart_never_recreates_its_store(tmp_path: Path) -> None:
    """``start()`` creates the store; ``restart()`` opens it and is refused when the file
    is gone (it used to copy a fresh empty store into its place)."""
    from callsafe.contract.target import TargetEnv
    from callsafe.model.vocabulary import Limits
    from callsafe.reference_impl.errors import StoreLost
    from callsafe.targets.reference import ReferenceTarget

    ran: list[Any] = []
    env = TargetEnv(
        executor=lambda key, *rest: ran.append(key),
        business_validator=lambda key, tool, arguments: None,
        tools=child.TOOLS,
        limits=Limits(),
        observe=lambda observation: None,
        step=lambda: 0,
        clock=lambda: 0.0,
        store_dir=tmp_path,
    )
    target = ReferenceTarget(store="sqlite")
    target.start(env)
    try:
        for event in SCENARIO[:8]:
            target.receive(event)
        assert len(ran) == 1
        target.restart()  # the store is there: fine
        (tmp_path / "callsafe.sqlite3").unlink()
        with pytest.raises(StoreLost) as refused:
            target.restart()
        assert refused.value.fault is StoreFault.MISSING
        assert not (tmp_path / "callsafe.sqlite3").exists()
    finally:
        target.close()
