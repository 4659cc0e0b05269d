"""RESULTS.md (`lethe_core.report.results_md.write_report`): which runs it is written from."""

import json
import os
import shutil

import pytest

from lethe_core.experiments.rif import RIFExperiment
from lethe_core.experiments.setup import DataSpec
from lethe_core.report import results_md
from lethe_core.retrieval.pipeline import PipelineConfig


@pytest.fixture(scope="module")
def two_teachers(tmp_path_factory):
    """One real paper-protocol run (lexical test reranker) and a copy relabelled as another teacher's, finished later:
    how `make matrix` leaves the results folder, whose last runs are a cross-dataset teacher's."""
    home = tmp_path_factory.mktemp("report_home")
    mp = pytest.MonkeyPatch()
    mp.setenv("LETHE_HOME", str(home))
    data = DataSpec(dataset="synthetic:6000", reranker="test:lexical", pipeline=PipelineConfig(encoder="test:hash"), progress=False)
    summary = RIFExperiment(data, protocol="paper", ks=(10, 30), seeds=1, burn_in=500, map=False).run()
    ours = home / "results" / summary["run_id"]
    other = ours.with_name(ours.name + "-other")
    shutil.copytree(ours, other)
    s = json.loads((other / "summary.json").read_text())
    (other / "summary.json").write_text(json.dumps({**s, "reranker": "trained:other-all", "reranker_identity": "trained:other-all|onnx|0",
                                                    "run_id": other.name}))
    later = ours.stat().st_mtime + 60
    os.utime(other, (later, later))
    yield home, summary
    mp.undo()


def test_results_md_reads_the_fold_teacher_not_the_newest_run(two_teachers, monkeypatch, tmp_path):
    home, summary = two_teachers
    monkeypatch.setenv("LETHE_HOME", str(home))
    monkeypatch.setattr(results_md, "fold_teacher_spec", lambda dataset: "test:lexical")
    text = results_md.write_report("synthetic-6000", out=tmp_path / "RESULTS.md", also=()).read_text()
    assert "Reranker (teacher): **test:lexical**" in text and summary["run_id"] in text
    other = results_md.write_report("synthetic-6000", "trained:other-all", out=tmp_path / "OTHER.md", also=()).read_text()
    assert "Reranker (teacher): **trained:other-all**" in other


def test_a_teacher_without_a_paper_run_is_named_in_the_error(two_teachers, monkeypatch, tmp_path):
    home, _ = two_teachers
    monkeypatch.setenv("LETHE_HOME", str(home))
    with pytest.raises(ValueError, match="synthetic-6000 with trained:synthetic-6000-2fold .*--reranker trained:synthetic-6000-2fold"):
        results_md.write_report("synthetic-6000", out=tmp_path / "RESULTS.md", also=())
