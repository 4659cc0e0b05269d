"""Every checkpoint notebook executes with the small parameters and ends in a computed verdict with figures."""

from __future__ import annotations

import json

import pytest

from lethe_core.report.checkpoints import read_finding
from lethe_core.util.figures import count_figures
from lethe_core.report.notebooks import NotebookBuild, discover

NOTEBOOKS = discover()


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory):
    """One LETHE_HOME for all notebooks, so embeddings and pools built by one are reused by the next."""
    return tmp_path_factory.mktemp("notebook_home")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes_with_small_parameters(path, shared_home, tmp_path, monkeypatch):
    monkeypatch.setenv("LETHE_HOME", str(shared_home))
    out = tmp_path / "build"
    NotebookBuild(names=[path.stem], small=True, out=out, html=False, progress=False, timeout=600).run()
    executed = out / f"{path.stem}.ipynb"
    nb = json.loads(executed.read_text())
    outputs = [o for c in nb["cells"] for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert count_figures(outputs) >= 1, "every checkpoint notebook shows at least one figure"
    finding = read_finding(executed)
    assert finding is not None, "the last cell must display a Finding (the computed verdict)"
    assert finding.checkpoint == int(path.stem[:2])
    assert finding.parameters.get("reranker") == "test:lexical", "the verdict records the parameters it was computed with"
    assert nb["cells"][0]["cell_type"] == "markdown" and "Claim" in "".join(nb["cells"][0]["source"])
    assert any("parameters" in c.get("metadata", {}).get("tags", []) for c in nb["cells"])
