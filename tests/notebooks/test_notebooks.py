"""Every checkpoint notebook executes with the small parameters and ends in a computed verdict with figures."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from lethe_core.measures import stats
from lethe_core.report.checkpoints import Claim, judge, read_finding
from lethe_core.util.figures import count_figures
from lethe_core.report.notebooks import NotebookBuild, discover
from lethe_core.util.paths import REPO_ROOT

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
    shown = json.dumps([outputs, nb["metadata"]])
    assert str(shared_home) not in shown and str(REPO_ROOT) not in shown, "an output names a path of this machine"
    assert count_figures(outputs) >= 1, "every checkpoint notebook shows at least one figure"
    finding = read_finding(executed)
    assert finding is not None, "the last cell must display a Finding (the computed verdict)"
    assert finding.checkpoint == int(path.stem[:2])
    assert (finding.parameters.get("reranker"), finding.parameters.get("backend")) == ("test:lexical", "torch"), \
        "the verdict records the teacher and backend it was computed with (the index names them)"
    assert_verdict_recomputes(finding)
    assert nb["cells"][0]["cell_type"] == "markdown" and "Claim" in "".join(nb["cells"][0]["source"])
    assert any("parameters" in c.get("metadata", {}).get("tags", []) for c in nb["cells"])


def _pair(values):
    return None if values is None else tuple(math.nan if v is None else v for v in values)


def assert_verdict_recomputes(finding):
    """The verdict is the primary claim's outcome, recomputed here: from the per-query differences (and conversations)
    the notebook judged where it recorded them (both CIs recomputed with `stats`), else from its recorded interval."""
    roles = [c["role"] for c in finding.claims]
    assert roles and roles[0] == "primary" and roles.count("primary") == 1, "one primary claim decides the verdict"
    for row in finding.claims:
        fields = {k: row[k] for k in Claim.__dataclass_fields__}
        fields["ci"], fields["conversation_ci"] = _pair(row["ci"]), _pair(row["conversation_ci"])
        sample = row["sample"]
        if sample is not None:
            d = np.asarray(sample["deltas"], dtype=float)
            ci = stats.paired_delta_ci(d, np.zeros_like(d), level=row["level"])
            assert (ci.mean, ci.lo, ci.hi) == pytest.approx((row["delta"], *row["ci"]), abs=1e-12)
            fields["delta"], fields["ci"] = ci.mean, (ci.lo, ci.hi)
            if sample["conversations"] is not None:
                h = stats.hierarchical_paired_ci(d, np.zeros_like(d), sample["conversations"], level=row["level"])
                assert (h.lo, h.hi) == pytest.approx(tuple(row["conversation_ci"]), abs=1e-12)
                fields["conversation_ci"] = (h.lo, h.hi)
        assert judge(Claim(**fields)).verdict == row["verdict"], row["what"]
    assert finding.verdict == finding.claims[0]["verdict"]
