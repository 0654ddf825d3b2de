"""``python -m bench [--only NAME ...] [--quick] [--repeat N] [--results PATH]``.

Runs every registered benchmark (:mod:`bench.registry`), prints the machine, the exact
command and each benchmark's section (ratios against its floor), and writes the sections
into ``bench/RESULTS.md``. A ``--quick`` run writes nothing unless ``--results`` says
where: its numbers are for smoke tests, not for the record.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from bench.common import ROOT, Config, Section, machine_info, ratio_line, update_results
from bench.registry import BENCHMARKS, load

RESULTS = ROOT / "bench" / "RESULTS.md"

_FILE_HEADER = """# Benchmark results

Written by `python -m bench` (run from the repository root); each section below is
replaced when its benchmark runs again. Numbers are ratios against a floor measured in the
same run: compare ratios between machines, not times.
"""


def _command() -> str:
    return " ".join(shlex.quote(a) for a in [Path(sys.executable).name, "-m", "bench", *sys.argv[1:]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--only", action="append", choices=sorted(BENCHMARKS), help="run only this benchmark")
    parser.add_argument("--quick", action="store_true", help="small inputs, few repetitions (smoke test; noisy)")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions per measurement (best of N)")
    parser.add_argument("--results", type=Path, help=f"results file (default {RESULTS.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    config = Config(quick=args.quick, repeat=max(1, args.repeat))
    names = args.only or list(BENCHMARKS)
    command = _command()
    info = machine_info()
    context = [f"command: `{command}`", *(f"{k}: {v}" for k, v in info)]
    print("\n".join(context), flush=True)
    sections: list[Section] = []
    for name in names:
        started = time.perf_counter()
        section = load(name)(config)
        took = time.perf_counter() - started
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime())
        measured = [f"Measured {when}{' (quick)' if config.quick else ''}, in {took:.0f} s:", ""]
        measured += [f"- {line}" for line in context]
        section.markdown = section.markdown.rstrip() + "\n\n" + "\n".join(measured) + "\n"
        sections.append(section)
        print()
        print(section.markdown, flush=True)
        print(ratio_line(section.ratios), flush=True)
    target = args.results or (None if config.quick else RESULTS)
    if target is not None:
        update_results(target, _FILE_HEADER, sections)
        print(f"\nwrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
