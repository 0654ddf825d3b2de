"""A target whose name and errors carry terminal escape sequences (tests/test_terminal_safety.py)."""

from __future__ import annotations

from callsafe.contract.target import TargetEnv
from callsafe.model.vocabulary import Event

EVIL = "\x1b[2J\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b]8;;https://example.invalid/\x1b\\x\x1b]8;;\x1b\\\x9b2J"


class EvilTarget:
    name = "evil" + EVIL
    protocol = "abstract"
    capabilities = frozenset({"cancellation"})

    def start(self, env: TargetEnv) -> None:
        self.env = env

    def receive(self, event: Event) -> None:
        raise ValueError("refused " + EVIL)

    def restart(self) -> None:
        pass

    def close(self) -> None:
        pass


def evil_target() -> EvilTarget:
    return EvilTarget()
