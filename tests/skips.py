"""Why a test is skipped, and how to run it: the reasons ``make test`` prints (``pytest -rs``).

Every skip names what is missing and the command that provides it, so a reader of the
summary can enable what was skipped without reading the test.
"""

from __future__ import annotations

from typing import Final

POSTGRES: Final = (
    "no PostgreSQL server: CALLSAFE_PG_DSN is not set; start one with "
    "`export CALLSAFE_PG_DSN=$(tools/postgres.sh start)` (needs postgresql: apt-get install postgresql)"
)
SDKS: Final = "pip install -e '.[sdks]' (make venv installs it)"


def missing(module: str, install: str = SDKS) -> str:
    """The reason for a skip on a missing Python package: ``module`` is not installed; ``install``."""
    return f"{module} is not installed: {install}"
