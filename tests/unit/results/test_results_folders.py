"""A results folder is complete only as a whole (issue 24, finding 2): a recompute clears the folder first and stamps
every file with its write id; a folder whose files come from two writes is refused by the readers and never reused."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from lethe_core.experiments.rif import RIFExperiment
from lethe_core.experiments.setup import DataSpec
from lethe_core.results import store
from lethe_core.results.runs import ResultsError, list_runs, load_run, regenerate_command
from lethe_core.retrieval.pipeline import PipelineConfig
from lethe_core.util.paths import REPO_ROOT

# A small real RIF run: 30 synthetic queries, lexical test reranker, hashing encoder, one RIF arm (K=10 fits 30 queries).
CLI_ARGS = ["rif", "run", "synthetic:2000", "--arms", "clustered10-gap", "--reranker", "test:lexical", "--encoder", "test:hash",
            "--seeds", "1", "--burn-in", "200"]

# The CLI, with the RIF run's summary write replaced by a SIGKILL of the process itself.
KILL_AT_SUMMARY = ("import os, signal, sys; import lethe_core.experiments.rif as rif; "
                   "rif.write_summary = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL); "
                   "sys.argv[0] = 'lethe_core'; from lethe_core.cli.main import main; main()")


# --- the store ---------------------------------------------------------------------------------------------------------


def test_a_recompute_clears_the_folder_and_stamps_every_file_with_one_write_id(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    for name in ("summary.json", "config.json", "old.parquet"):
        (out / name).write_text("from the previous run")
    (out / "notes.txt").write_text("not a run file")
    seen = {}

    def compute():
        seen["left"] = sorted(p.name for p in out.iterdir())  # what a kill at this point would leave
        store.write_json(out / "config.json", {"k": 1})
        store.write_parquet(out / "per_query.parquet", pd.DataFrame({"a": [1, 2]}))
        store.write_json(out / "other.json", {"x": 1})  # only config.json and summary.json carry it among JSON files
        return store.write_summary(out, {"value": 1})

    summary = store.reuse_or_run(out, {"k": 1}, compute)
    assert summary == {"value": 1, "write_id": store.write_ids(out)["summary.json"]}  # as it reads back
    assert seen["left"] == ["notes.txt"]  # summary.json, config.json and Parquet files of the old run gone first
    ids = store.write_ids(out)
    assert set(ids) == {"summary.json", "config.json", "per_query.parquet"} and len(set(ids.values())) == 1
    assert None not in ids.values() and json.loads((out / "other.json").read_text()) == {"x": 1}
    assert pd.read_parquet(out / "per_query.parquet")["a"].tolist() == [1, 2]
    assert store.mixed(out) is None
    assert store.reuse_or_run(out, {"k": 1}, lambda: pytest.fail("recomputed")) == summary  # reused: the write id is no config


def test_writes_outside_a_run_carry_no_write_id(tmp_path):
    store.write_parquet(tmp_path / "t.parquet", pd.DataFrame({"a": [1]}))
    store.write_json(tmp_path / "config.json", {"k": 1})
    assert store.write_summary(tmp_path, {"v": 1}) == {"v": 1}
    assert set(store.write_ids(tmp_path).values()) == {None} and store.mixed(tmp_path) is None  # as before write ids
    assert json.loads((tmp_path / "config.json").read_text()) == {"k": 1}


def test_a_mixed_folder_is_never_reused(tmp_path):
    out = tmp_path / "run"

    def compute(value):
        def run():
            store.write_json(out / "config.json", {"k": 1})
            store.write_parquet(out / "per_query.parquet", pd.DataFrame({"v": [value]}))
            return store.write_summary(out, {"value": value})
        return run

    store.reuse_or_run(out, {"k": 1}, compute(1))
    old_summary = (out / "summary.json").read_bytes()
    store.reuse_or_run(out, {"k": 1}, compute(2), mode="overwrite")
    (out / "summary.json").write_bytes(old_summary)  # an old summary beside the new files
    assert "config.json, per_query.parquet come from another write than summary.json" in store.mixed(out)
    assert store.finished(out, {"k": 1}) is None
    assert store.reuse_or_run(out, {"k": 1}, compute(3))["value"] == 3 and store.mixed(out) is None


def test_a_failed_first_run_leaves_no_empty_folder(tmp_path):
    out = tmp_path / "run"

    def fail():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        store.reuse_or_run(out, {"k": 1}, fail)
    assert not out.exists()


# --- the readers ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rif_run(tmp_path_factory):
    data = DataSpec(dataset="synthetic:2000", reranker="test:lexical", pipeline=PipelineConfig(encoder="test:hash"), progress=False)
    exp = RIFExperiment(data, arms=["clustered10-gap"], seeds=1, burn_in=200, map=False)
    summary = exp.run(tmp_path_factory.mktemp("results"), tmp_path_factory.mktemp("cache"))
    return Path(summary["results_dir"])


def test_an_old_summary_beside_new_parquet_files_is_refused(rif_run, tmp_path):
    """The finding's planted folder: the old summary claims a number its per-query rows no longer give."""
    folder = rif_run
    run = tmp_path / "results" / folder.name
    shutil.copytree(folder, run)
    old = json.loads((run / "summary.json").read_text())
    old.pop(store.WRITE_ID)  # a summary from before write ids, with a planted number
    old["arms"][1]["ndcg@10"]["mean"] = 0.9999
    (run / "summary.json").write_text(json.dumps(old))
    with pytest.raises(ResultsError) as raised:
        load_run(run)
    message = str(raised.value)
    assert str(run) in message and "partial results: a mixed folder" in message
    assert "config.json, per_query.parquet, snapshots.parquet come from another write than summary.json" in message
    assert f"`{regenerate_command(json.loads((run / 'config.json').read_text()))}`" in message
    runs, problems = list_runs(tmp_path / "results")  # what the dashboard and the report list
    assert runs == [] and problems == [message]


def test_a_parquet_file_from_another_write_is_refused(rif_run, tmp_path):
    folder = rif_run
    run = tmp_path / folder.name
    shutil.copytree(folder, run)
    load_run(run)  # whole: loads
    table = pq.read_table(run / "snapshots.parquet")
    pq.write_table(table.replace_schema_metadata({**table.schema.metadata, store.PARQUET_WRITE_ID: b"another-run"}),
                   run / "snapshots.parquet")
    with pytest.raises(ResultsError, match=r"mixed folder \(snapshots.parquet comes from another write than summary.json"):
        load_run(run)


def test_a_folder_from_before_write_ids_still_loads(rif_run, tmp_path):
    folder = rif_run
    run = tmp_path / folder.name
    shutil.copytree(folder, run)
    for name in ("summary.json", "config.json"):
        data = json.loads((run / name).read_text())
        data.pop(store.WRITE_ID)
        (run / name).write_text(json.dumps(data))
    for path in run.glob("*.parquet"):
        pd.read_parquet(path).to_parquet(path, index=False)
    assert load_run(run).summary["run_id"] == folder.name


# --- two processes: a rerun killed after its Parquet files, before its summary -------------------------------------------


def _cli(home: Path) -> tuple[list[str], dict]:
    env = {**os.environ, "LETHE_HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return [sys.executable, "-m", "lethe_core", *CLI_ARGS], env


def test_a_rerun_killed_before_its_summary_leaves_a_refused_folder_and_a_rerun_completes_it(tmp_path):
    home = tmp_path / "home"
    command, env = _cli(home)
    first = subprocess.run(command, check=False, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    (folder,) = (home / "results").glob("rif-*")
    before = load_run(folder)
    old_summary = (folder / "summary.json").read_bytes()
    old = store.write_ids(folder)["summary.json"]

    # The rerun SIGKILLs itself where `write_summary` would run: after every Parquet file, before the summary (a
    # deterministic point; killing it once new Parquet inodes appeared failed on a clean clone: ext4 reuses the
    # numbers of the files the rerun had just deleted).
    rerun = subprocess.run([sys.executable, "-c", KILL_AT_SUMMARY, *CLI_ARGS, "--overwrite"], check=False, env=env, cwd=REPO_ROOT,
                           capture_output=True, text=True, timeout=300)
    assert rerun.returncode == -signal.SIGKILL, rerun.stderr[-2000:]

    # the rerun's own Parquet files (its write id, not the first run's), no summary
    new = store.write_ids(folder)
    assert old is not None and new["per_query.parquet"] == new["snapshots.parquet"] not in (None, old)
    assert not (folder / "summary.json").exists()
    with pytest.raises(ResultsError, match=r"partial results \(summary.json(, query_map.parquet)? missing: the run did not finish\)") as raised:
        load_run(folder)
    assert str(folder) in str(raised.value) and "`lethe-lab rif run synthetic:2000 --protocol paper --seeds 1" in str(raised.value)
    runs, problems = list_runs(home / "results")
    assert runs == [] and problems == [str(raised.value)]

    # the old summary put back (what an older writer, which did not clear the folder, would have left): mixed, refused
    (folder / "summary.json").write_bytes(old_summary)
    with pytest.raises(ResultsError, match="mixed folder"):
        load_run(folder)

    again = subprocess.run(command, check=False, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "reusing the finished run" not in again.stderr  # recomputed, not reused
    after = load_run(folder)
    assert store.mixed(folder) is None and after.summary["arms"] == before.summary["arms"]
