"""Coverage-guided fuzzing of the whole pipeline with atheris (libFuzzer): SSE bytes of a
protocol -> its parser -> the reference implementation.

Run by ``tests/test_reliability_fuzz.py`` (which skips when atheris is not installed), or
by hand::

    python tests/atheris_pipeline.py -max_total_time=600 -max_len=4096

The first byte chooses the protocol and the second where the bytes are cut in two chunks;
the rest is the stream. A crash is any exception but the implementations' typed ones, a
hang (libFuzzer's ``-timeout``), or a call that ran although the events do not justify it
(:func:`reliability_pipeline.invalid_executions`).
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["callsafe"]):
    from reliability_pipeline import PROTOCOLS, invalid_executions, seeds, through, tools_for


def one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    protocol = PROTOCOLS[data[0] % len(PROTOCOLS)]
    body = data[2:]
    cut = data[1] * len(body) // 255
    outcome = through(protocol, [body[:cut], body[cut:]])
    if outcome.typed_errors:
        raise AssertionError(f"the core raised on parsed events: {outcome.typed_errors}")
    problems = invalid_executions(outcome.events, tools_for(outcome.events), outcome.executed)
    if problems:
        raise AssertionError(problems)


def main() -> None:
    for protocol in PROTOCOLS:  # warm the seed cache outside the measured inputs
        seeds(protocol)
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
