"""Stale, partial, truncated and unloadable results: one clear message with the regenerating command on every page."""

import json
from pathlib import Path

import pytest
from dash_support import PAGES, messages
from typer.testing import CliRunner

from lethe_core.cli import main as cli
from lethe_core.experiments.rif import RIFExperiment
from lethe_core.results.runs import SCHEMA_VERSION, ResultsError, load_run, regenerate_command

# What the fixture's run (conftest.results_home) regenerates with: its own options, resolved reranker included.
FIXTURE_COMMAND = ("lethe-lab rif run locomo --protocol paper --seeds 2 --reranker test:lexical --conversations 2 "
                   "--burn-in 1000 --second-stage {stage} --encoder test:hash")


def _edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _drop_column(path: Path, column: str) -> None:
    import pandas as pd

    pd.read_parquet(path).drop(columns=[column]).to_parquet(path)


BREAKAGES = {
    # what is done to the folder -> what the message must say
    "stale schema (a folder from before versioning)": (lambda r: [_edit_json(r / f, lambda d: d.pop("schema_version"))
                                                                  for f in ("summary.json", "config.json")], "stale results (schema 1"),
    "summary lacks n_queries": (lambda r: _edit_json(r / "summary.json", lambda d: d.pop("n_queries")), "'n_queries'"),
    "an arm lacks p_holm": (lambda r: _edit_json(r / "summary.json", lambda d: d["arms"][1].pop("p_holm")), "'p_holm'"),
    "behaviour lacks abstain@4": (lambda r: _edit_json(r / "summary.json", lambda d: d["arms"][0]["behaviour"].pop("abstain@4")),
                                  "behaviour.abstain@4"),
    "config lacks pool_key": (lambda r: _edit_json(r / "config.json", lambda d: d.pop("pool_key")), "'pool_key'"),
    "corrupt summary": (lambda r: (r / "summary.json").write_text("{ not json"), "corrupt"),
    "unfinished run (no summary)": (lambda r: (r / "summary.json").unlink(), "partial results (summary.json missing"),
    # issue 24 finding 2: a rerun stopped after its Parquet files, beside the summary of an earlier write (no write id)
    "mixed folder (an old summary beside new files)": (lambda r: _edit_json(r / "summary.json", lambda d: d.pop("write_id")),
                                                       "partial results: a mixed folder (config.json, per_query.parquet, "
                                                       "query_map.parquet, snapshots.parquet come from another write than summary.json"),
    "truncated per_query.parquet": (lambda r: _truncate(r / "per_query.parquet"), "per_query.parquet: unreadable or truncated"),
    "truncated snapshots.parquet": (lambda r: _truncate(r / "snapshots.parquet"), "snapshots.parquet: unreadable or truncated"),
    "truncated query_map.parquet": (lambda r: _truncate(r / "query_map.parquet"), "query_map.parquet: unreadable or truncated"),
    "per_query from another version": (lambda r: _drop_column(r / "per_query.parquet", "abstain@4"), "lacks columns ['abstain@4']"),
}


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_broken_folder_gives_one_message_on_every_page(results_home, copy_results, app_at, breakage):
    _, summary = results_home
    home, run = copy_results()
    config = json.loads((run / "config.json").read_text())
    command = FIXTURE_COMMAND.format(stage=config["second_stage"])
    assert regenerate_command(config) == command
    damage, expected = BREAKAGES[breakage]
    damage(run)
    at = app_at(home)
    for page in PAGES:
        at.switch_page(f"views/{page}.py").run()
        assert not at.exception, (page, [e.value for e in at.exception])
        said = messages(at)
        assert len(said) == 1, (page, said)
        assert expected in said[0] and f"`{command}`" in said[0], (page, said[0])
        assert "Traceback" not in said[0]


def test_body_corruption_behind_a_valid_footer_is_a_message_too(results_home, copy_results, app_at):
    """Zeroed data pages keep the footer that load_run checks; the page that reads them still says what to do."""
    home, run = copy_results()
    path = run / "snapshots.parquet"
    data = bytearray(path.read_bytes())
    data[4: len(data) // 2] = bytes(len(data) // 2 - 4)
    path.write_bytes(bytes(data))
    at = app_at(home, "suppression")
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "snapshots.parquet: unreadable" in errors[0] and "lethe-lab rif run locomo" in errors[0]


@pytest.mark.parametrize("where", ["moved", "not a dataset"])
def test_unloadable_dataset_path_is_a_message_on_the_pages_that_need_it(copy_results, app_at, where):
    home, run = copy_results()  # inside LETHE_HOME: a path the replay follows (test_dataset_source.py: the ones it refuses)
    target = home / "gone" / "locomo10.json" if where == "moved" else home / "results"
    _edit_json(run / "config.json", lambda d: d.update(path=str(target)))
    at = app_at(home)
    needs_dataset = {"clusters", "suppression", "chronic", "inspector", "whatif"}
    for page in PAGES:
        at.switch_page(f"views/{page}.py").run()
        assert not at.exception, (page, [e.value for e in at.exception])
        errors = [e.value for e in at.error]
        if page in needs_dataset:
            assert len(errors) == 1 and "its dataset 'locomo' at " + str(target) in errors[0], (page, errors)
            assert f"--path {target}" in errors[0]
        else:
            assert errors == [], (page, errors)
            assert at.title[0].value


def test_pools_not_cached_advice_rebuilds_the_same_pools(results_home, copy_results, app_at):
    """A home without the caches: the advice is the run's own command, not a bare `rif run locomo`."""
    home, run = copy_results()
    config = json.loads((run / "config.json").read_text())
    at = app_at(home, "inspector")
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "pools of this run are not cached" in errors[0]
    assert f"`{regenerate_command(config)}`" in errors[0] and "--conversations 2" in errors[0]


def test_regenerate_command_spells_out_the_runs_options():
    config = {"dataset": "locomo", "protocol": "paper", "seeds": [42, 43, 44, 45, 46], "reranker": "auto",
              "reranker_resolved": "trained:minilm-2fold", "conversations": 2, "limit_queries": None, "path": None, "burn_in": 1000,
              "second_stage": "ce", "alpha": 0.3, "eta": 0.1, "eager_decay": False, "calibration": False, "arms": None,
              "pipeline": {"encoder": "minilm"}}
    assert regenerate_command(config) == ("lethe-lab rif run locomo --protocol paper --seeds 5 --reranker trained:minilm-2fold "
                                          "--conversations 2 --burn-in 1000 --second-stage ce")
    odd = {**config, "path": "/data/my locomo.json", "alpha": 0.5, "calibration": True, "arms": ["baseline", "clustered30-gap"]}
    assert regenerate_command(odd).endswith("--path '/data/my locomo.json' --conversations 2 --burn-in 1000 --second-stage ce "
                                            "--arms clustered30-gap --alpha 0.5 --calibration")
    swept = {**config, "decay": 0.0, "cap": 2.0, "reinforce": 0.1}  # the reference's sweep v3/v4 constants
    assert regenerate_command(swept).endswith("--second-stage ce --decay 0.0 --cap 2.0 --reinforce 0.1")


def test_regenerate_command_reproduces_the_config(results_home, monkeypatch):
    """Following the printed command gives an experiment with the same pool-relevant options as the run."""
    home, summary = results_home
    config = load_run(summary["results_dir"]).config
    seen = []
    monkeypatch.setattr(RIFExperiment, "run", lambda self, *args, **kwargs: seen.append(self) or summary)
    args = regenerate_command(config).split()[1:]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    (exp,) = seen
    for key in ("dataset", "path", "conversations", "limit_queries", "second_stage", "calibration"):
        assert getattr(exp.data, key) == config[key], key
    for key in ("protocol", "burn_in", "alpha", "eta", "eager_decay", "arms"):
        assert getattr(exp, key) == config[key], key
    assert exp.data.reranker == config["reranker_resolved"] and exp.seeds == len(config["seeds"])
    assert exp.data.pipeline.encoder == config["pipeline"]["encoder"]


def test_the_writer_records_the_schema_version(results_home):
    _, summary = results_home
    run = load_run(summary["results_dir"])
    assert run.summary["schema_version"] == run.config["schema_version"] == SCHEMA_VERSION


def test_no_folder_is_an_error(tmp_path):
    with pytest.raises(ResultsError, match="no results folder"):
        load_run(tmp_path / "nothing")
