"""``callsafe store``: create a SQLite store explicitly, and check one before a start.

Why a command: opening a store never creates one (a missing or emptied file would start
as new and run every call again), so the first start of a deployment, or an operator who
has restored a database and wants a new witness for it, says so here. Registered on the
``callsafe`` group by :func:`callsafe.cli.main._register_extensions`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from callsafe.cli.console import echo

__all__ = ["store_cmd"]


@click.group("store")
def store_cmd() -> None:
    """Create or check the reference implementation's SQLite store."""


_witness = click.option(
    "--witness",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where the store's witness is kept (default: PATH.witness). A witness on another volume also "
    "detects the loss of the database's whole folder.",
)


def _open(path: Path, witness: Path | None, *, create: bool) -> tuple[str, int]:
    from callsafe.reference_impl.errors import StoreError
    from callsafe.reference_impl.sqlite_store import SqliteStore

    try:
        store = SqliteStore(path, create=create, witness=witness if witness is not None else True)
    except StoreError as exc:
        echo(f"refused ({exc.fault}): {exc}", err=True)
        sys.exit(1)
    try:
        return store.store_id, store.high_water
    finally:
        store.close()


@store_cmd.command("init")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@_witness
def init_cmd(path: Path, witness: Path | None) -> None:
    """Create the store at PATH (or, for a database that exists and is intact, write its
    witness anew). Refused when a witness says decisions were made that PATH does not hold."""
    store_id, high_water = _open(path, witness, create=True)
    echo(f"store {store_id} at {path}: ledger up to row {high_water}; witness {witness or f'{path}.witness'}")


@store_cmd.command("check")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@_witness
def check_cmd(path: Path, witness: Path | None) -> None:
    """Open the store at PATH as a start would (integrity check, identity, high-water
    mark against the witness); exit 1 with what to check when it would be refused."""
    store_id, high_water = _open(path, witness, create=False)
    echo(f"store {store_id} at {path}: intact, ledger up to row {high_water}")


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _duration(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``3600s`` or a number of seconds."""
    unit = _UNITS.get(text[-1:].lower())
    number = text[:-1] if unit else text
    try:
        value = float(number) * (unit or 1)
    except ValueError:
        raise click.BadParameter(f"{text!r}: a duration such as 30d, 12h, 90m or 3600s") from None
    if not value >= 0:
        raise click.BadParameter(f"{text!r}: a duration is not negative")
    return value


@store_cmd.command("prune")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@_witness
@click.option("--older-than", "older", required=True, help="Delete ledger and audit rows older than this (30d, 12h).")
@click.option(
    "--window",
    default=None,
    help="Also delete the turns over for longer than this replay window (7d, 12h), with their calls and "
    "outcomes, and the terminal event ids recorded before it. Never shorter than replays can arrive.",
)
@click.option(
    "--keep",
    type=click.IntRange(min=0),
    default=10_000,
    show_default=True,
    help="Always keep the newest N rows of each (and the newest N over turns).",
)
def prune_cmd(path: Path, witness: Path | None, older: str, window: str | None, keep: int) -> None:
    """Delete old ledger and audit rows of the store at PATH (retention); with --window,
    also the finished turns and terminal event ids past the replay window. Never deletes
    what a restart needs (open calls, calls claimed without an outcome, live turns,
    quarantines, disabled tools, leases) nor anything younger than the window; the newest
    ledger row always stays."""
    import time

    from callsafe.reference_impl.errors import StoreError
    from callsafe.reference_impl.retention import Retention
    from callsafe.reference_impl.sqlite_store import SqliteStore

    now = time.time()
    records = _duration(older)
    span = _duration(window) if window is not None else None
    try:
        store = SqliteStore(path, witness=witness if witness is not None else True)
    except StoreError as exc:
        echo(f"refused ({exc.fault}): {exc}", err=True)
        sys.exit(1)
    try:
        if span is None:
            gone = store.prune(now - records, keep)
        else:  # one pass, as many batches as it takes
            policy = Retention(window=span, keep=keep, records=records, batch=5_000, max_batches=sys.maxsize)
            gone = store.prune_retained(policy, now)
    except StoreError as exc:
        echo(f"failed ({exc.fault}): {exc}", err=True)
        sys.exit(1)
    finally:
        store.close()
    echo(f"pruned {path}: {gone['ledger']} ledger row(s), {gone['audit']} audit row(s) older than {older}")
    if span is not None:
        echo(
            f"  and {gone['turns']} finished turn(s) with {gone['calls']} call(s), {gone['terminal_ids']} terminal "
            f"id(s) past the replay window of {window}"
        )
