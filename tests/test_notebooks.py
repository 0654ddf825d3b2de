"""The notebooks in ``notebooks/`` run top to bottom, and are committed without outputs.

Each runs in a fresh kernel (``python3``: the kernel spec ipykernel provides for the
interpreter that runs the tests, so the venv's ``callsafe``) with ``notebooks/`` as its
working directory; a failing cell fails the test with the cell's traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import skips

nbformat = pytest.importorskip("nbformat", reason=skips.missing("nbformat", "pip install -e '.[dev]'"))
nbclient = pytest.importorskip("nbclient", reason=skips.missing("nbclient", "pip install -e '.[dev]'"))
pytest.importorskip("ipykernel", reason=skips.missing("ipykernel", "pip install -e '.[dev]'"))

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NAMES = ["01-model.ipynb", "02-certification.ipynb", "03-library-counterexample.ipynb", "04-z3.ipynb"]
CELL_TIMEOUT = 600  # seconds per cell, sized for a loaded machine: only a hang fails the test


def test_the_four_notebooks_are_there() -> None:
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_committed_without_outputs(name: str) -> None:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{name}: clear the outputs before committing"


@pytest.mark.parametrize("name", NAMES)
def test_runs_top_to_bottom(name: str) -> None:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=CELL_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()  # each notebook takes seconds here; no wall-clock bound (CI machines are loaded)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
