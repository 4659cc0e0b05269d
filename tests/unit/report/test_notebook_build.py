"""The notebook build's scheduling: a parallel build runs every notebook, records each one as it finishes, holds each
kernel to its share of the cores and reports every failure at the end (nothing that ran is lost)."""

from __future__ import annotations

import json
import os

import pytest

from lethe_core.report.notebooks import NotebookBuild, NotebookError

CELL = '''# %% tags=["parameters"]
dataset = "locomo"

# %%
import os, pathlib
pathlib.Path({out!r}).write_text(os.environ.get("OMP_NUM_THREADS", "unset"))
{extra}
'''


def _notebook(folder, stem, out, extra=""):
    (folder / f"{stem}.py").write_text(CELL.format(out=str(out), extra=extra))


@pytest.mark.parametrize("jobs", [1, 2])
def test_build_runs_every_notebook_and_reports_the_failures_at_the_end(tmp_path, jobs):
    src, build, seen = tmp_path / "nb", tmp_path / "build", tmp_path / "seen"
    src.mkdir(), seen.mkdir()
    _notebook(src, "01_first", seen / "01")
    _notebook(src, "02_broken", seen / "02", extra='raise ValueError("bad input in 02")')
    _notebook(src, "03_third", seen / "03")
    builder = NotebookBuild(root=src, out=build, html=False, progress=False, jobs=jobs, timeout=120)
    with pytest.raises(NotebookError, match=r"02_broken.py: cell \d+ raised ValueError: bad input in 02"):
        builder.run()
    state = json.loads((build / "build.json").read_text())
    assert set(state) == {"01_first", "03_third"}, "the notebooks that ran are recorded; the failed one is not"
    assert (build / "01_first.ipynb").exists() and (build / "03_third.ipynb").exists()
    threads = {(seen / n).read_text() for n in ("01", "02", "03")}
    expected = str(max(1, (os.cpu_count() or 1) // 2)) if jobs == 2 else os.environ.get("OMP_NUM_THREADS", "unset")
    assert threads == {expected}, "a parallel build gives each kernel its share of the cores"
    # a rerun executes only what failed (after the fix)
    _notebook(src, "02_broken", seen / "02")
    log = NotebookBuild(root=src, out=build, html=False, progress=False, jobs=jobs, timeout=120).run()
    assert {e["notebook"]: e["skipped"] for e in log} == {"01_first": True, "02_broken": False, "03_third": True}


def test_run_order_is_longest_first_with_never_timed_notebooks_first_in_cold_order():
    from lethe_core.report.notebooks import COLD_FIRST, run_order

    state = {"03_rerank_dense_top30": {"seconds": 11.0}, "12_clustered_rif": {"seconds": 88.0}, COLD_FIRST[0]: {"seconds": 5.0}}
    stems = ["03_rerank_dense_top30", "12_clustered_rif", COLD_FIRST[0], "07_dedup", COLD_FIRST[2], COLD_FIRST[1]]
    assert sorted(stems, key=lambda s: run_order(s, state)) == [
        COLD_FIRST[1], COLD_FIRST[2], "07_dedup", "12_clustered_rif", "03_rerank_dense_top30", COLD_FIRST[0]]
