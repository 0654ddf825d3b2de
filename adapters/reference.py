"""``python -m callsafe.adapters.reference``: the reference implementation behind the
target protocol, so that ``callsafe certify 'exec:python -m callsafe.adapters.reference'``
certifies the same code as ``reference:memory`` through another process. The two giving
the same verdicts is what shows that the protocol loses nothing (a test compares them).

``--store sqlite`` keeps the store as a file in the folder callsafe names for each trace.
"""

from __future__ import annotations

import argparse

from callsafe.adapters.stdio import serve
from callsafe.contract.target import Target
from callsafe.targets.reference import STORES, ReferenceTarget


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m callsafe.adapters.reference")
    parser.add_argument("--store", choices=STORES, default="memory")
    parser.add_argument("--process-per-trace", action="store_true", help="ask callsafe for one process per trace")
    args = parser.parse_args(argv)

    def factory() -> Target:
        return ReferenceTarget(store=args.store)

    return serve(factory, process_per_trace=args.process_per_trace)


if __name__ == "__main__":
    raise SystemExit(main())
