"""The store's witness: a small file that remembers which store this is and how far its
committed decisions had got, kept where losing the database does not lose it too.

Why: a database that is truncated, unlinked, replaced by an older copy or opened at the
wrong path looks like a new, empty store, and a new store runs every call again. SQLite
cannot tell (a dropped ``-wal`` frame and everything after it vanish without an error),
so the store writes its identity and a *high-water mark* (the highest ledger row id of a
decision it committed) here, after the commit and before anyone acts on the decision,
and compares both when it is opened again: a database whose identity differs, or whose
ledger ends below the mark, is refused (:class:`~callsafe.reference_impl.errors.StoreLost`).

How it is written: the file is made once (written to a temporary file, ``fsync``,
``rename``, ``fsync`` of the folder) with two fixed-size slots; each later mark goes to
the older slot in place (``pwrite`` + ``fdatasync``: one disk flush per decision, where a
new file per mark cost two and a rename, 4x the time of a claim as measured by
``python -m bench --only durable``). Each slot carries a sequence number and a CRC, so a
write torn by a power cut leaves the other slot, one mark older, to be read.

Several processes on one store may each raise the mark; a process only ever writes a mark
it committed itself, so the mark can lag the database (a lost commit of another process is
then not seen) but never lead it: it never refuses a good store.
"""

from __future__ import annotations

import contextlib
import errno
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

from callsafe.reference_impl.errors import StoreError, StoreFault

__all__ = ["Witness", "WitnessRecord"]

_SLOT = 128
_MAGIC = "callsafe-witness-1"


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


def _slot(record: WitnessRecord, sequence: int) -> bytes:
    body = f"{_MAGIC} {record.store_id} {record.high_water} {sequence}"
    line = f"{body} {zlib.crc32(body.encode()):08x}"
    if len(line) >= _SLOT:
        raise StoreError("a store identity too long for its witness", StoreFault.OTHER)
    return line.encode().ljust(_SLOT - 1) + b"\n"


def _parse(raw: bytes) -> tuple[int, WitnessRecord] | None:
    try:
        body, crc = raw.decode().strip().rsplit(" ", 1)
        magic, store_id, high_water, sequence = body.split(" ")
        if magic != _MAGIC or int(crc, 16) != zlib.crc32(body.encode()):
            return None
        return int(sequence), WitnessRecord(store_id, int(high_water))
    except ValueError:
        return None


class Witness:
    """The witness file at ``path``."""

    def __init__(self, path: str | Path, *, sync: bool = True) -> None:
        self.path = Path(path)
        self._sync = sync  # False: survives a process crash, not a power cut (a store that does not either)
        self._known: WitnessRecord | None = None
        self._sequence = 0

    def _damaged(self) -> StoreError:
        return StoreError(
            f"the store's witness {self.path} is damaged; restore it from a backup, or if the database is "
            "known to be complete, remove it and run `callsafe store init` on the database",
            StoreFault.CORRUPT,
        )

    def read(self) -> WitnessRecord | None:
        """What the witness says (its newest intact slot); None when there is no witness."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"cannot read the store's witness {self.path}: {exc.strerror}", _fault_of(exc)) from exc
        slots = [_parse(raw[i : i + _SLOT]) for i in (0, _SLOT)]
        intact = [s for s in slots if s is not None]
        if not intact:
            raise self._damaged()
        self._sequence, self._known = max(intact, key=lambda s: s[0])
        return self._known

    def create(self, record: WitnessRecord) -> None:
        """A new witness file holding ``record`` (both slots), made atomically."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, _slot(record, 0) + _slot(record, 1))  # slot n % 2 holds sequence n
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
        self._known, self._sequence = record, 1

    def advance(self, store_id: str, high_water: int) -> None:
        """Raise the mark to ``high_water``: never lower, durable before this returns."""
        known = self._known
        if known is not None and known.store_id == store_id and known.high_water >= high_water:
            return
        record = WitnessRecord(store_id, high_water)
        if known is None or known.store_id != store_id:
            self.create(record)
            return
        sequence = self._sequence + 1
        try:
            fd = os.open(self.path, os.O_WRONLY)
            try:
                os.pwrite(fd, _slot(record, sequence), (sequence % 2) * _SLOT)
                if self._sync:
                    os.fdatasync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise StoreError(f"cannot write the store's witness {self.path}: {exc.strerror}", _fault_of(exc)) from exc
        self._known, self._sequence = record, sequence
