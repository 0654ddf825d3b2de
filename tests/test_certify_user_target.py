"""A user certifies their own implementation: one small adapter class, named on the
command line as ``module:factory`` or in a pytest marker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from netguard import guarded_env

pytest_plugins = ("pytester",)

# What a user writes: their assembler behind the Target contract. It declares only what it
# has (no cancel handling, no operator controls, no durable store, no ledger), so the
# scenarios that need more are reported as not applicable.
USER_TARGET = textwrap.dedent(
    """
    import json

    from callsafe.model.ecma_regex import validator_class
    from callsafe.model.vocabulary import CallKey, CallOpened, CallTerminal, Fragment, ResponseTerminal, TurnStarted


    def _strict(text):
        def no_duplicates(pairs):
            if len({k for k, _ in pairs}) != len(pairs):
                raise ValueError("duplicate key")
            return dict(pairs)

        def no_constants(name):
            raise ValueError(name)

        value = json.loads(text, object_pairs_hook=no_duplicates, parse_constant=no_constants)
        if any(0xD800 <= ord(c) <= 0xDFFF for c in json.dumps(value, ensure_ascii=False)):
            raise ValueError("lone surrogate")
        if not isinstance(value, dict):
            raise ValueError("not an object")
        return value


    class MyAssembler:
        name = "my-assembler"
        protocol = "abstract"
        capabilities = frozenset({"business_validation"})
        glue_repeats = False

        def start(self, env):
            self.env, self.turns, self.calls, self.ids, self.ended, self.bytes = env, {}, {}, set(), set(), {}

        def restart(self):
            pass

        def close(self):
            pass

        def receive(self, ev):
            if isinstance(ev, TurnStarted):
                self.turns.setdefault(ev.turn, ev)
                return
            if isinstance(ev, ResponseTerminal):
                self.ended.add((ev.turn, ev.response))
            if not hasattr(ev, "call") or ev.turn not in self.turns:
                for call in self.calls.values():
                    if isinstance(ev, ResponseTerminal) and call["key"][:2] == (ev.turn, ev.response):
                        call["state"] = "failed" if call["state"] == "open" else call["state"]
                return
            ident = (ev.turn, ev.response, ev.item, ev.call)
            call = self.calls.get(ident)
            if isinstance(ev, CallOpened):
                if call is None:
                    state = "failed" if (ev.turn, ev.response) in self.ended else "open"
                    self.calls[ident] = {"key": ident, "tool": ev.tool, "parts": {}, "state": state, "size": 0}
                elif call["tool"] != ev.tool and call["state"] == "open":
                    call["state"] = "failed"
            elif isinstance(ev, Fragment):
                if call is None:
                    self.calls[ident] = {"key": ident, "tool": None, "parts": {}, "state": "failed", "size": 0}
                elif call["state"] == "open":
                    self._fragment(call, ev)
                elif call["state"] == "validating" and call["parts"].get(ev.position) != ev.text:
                    call["state"] = "failed"  # data after the terminal event: not finished
            elif isinstance(ev, CallTerminal):
                seen = ev.event_id in self.ids
                self.ids.add(ev.event_id)
                if call is None:
                    self.calls[ident] = {"key": ident, "tool": None, "parts": {}, "state": "failed", "size": 0}
                elif not seen and call["state"] == "open":
                    self._finish(call, ev)
                elif not seen and call["state"] == "validating" and ev.reason != "completed":
                    call["state"] = "failed"

        def _fragment(self, call, ev):
            size = len(ev.text.encode("utf-8", "surrogatepass"))
            old = call["parts"].get(ev.position)
            if old == ev.text and not self.glue_repeats:
                return
            if (old is not None and not self.glue_repeats) or ev.position < 0:
                call["state"] = "failed"
                return
            turn_bytes = self.bytes.get(ev.turn, 0) + size
            if call["size"] + size > self.env.limits.call_bytes or turn_bytes > self.env.limits.turn_bytes:
                call["state"] = "failed"
                return
            call["parts"][ev.position] = (old or "") + ev.text if self.glue_repeats else ev.text
            call["size"] += size
            self.bytes[ev.turn] = turn_bytes

        def _finish(self, call, ev):
            call["state"] = "failed"
            if ev.reason != "completed" or sorted(call["parts"]) != list(range(len(call["parts"]))):
                return
            try:
                arguments = _strict("".join(call["parts"][p] for p in sorted(call["parts"])))
            except ValueError:
                return
            spec = self.env.tools.get(call["tool"])
            # ECMA-262 patterns, as JSON Schema 2020-12 says (docs/json-schema-dialect.md)
            if spec is None or not validator_class(spec.schema)(spec.schema).is_valid(arguments):
                return
            turn = self.turns[ev.turn]
            key = CallKey(turn.tenant, *call["key"])
            call["state"] = "validating"
            problem = self.env.business_validator(key, call["tool"], arguments)
            if call["state"] != "validating" or problem is not None or not spec.permits(turn.actor):
                call["state"] = "failed"
                return  # stopped while validating, or refused
            call["state"] = "done"
            self.env.executor(key, turn.actor, call["tool"], arguments, turn.traceparent)


    def factory():
        return MyAssembler()


    def buggy():
        target = MyAssembler()
        target.glue_repeats = True  # appends a repeated delta: 100 becomes 1000
        return target
    """
)


def test_user_target_through_module_factory(tmp_path: Path) -> None:
    (tmp_path / "my_assembler.py").write_text(USER_TARGET)
    env = guarded_env({**os.environ, "PYTHONPATH": str(tmp_path)})
    cmd = [sys.executable, "-m", "callsafe", "certify", "my_assembler:factory", "--depth", "1", "--report", "out"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert doc["verdict"] == "pass" and doc["target"]["name"] == "my-assembler"
    statuses = {i["id"]: i["status"] for i in doc["invariants"]}
    assert statuses["INV-ONCE"] == "holds" and statuses["INV-LEDGER"] == "not_applicable"
    assert doc["generators"]["catalog"]["not_applicable"] > 0
    buggy = subprocess.run(
        [*cmd[:4], "my_assembler:buggy", *cmd[5:]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert buggy.returncode == 1 and "not certified" in buggy.stdout


def test_user_target_through_the_pytest_plugin(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the plugin is named with -p below
    pytester.makepyfile(my_assembler=USER_TARGET)
    pytester.makepyfile(
        test_certify_mine=textwrap.dedent(
            """
            import pytest

            import my_assembler


            @pytest.mark.callsafe(target="my_assembler:factory", depth=1, walks=40)
            def test_mine(callsafe_invariant):
                callsafe_invariant.check()


            @pytest.mark.callsafe(target=my_assembler.buggy, depth=1, walks=40, generators=["catalog"])
            def test_buggy(callsafe_invariant):
                callsafe_invariant.check()
            """
        )
    )
    result = pytester.runpytest_inprocess("-p", "callsafe.certify.pytest_plugin", "-rA", "-p", "no:cacheprovider")
    # 11 invariants each; the correct one passes the 7 that apply to it and skips the 4 that
    # need a ledger, a status display or confirmations; the buggy one fails where repeats glue.
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] + outcomes["failed"] + outcomes["skipped"] == 22
    assert outcomes["skipped"] == 8
    result.stdout.fnmatch_lines(["*PASSED*test_mine[[]INV-ONCE[]]*", "*FAILED*test_buggy[[]LIVE-DISPATCH[]]*"])
    assert "minimal trace" in result.stdout.str()
    assert not any("test_mine" in line and "FAILED" in line for line in result.stdout.lines)
