"""The run store: whole-or-nothing writes, and the one reuse rule every study follows."""

import json
import os
from pathlib import Path

import pytest

from lethe_core.experiments.setup import DataSpec
from lethe_core.experiments.systems import SystemsExperiment
from lethe_core.results import store
from lethe_core.retrieval.pipeline import PipelineConfig


def test_atomic_write_leaves_no_temporary_behind_and_keeps_the_old_file_on_failure(tmp_path):
    target = tmp_path / "summary.json"
    store.write_json(target, {"a": 1})
    names = []

    def fail(p):
        names.append(p.name)
        p.write_text("half")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        store.atomic_write(target, fail)
    assert json.loads(target.read_text()) == {"a": 1} and os.listdir(tmp_path) == ["summary.json"]
    store.atomic_write(target, lambda p: names.append(p.name) or p.write_text("{}"))
    # each writer its own temporary name (pid + random suffix), beside the target
    assert len(set(names)) == 2 and all(n.startswith(f".tmp-{os.getpid()}-") and n.endswith("-summary.json") for n in names)


def test_reuse_rule(tmp_path):
    out, calls = tmp_path / "run", []

    def compute(value):
        def run():
            calls.append(value)
            return store.write_summary(out, {"config": {"k": value, "progress": True}, "value": value})
        return run

    assert store.reuse_or_run(out, {"k": 1, "progress": True}, compute(1))["value"] == 1
    assert store.reuse_or_run(out, {"k": 1, "progress": False}, compute(2))["value"] == 1  # progress changes no number
    assert store.reuse_or_run(out, {"k": 3}, compute(3))["value"] == 3  # another config: recomputed
    assert store.reuse_or_run(out, {"k": 3}, compute(4), mode="overwrite")["value"] == 4
    (out / "summary.json").unlink()  # a run killed before its summary: not finished
    assert store.reuse_or_run(out, {"k": 4}, compute(5))["value"] == 5
    assert calls == [1, 3, 4, 5]
    with pytest.raises(ValueError, match="mode must be one of"):
        store.reuse_or_run(out, {"k": 4}, compute(6), mode="append")


def test_config_json_is_the_record_when_the_summary_has_none(tmp_path):
    store.write_json(tmp_path / "config.json", {"k": (1, 2)})
    store.write_summary(tmp_path, {"value": 1})
    assert store.finished(tmp_path, {"k": (1, 2)}) == {"value": 1}
    assert store.finished(tmp_path, {"k": [1, 3]}) is None


def test_a_study_reuses_its_finished_run(tmp_path):
    data = DataSpec(dataset="synthetic:600", reranker="test:lexical", backend="torch", pipeline=PipelineConfig(encoder="test:hash"),
                    progress=False)
    first = SystemsExperiment(data).run(tmp_path)
    folder = tmp_path / first["results_dir"].rsplit("/", 1)[-1]
    (folder / "per_query.parquet").unlink()  # reused: nothing is rewritten
    assert SystemsExperiment(data).run(tmp_path) == first and not (folder / "per_query.parquet").exists()
    again = SystemsExperiment(data).run(tmp_path, mode="overwrite")  # the same numbers, in a new write (its own write id)
    assert again.pop("write_id") != first["write_id"] and again == {k: v for k, v in first.items() if k != "write_id"}
    assert (folder / "per_query.parquet").exists()
    assert SystemsExperiment(data, seed=1).run(tmp_path) != first  # another config, recomputed into the same folder


def _compute_once(out: str, log: str, value: int) -> int:
    """One process of the race below: sleeps inside the computation so that the other arrives while it runs."""
    import time

    def run():
        with open(log, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        time.sleep(0.5)
        return store.write_summary(out, {"config": {"k": 1}, "value": value})

    return store.reuse_or_run(Path(out), {"k": 1}, run)["value"]


def test_two_processes_asking_for_one_run_compute_it_once(tmp_path):
    """A parallel notebook build: the second process waits on the run folder's lock, then reuses the first's run."""
    import multiprocessing

    out, log = tmp_path / "run", tmp_path / "computed.log"
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        values = pool.starmap(_compute_once, [(str(out), str(log), 1), (str(out), str(log), 2)])
    assert len(log.read_text().split()) == 1, "exactly one process computed the run"
    assert values[0] == values[1] and values[0] in (1, 2), "the other one read that run back"
