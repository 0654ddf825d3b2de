"""The store's witness: a small file that remembers which store this is and how far its
committed decisions had got, kept where losing the database does not lose it too.

Why: a database that is truncated, unlinked, replaced by an older copy or opened at the
wrong path looks like a new, empty store, and a new store runs every call again. SQLite
cannot tell (a dropped ``-wal`` frame and everything after it vanish without an error),
so the store writes its identity and a *high-water mark* (the highest ledger row id of a
decision it committed) here, after the commit and before anyone acts on the decision,
and compares both when it is opened again: a database whose identity differs, or whose
ledger ends below the mark, is refused (:class:`~callsafe.reference_impl.errors.StoreLost`).

Written with ``write`` + ``fsync`` to a temporary file, ``rename`` over the old one, and
``fsync`` of the folder: a crash leaves the old witness or the new one, never half of one.
The mark is only ever raised by this process; several processes sharing one store may
each write it, and the last writer wins: the mark can lag the database (a lost commit
of the other process is then not seen) but never lead it, so it never refuses a good store.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from dataclasses import dataclass
from pathlib import Path

from callsafe.reference_impl.errors import StoreError, StoreFault

__all__ = ["Witness", "WitnessRecord"]


@dataclass(frozen=True)
class WitnessRecord:
    store_id: str
    high_water: int


def _fault_of(exc: OSError) -> StoreFault:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreFault.DISK_FULL
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return StoreFault.PERMISSION
    return StoreFault.WITNESS


class Witness:
    """The witness file at ``path``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._written: WitnessRecord | None = None

    def read(self) -> WitnessRecord | None:
        """What the witness says; None when there is no witness file."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"cannot read the store's witness {self.path}: {exc.strerror}", _fault_of(exc)) from exc
        try:
            data = json.loads(text)
            record = WitnessRecord(str(data["store_id"]), int(data["high_water"]))
        except (ValueError, KeyError, TypeError):
            raise StoreError(
                f"the store's witness {self.path} is damaged; restore it from a backup, or if the database is "
                "known to be complete, remove it and run `callsafe store init` on the database",
                StoreFault.CORRUPT,
            ) from None
        self._written = record
        return record

    def write(self, record: WitnessRecord) -> None:
        """Replace the witness with ``record``, durably (see the module docstring)."""
        if self._written == record:
            return
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        payload = json.dumps({"store_id": record.store_id, "high_water": record.high_water}).encode()
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, payload)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
            folder = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise StoreError(f"cannot write the store's witness {self.path}: {exc.strerror}", _fault_of(exc)) from exc
        self._written = record

    def advance(self, store_id: str, high_water: int) -> None:
        """Raise the mark to ``high_water`` (never lower it: see the module docstring)."""
        known = self._written
        if known is not None and known.store_id == store_id and known.high_water >= high_water:
            return
        self.write(WitnessRecord(store_id, high_water))
