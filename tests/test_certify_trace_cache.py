"""The on-disk cache of traces that depend only on callsafe's source (the z3-synthesised
ones): a second process reads what the first built, equal trace for trace; a file that is
not ours is rebuilt; the cache can be turned off; a disk that cannot be written costs
only the saving."""

from __future__ import annotations

from pathlib import Path

import pytest

from callsafe.certify import harness
from callsafe.certify.trace_cache import cache_dir, cached_traces, source_digest
from callsafe.generators.catalog import CATALOG

TRACES = tuple(s.trace for s in CATALOG[:3])


def _counting(calls: list[int]) -> object:
    def build() -> tuple[object, ...]:
        calls.append(1)
        return TRACES

    return build


def test_the_second_read_comes_from_disk_equal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALLSAFE_CACHE_DIR", str(tmp_path))
    calls: list[int] = []
    first = cached_traces("t", _counting(calls))  # type: ignore[arg-type]
    second = cached_traces("t", _counting(calls))  # type: ignore[arg-type]
    assert first == second == TRACES and len(calls) == 1
    assert [p.name for p in tmp_path.iterdir()] == [f"t-{source_digest()}.json"]


def test_a_file_that_is_not_ours_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALLSAFE_CACHE_DIR", str(tmp_path))
    (tmp_path / f"t-{source_digest()}.json").write_text('[{"events": "not a list"}]')
    calls: list[int] = []
    assert cached_traces("t", _counting(calls)) == TRACES and calls == [1]  # type: ignore[arg-type]
    assert cached_traces("t", _counting(calls)) == TRACES and calls == [1]  # type: ignore[arg-type]


def test_off_builds_every_time_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALLSAFE_CACHE_DIR", "off")
    assert cache_dir() is None
    calls: list[int] = []
    cached_traces("t", _counting(calls))  # type: ignore[arg-type]
    cached_traces("t", _counting(calls))  # type: ignore[arg-type]
    assert calls == [1, 1]


def test_a_directory_that_cannot_be_written_costs_only_the_saving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("CALLSAFE_CACHE_DIR", str(blocker / "cache"))  # under a file: mkdir fails
    calls: list[int] = []
    assert cached_traces("t", _counting(calls)) == TRACES and calls == [1]  # type: ignore[arg-type]


def test_the_synthesised_traces_read_back_equal_to_z3s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALLSAFE_CACHE_DIR", "off")
    harness._synthesised.cache_clear()
    fresh = harness._synthesised()
    monkeypatch.setenv("CALLSAFE_CACHE_DIR", str(tmp_path))
    harness._synthesised.cache_clear()
    written = harness._synthesised()
    harness._synthesised.cache_clear()
    read = harness._synthesised()
    harness._synthesised.cache_clear()
    assert fresh == written == read and len(read) > 10
    assert (tmp_path / f"synthesis-{source_digest()}.json").is_file()
