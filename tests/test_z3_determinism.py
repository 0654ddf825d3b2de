"""The z3-synthesised traces are a function of the query alone: the same in a fresh process
as in one that used z3 before (a test worker that had run z3 proofs got other synthesised
traces, and the default certification caught a zoo mutant there that it passed in a fresh
process; callsafe.formal.z3_context)."""

from __future__ import annotations

import subprocess
import sys

import z3

from callsafe.formal.z3_context import isolated_z3

_DIGEST = (
    "import hashlib, json\n"
    "from callsafe.generators.fragmentation import synthesised_fragmentations\n"
    "from callsafe.generators.synthesis import synthesised_traces\n"
    "h = hashlib.sha256()\n"
    "for _, t in [*synthesised_traces(), *synthesised_fragmentations({'type': 'object'}, {'amount': 100, 'memo': 'caf\\u00e9 \"1\"'})]:\n"
    "    h.update(json.dumps(t.to_json(), sort_keys=True).encode())\n"
    "print(h.hexdigest())\n"
)


def _used_z3_first() -> None:
    """Z3 work of another kind in this process first: terms, solving, an optimum."""
    xs = [z3.BitVec(f"x{i}", 16) for i in range(40)]
    s = z3.Solver()
    s.add(z3.Distinct(*xs), *(x > 7 for x in xs))
    assert s.check() == z3.sat
    o = z3.Optimize()
    y = z3.Int("y")
    o.add(y > 3, y < 90)
    o.maximize(y % 7)
    assert o.check() == z3.sat


def test_synthesised_traces_do_not_depend_on_earlier_z3_work() -> None:
    fresh = subprocess.run([sys.executable, "-c", _DIGEST], capture_output=True, text=True, timeout=600, check=True)
    _used_z3_first()
    namespace: dict[str, object] = {}
    from contextlib import redirect_stdout
    from io import StringIO

    out = StringIO()
    with redirect_stdout(out):
        exec(_DIGEST, namespace)
    assert out.getvalue().strip() == fresh.stdout.strip()


def test_the_isolated_context_is_restored_and_kept_apart() -> None:
    before = z3.main_ctx()
    outer = z3.Int("outer")
    with isolated_z3():
        inner = z3.Int("inner")
        assert z3.main_ctx() is not before and inner.ctx is z3.main_ctx()
    assert z3.main_ctx() is before and outer.ctx is before
    assert z3.simplify(outer + 1 - 1).eq(outer)  # the outer context still works
