import json

import pytest

import numpy as np

from lethe_core.report.checkpoints import MIME, Finding, combine, json_safe, judge, read_finding
from lethe_core.report.notebooks import discover, stamp, write_index


def test_judge_reads_the_ci_against_the_claimed_direction():
    assert judge(0.02, (0.01, 0.03)).verdict == "holds"
    assert judge(0.02, (-0.01, 0.05)).verdict == "partly"
    assert judge(-0.02, (-0.03, -0.01)).verdict == "does not hold"
    assert judge(-0.001, (-0.01, 0.01)).verdict == "does not hold"
    assert judge(-0.02, (-0.03, -0.01), direction=-1).verdict == "holds"  # a claimed drop
    assert judge(0.02, (0.01, 0.03), direction=-1).verdict == "does not hold"


def test_combine():
    h, p, n = (judge(0.02, (0.01, 0.03)), judge(0.02, (-0.01, 0.05)), judge(-0.02, (-0.03, -0.01)))
    assert combine([h, h]).verdict == "holds"
    assert combine([n, n]).verdict == "does not hold"
    assert combine([h, n]).verdict == "partly"
    assert combine([p]).verdict == "partly"


def test_finding_round_trips_through_notebook_outputs(tmp_path):
    f = Finding.from_judgement(judge(0.02, (0.01, 0.03)), checkpoint=12, title="t", claim="c", reference="r", ours="o",
                               numbers={"x": 1.5})
    bundle = f._repr_mimebundle_()
    assert "holds" in bundle["text/markdown"]
    nb = {"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data", "data": bundle}]}]}
    path = tmp_path / "x.ipynb"
    path.write_text(json.dumps(nb))
    assert read_finding(path) == f
    with pytest.raises(ValueError):
        Finding(checkpoint=1, title="t", claim="c", reference="r", ours="o", verdict="maybe", why="")


def test_stamp_changes_with_source_and_parameters(tmp_path):
    nb = tmp_path / "99_x.py"
    nb.write_text("# %%\nx = 1\n")
    a = stamp(nb, {})
    assert stamp(nb, {}) == a
    assert stamp(nb, {"seeds": 1}) != a
    nb.write_text("# %%\nx = 2\n")
    assert stamp(nb, {}) != a


def test_discover_filters_and_names_unknown_notebooks():
    assert discover(["03"])[0].stem.startswith("03_")
    with pytest.raises(ValueError, match="no notebook"):
        discover(["77"])


def test_index_lists_every_checkpoint(tmp_path):
    f = Finding(checkpoint=3, title="t", claim="a | b", reference="r", ours="o", verdict="holds", why="w")
    src = discover(["03"])[0]
    (tmp_path / f"{src.stem}.ipynb").write_text(json.dumps(
        {"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data", "data": {MIME: f._repr_mimebundle_()[MIME]}}]}]}))
    target = write_index(tmp_path, {src.stem: {"seconds": 12.0}}, tmp_path / "README.md")
    text = target.read_text()
    assert "a \\| b" in text and "**holds**" in text
    assert all(f"| {n:02d} |" in text for n in range(1, 19))


def test_library_closure_follows_imports_transitively_and_skips_the_rest():
    from lethe_core.report.notebooks import library_closure
    from lethe_core.util.paths import REPO_ROOT

    files = {str(p.relative_to(REPO_ROOT)) for p in library_closure("from lethe_core.experiments.systems import SystemsExperiment")}
    assert {"lethe_core/__init__.py", "lethe_core/experiments/__init__.py", "lethe_core/experiments/systems.py",
            "lethe_core/measures/stats.py", "lethe_core/pools/cache.py"} <= files  # systems imports pools and stats (relative imports)
    assert "lethe_core/cli/main.py" not in files and "lethe_core/rerankers/training.py" not in files
    lazy = {str(p.relative_to(REPO_ROOT)) for p in library_closure("def f():\n    from lethe_core.rerankers.training import train_folds\n")}
    assert "lethe_core/rerankers/training.py" in lazy  # a function-level import counts too
    assert library_closure("import numpy") == []


def test_json_safe_replaces_non_finite_floats():
    out = json_safe({"a": float("nan"), "b": [np.float64(1.5), np.inf], "c": {"d": np.int64(3), "e": "x"}})
    assert out == {"a": None, "b": [1.5, None], "c": {"d": 3, "e": "x"}}


def test_a_findings_numbers_are_strict_json():
    f = Finding(checkpoint=18, title="t", claim="c", reference="r", ours="o", verdict="partly", why="w",
                numbers={"p": np.float64("nan"), "ci": np.array([0.1, 0.2])})
    json.dumps(f._repr_mimebundle_()[MIME], allow_nan=False)  # raises on NaN
    assert f._repr_mimebundle_()[MIME]["numbers"] == {"p": None, "ci": [0.1, 0.2]}


def test_index_keeps_rows_of_notebooks_not_in_this_build(tmp_path):
    f = Finding(checkpoint=3, title="t", claim="new claim", reference="r", ours="o", verdict="holds", why="w")
    src = discover(["03"])[0]
    (tmp_path / f"{src.stem}.ipynb").write_text(json.dumps(
        {"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data", "data": {MIME: f._repr_mimebundle_()[MIME]}}]}]}))
    target = tmp_path / "README.md"
    old_05 = "| 05 | Recall analysis | old claim | r | o | **partly** | [05_recall_analysis.py](05_recall_analysis.py) · 36 s |"
    target.write_text(f"{old_05}\n| 03 | x | stale | r | o | **partly** | x · 9 s |\n| 06 | y | — | — | — | not built yet | — |\n")
    text = write_index(tmp_path, {src.stem: {"seconds": 12.0}}, target).read_text()
    assert old_05 in text  # not executed here: kept, with its run time in the total
    assert "new claim" in text and "stale" not in text  # executed here: replaced
    assert "| 06 | Adaptive depth + rescue cache | — | — | — | not built yet |" in text
    assert "0.8 min" in text and "Rows 05 are kept" in text  # 12 s + 36 s
