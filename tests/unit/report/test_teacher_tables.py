"""The teacher tables of issue #25: RERANKER.md's fold vs cross-dataset table and RESULTS.md's teacher x reading table."""

import json
import shutil

import pytest

from lethe_core.experiments.rif import RIFExperiment
from lethe_core.experiments.setup import DataSpec
from lethe_core.experiments.teacher_matrix import TeacherMatrix
from lethe_core.report.reranker_md import TEACHERS_BEGIN, TEACHERS_END, splice_teachers, teachers_block, teachers_section
from lethe_core.report.results_md import inputs_section, other_runs_section, teacher_kind
from lethe_core.rerankers import RerankerUnavailable
from lethe_core.rerankers.recipes import teacher_pairs
from lethe_core.retrieval.pipeline import PipelineConfig


def _systems(dataset, reranker, full):
    rows = [{"name": n, "ndcg@10": v, "ndcg@10_ci": [v - 0.01, v + 0.01]} for n, v in
            (("rrf", 0.37), ("vector_rerank", 0.45), ("full", full), ("control", full + 0.01))]
    rows[2].update(delta_vs_rrf={"mean": full - 0.37, "ci": [full - 0.39, full - 0.35]}, p_vs_rrf=0.0001)
    return {"dataset": dataset, "reranker": reranker, "reranker_identity": f"{reranker}|onnx|abc", "systems": rows}


def test_teachers_table_lists_each_dataset_and_teacher_and_is_spliced_in_place():
    block = teachers_section([_systems("locomo", "trained:x", 0.50), _systems("realtalk", "trained:y", 0.42)])
    text = "\n".join(block)
    assert block[0] == TEACHERS_BEGIN and block[-1] == TEACHERS_END
    assert "| locomo | `trained:x` |" in text and "0.5000 [0.4900, 0.5100]" in text and "+0.1300 [+0.1100, +0.1500]" in text
    doc = "# card\n\nbody\n"
    once = splice_teachers(doc, block)
    assert once.startswith(doc.rstrip("\n")) and teachers_block(once) == block
    newer = teachers_section([_systems("locomo", "trained:x", 0.60)])
    twice = splice_teachers(once, newer)
    assert twice.count(TEACHERS_BEGIN) == 1 and "0.6000" in twice and "0.5000 [" not in twice and "body" in twice


def test_teachers_table_reads_each_models_training_groups_and_minutes_from_its_manifest(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "trained.json").write_text(json.dumps({"folds": [{"train_groups": 1234, "fold_seconds": 60.0},
                                                                        {"train_groups": 987, "fold_seconds": 120.0}]}))
    text = "\n".join(teachers_section([_systems("locomo", "trained:x", 0.50), _systems("realtalk", "trained:y", 0.42)], root=tmp_path))
    assert "| locomo | `trained:x` | " in text and " | 1,234 + 987 | 3.0 min | " in text
    assert "| realtalk | `trained:y` | " in text and " | – | – | " in text  # no manifest: nothing invented


def test_teacher_pairs_name_a_fold_and_a_cross_dataset_teacher_per_dataset():
    pairs = teacher_pairs()
    assert [d for d, _ in pairs] == ["locomo", "locomo", "realtalk", "realtalk"]
    assert ("locomo", "trained:realtalk-all") in pairs and ("realtalk", "trained:locomo-all") in pairs
    assert ("realtalk", "trained:realtalk-2fold") in pairs


def test_the_matrix_names_every_missing_teacher_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setenv("LETHE_HOME", str(tmp_path))
    with pytest.raises(RerankerUnavailable) as err:
        TeacherMatrix(progress=False).rif()
    message = str(err.value)
    assert all(spec in message for _, spec in teacher_pairs()) and "make teachers" in message
    assert not (tmp_path / "results").exists()


@pytest.fixture(scope="module")
def runs_home(tmp_path_factory):
    """One real held-out run (lexical test reranker), and a copy of it relabelled as the calibrated ablation."""
    home = tmp_path_factory.mktemp("matrix_home")
    mp = pytest.MonkeyPatch()
    mp.setenv("LETHE_HOME", str(home))
    data = DataSpec(dataset="synthetic:6000", reranker="test:lexical", pipeline=PipelineConfig(encoder="test:hash"), progress=False)
    summary = RIFExperiment(data, protocol="heldout", ks=(10, 30), seeds=1, burn_in=500, map=False).run()
    yield home, summary, mp
    mp.undo()


def test_inputs_table_has_one_row_per_teacher_reading_and_protocol(runs_home, monkeypatch):
    home, summary, _ = runs_home
    monkeypatch.setenv("LETHE_HOME", str(home))
    raw = home / "results" / summary["run_id"]
    cal = raw.with_name(raw.name + "-cal")
    if not cal.exists():
        shutil.copytree(raw, cal)
        s = json.loads((cal / "summary.json").read_text())
        (cal / "summary.json").write_text(json.dumps({**s, "logit_reading": "calibrated", "calibrated": True, "run_id": cal.name}))
    lines = inputs_section(("synthetic-6000",))
    rows = [line for line in lines if line.startswith("| synthetic-6000")]
    assert len(rows) == 2 and "| raw | heldout |" in rows[0] and "| calibrated (ablation) | heldout |" in rows[1]
    gap = next(a for a in summary["arms"] if a["name"] == "clustered30-gap")["delta_ndcg"]
    assert f"{gap['mean']:+.4f} [{gap['ci'][0]:+.4f}, {gap['ci'][1]:+.4f}]" in rows[0]
    assert teacher_kind("test:lexical", "synthetic-6000") == ""
    other = "\n".join(other_runs_section(("synthetic-6000",), ("locomo", "x")))
    assert "<details>" in other and "_paper: not run" in other and "**heldout**" in other


def test_the_first_run_decision_is_read_off_the_table(monkeypatch):
    from lethe_core.report import reranker_md

    kinds = {"trained:fold": "fold (in-domain)", "trained:cross": "cross-dataset (trained on other)"}
    monkeypatch.setattr(reranker_md, "teacher_kind", lambda spec, dataset: kinds[spec])
    worse = reranker_md.teacher_decision([_systems("locomo", "trained:fold", 0.50), _systems("locomo", "trained:cross", 0.33)])
    assert any("does not beat RRF, so the fold teacher stays" in line and "-0.0400 [-0.0600, -0.0200]" in line for line in worse)
    better = reranker_md.teacher_decision([_systems("locomo", "trained:fold", 0.50), _systems("locomo", "trained:cross", 0.45)])
    assert any("beats RRF with a CI clear of zero" in line for line in better)


def test_the_newest_run_a_report_reads_is_a_standard_one(runs_home, monkeypatch):
    """A notebook's side run (an arm subset) that finished later must not replace the full run in RESULTS.md."""
    from lethe_core.results.runs import is_standard, latest_runs, load_run

    home, summary, _ = runs_home
    monkeypatch.setenv("LETHE_HOME", str(home))
    full = home / "results" / summary["run_id"]
    side = full.with_name(full.name + "-subset")
    if not side.exists():
        shutil.copytree(full, side)
        c = json.loads((side / "config.json").read_text())
        (side / "config.json").write_text(json.dumps({**c, "arms": ["clustered30-gap"]}))
        s = json.loads((side / "summary.json").read_text())
        (side / "summary.json").write_text(json.dumps({**s, "run_id": side.name}))
    assert is_standard(load_run(full)) and not is_standard(load_run(side))
    assert latest_runs("synthetic-6000", reading="raw")["heldout"].run_id == summary["run_id"]
