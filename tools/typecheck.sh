#!/usr/bin/env bash
# mypy needs the package under its import name; the repository root *is* the package
# `callsafe` (see pyproject.toml), so check it through a link named `callsafe`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
stage="$root/.typecheck"
mkdir -p "$stage"
ln -sfn "$root" "$stage/callsafe"
cd "$stage"
exec "$root/.venv/bin/mypy" --config-file "$root/pyproject.toml" -p callsafe "$@"
