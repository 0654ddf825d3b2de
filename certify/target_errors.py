"""What a target did wrong that is not an invariant's business: it raised, it hung, or its
process died. Each is a :class:`TargetError`, recorded on the run of the trace it happened
in and carried into the judgement, the report and the exit status.

Why a record of its own, not a line of text: a target error is a verdict. A trace whose
run the target broke off was never really run, so what the invariants say about it does
not establish anything (the harness counts such traces apart, and an invariant checked
only on them is "not established", never "holds"); and whoever reads the report needs the
traceback (or, for a hang, the stack of the hung thread, or for a subprocess target the
tail of its stderr) to fix it. Executors that run targets elsewhere (subprocess targets,
worker processes) build the same record, so every report reads the same.

The kinds:

* ``"error"``: an exception from the factory, ``start``, ``receive``, ``receive_wire``,
  ``end_stream``, ``restart`` or ``close`` (``where`` says which);
* ``"hang"``: the trace did not finish within the per-trace timeout; ``traceback`` is the
  stack of the thread that was stuck, ``step`` the event it was stuck on;
* ``"crash"``: the process that ran the target died (a subprocess target, or a worker),
  ``stderr`` has what it last wrote.
"""

from __future__ import annotations

import traceback as tb
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = ["KINDS", "WHERE", "WIRE_READS", "TargetError", "TraceTimeout", "error_from_exception"]

Kind = Literal["error", "hang", "crash"]
KINDS: Final = ("error", "hang", "crash")
# The points at which the harness calls into a target (and "process" for a process that died).
WHERE: Final = (
    "factory",
    "start",
    "receive",
    "receive_wire",
    "end_stream",
    "restart",
    "close",
    "validator",
    "process",
)
WIRE_READS: Final = ("receive_wire", "end_stream")  # a library's own way of failing a stream
_TEXT_LIMIT: Final = 8000  # characters of traceback or stderr kept per error


@dataclass(frozen=True)
class TargetError:
    """One failure of the target during one trace's run (see the module docstring)."""

    kind: Kind
    where: str  # one of WHERE
    message: str  # "ValueError: boom", or "no answer within 5 s"
    step: int | None = None  # the event being delivered, None outside delivery
    traceback: str = ""  # the exception's traceback, or the hung thread's stack
    stderr: str = ""  # the tail of a subprocess target's stderr

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"target error kind {self.kind!r}; known: {', '.join(KINDS)}")

    @property
    def breaks_run(self) -> bool:
        """Whether the run stops being evidence. Not for an exception a provider-protocol
        target raised while reading its stream (``receive_wire``, ``end_stream``): that is
        how client libraries signal a failed stream (an SDK raises on an error payload),
        and the harness goes on as the application's read loop that catches it would, so
        the run is judged as it went; nor for one from ``close``, after every event was
        delivered and observed. Both are still recorded and reported. Every other error,
        every hang and crash, breaks the run."""
        return self.kind != "error" or self.where not in (*WIRE_READS, "close")

    def describe(self) -> str:
        """One line: ``hang in receive at step 3: no answer within 5 s``."""
        label = {"error": "error", "hang": "hang", "crash": "crash"}[self.kind]
        at = f" at step {self.step}" if self.step is not None else ""
        return f"{label} in {self.where}{at}: {self.message}"

    def __str__(self) -> str:
        return self.describe()

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "where": self.where,
            "step": self.step,
            "message": self.message,
            "traceback": self.traceback,
            "stderr": self.stderr,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TargetError:
        return cls(
            kind=data["kind"],
            where=str(data.get("where", "receive")),
            message=str(data.get("message", "")),
            step=data.get("step"),
            traceback=str(data.get("traceback", "")),
            stderr=str(data.get("stderr", "")),
        )


def error_from_exception(exc: BaseException, where: str, step: int | None = None) -> TargetError:
    """The record of an exception the target raised at ``where`` (with its traceback).

    An adapter that runs the target elsewhere (:mod:`callsafe.targets.exec_target`, which
    cannot import the harness) says what kind of failure its exception stands for with two
    attributes: ``target_error_kind`` (``"crash"``, ``"hang"``) and ``stderr_tail`` (lines)."""
    text = "".join(tb.format_exception(type(exc), exc, exc.__traceback__))
    told = getattr(exc, "target_error_kind", "error")
    kind: Kind = "crash" if told == "crash" else "hang" if told == "hang" else "error"
    stderr = "\n".join(str(line) for line in getattr(exc, "stderr_tail", ()))
    return TargetError(
        kind,
        where,
        f"{type(exc).__name__}: {exc}"[:500],
        step,
        text[-_TEXT_LIMIT:],
        stderr[-_TEXT_LIMIT:],
    )


class TraceTimeout(BaseException):
    """Raised inside a target's frame when its trace ran past the per-trace timeout.

    A ``BaseException``, so that the target's own ``except Exception`` does not swallow it;
    ``stack`` is the stack of the thread at the moment it was stopped."""

    def __init__(self, seconds: float, stack: str) -> None:
        super().__init__(f"no answer within {seconds:g} s")
        self.seconds = seconds
        self.stack = stack[-_TEXT_LIMIT:]
