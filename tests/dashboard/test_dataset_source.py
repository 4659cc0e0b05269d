"""A results folder's config.json never chooses which file the dashboard opens, nor makes a page view generate a
huge dataset (issue 24, finding 10): the dataset is resolved by name, a path only inside the data folders, a
generated one up to a turn limit; everything else is one message, before anything is read."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from dash_support import PAGES, messages

from lethe_core.results import runs
from lethe_core.results.runs import DEFAULT_MAX_REPLAY_TURNS, ResultsError, load_run, replay_context
from lethe_core.util.paths import default_dataset_path, shared_data_dir

NEEDS_DATASET = {"clusters", "suppression", "chronic", "inspector", "whatif"}


class Loaded(Exception):
    """Raised by the stand-in loader: the replay got as far as loading this (name, path)."""


@pytest.fixture
def loads(monkeypatch):
    """Every dataset load the replay attempts, stopped there (the stand-in raises, as a loader failure would not)."""
    seen = []

    def fake(name, path=None, conversations=None, limit_queries=None):
        seen.append((name, path))
        raise Loaded(name, path)

    monkeypatch.setattr(runs, "load_dataset", fake)
    return seen


def _edit_config(run: Path, **changes) -> None:
    path = run / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


@pytest.fixture
def planted(copy_results, monkeypatch):
    """A copy of the fixture's run whose config.json is edited; LETHE_HOME is the copy's home."""

    def make(**changes):
        home, run = copy_results()
        monkeypatch.setenv("LETHE_HOME", str(home))
        _edit_config(run, **changes)
        return home, load_run(run)

    return make


PROBES = {  # what config.json says -> what the message says
    "/etc/passwd": ({"path": "/etc/passwd"}, "its dataset path /etc/passwd is outside the data folders"),
    "../../../../etc/shadow": ({"path": "../../../../../../../../etc/shadow"},
                               "its dataset path ../../../../../../../../etc/shadow is outside the data folders"),
    "/proc/self/environ": ({"path": "/proc/self/environ"}, "its dataset path /proc/self/environ is outside the data folders"),
    "synthetic:1000000": ({"dataset": "synthetic:1000000"}, "its dataset 'synthetic:1000000' asks for 1,000,000 turns, more than "
                                                            f"the {DEFAULT_MAX_REPLAY_TURNS:,} a replay generates"),
    "locomo-haystack:5000000": ({"dataset": "locomo-haystack:5000000"}, "asks for 5,000,000 turns"),
    "a dataset that is not a name": ({"dataset": ["locomo"]}, "its dataset ['locomo'] is not a dataset name"),
    "a path that is not a string": ({"path": {"file": "/etc/passwd"}}, "is not a path"),
}


@pytest.mark.parametrize("probe", list(PROBES))
def test_replay_refuses_before_reading_anything(planted, loads, probe):
    changes, expected = PROBES[probe]
    _, run = planted(**changes)
    started = time.perf_counter()
    with pytest.raises(ResultsError) as raised:
        replay_context(run)
    message = str(raised.value)
    assert expected in message and str(run.path) in message and "Regenerate it with `lethe-lab rif run" in message
    assert loads == [] and time.perf_counter() - started < 2  # nothing loaded, no time spent
    assert "root:" not in message  # nothing of the file read into the message


def test_a_fifo_inside_the_data_folders_is_refused(planted, loads, tmp_path):
    home, run = planted()
    fifo = home / "locomo.fifo"
    os.mkfifo(fifo)
    _edit_config(run.path, path=str(fifo))
    with pytest.raises(ResultsError, match="is not a regular file or folder"):  # opening it would hang
        replay_context(load_run(run.path))
    assert loads == []


def test_a_symlink_out_of_the_data_folders_is_refused(planted, loads):
    home, run = planted()
    (home / "data").mkdir()
    (home / "data" / "locomo10.json").symlink_to("/etc/passwd")
    _edit_config(run.path, path=str(home / "data" / "locomo10.json"))
    with pytest.raises(ResultsError, match="is outside the data folders"):
        replay_context(load_run(run.path))
    assert loads == []


def test_the_data_folders_and_names_are_followed(planted, loads, monkeypatch, tmp_path):
    """By name, the shared data, LETHE_HOME, a LETHE_<NAME>_PATH, and a generated dataset under the limit: loaded."""
    home, run = planted()
    inside_home = home / "mine" / "locomo10.json"
    elsewhere = tmp_path / "elsewhere" / "locomo10.json"
    monkeypatch.setenv("LETHE_LOCOMO_PATH", str(elsewhere))
    cases = [{"path": None}, {"path": str(shared_data_dir() / "locomo" / "locomo10.json")}, {"path": str(inside_home)},
             {"path": str(elsewhere)}, {"dataset": f"synthetic:{DEFAULT_MAX_REPLAY_TURNS}", "path": None}]
    for changes in cases:
        _edit_config(run.path, **changes)
        with pytest.raises(Loaded):
            replay_context(load_run(run.path))
    assert loads == [("locomo", None), ("locomo", str(shared_data_dir() / "locomo" / "locomo10.json")), ("locomo", str(inside_home)),
                     ("locomo", str(elsewhere)), (f"synthetic:{DEFAULT_MAX_REPLAY_TURNS}", None)]
    assert default_dataset_path("locomo") == elsewhere


def test_the_turn_limit_is_configurable(planted, loads, monkeypatch):
    _, run = planted(dataset="synthetic:600")
    monkeypatch.setenv("LETHE_MAX_REPLAY_TURNS", "500")
    with pytest.raises(ResultsError, match="asks for 600 turns, more than the 500 a replay generates"):
        replay_context(run)
    monkeypatch.setenv("LETHE_MAX_REPLAY_TURNS", "600")
    with pytest.raises(Loaded):
        replay_context(run)
    monkeypatch.setenv("LETHE_MAX_REPLAY_TURNS", "lots")
    with pytest.raises(ValueError, match="LETHE_MAX_REPLAY_TURNS must be a whole number"):
        runs.max_replay_turns()


@pytest.mark.parametrize("probe", ["/etc/passwd", "/proc/self/environ", "synthetic:1000000"])
def test_every_page_says_it_once(copy_results, app_at, monkeypatch, probe):
    """On the pages: one message naming the folder and the command, the others unaffected, nothing loaded."""
    home, run = copy_results()
    _edit_config(run, **PROBES[probe][0])
    called = []
    monkeypatch.setattr(runs, "load_dataset", lambda *a, **k: called.append(a) or pytest.fail(f"loaded {a}"))
    at = app_at(home)
    for page in PAGES:
        started = time.perf_counter()
        at.switch_page(f"views/{page}.py").run()
        assert not at.exception, (page, [e.value for e in at.exception])
        errors = [e.value for e in at.error]
        if page in NEEDS_DATASET:
            assert len(errors) == 1 and PROBES[probe][1] in errors[0] and str(run) in errors[0], (page, errors)
            assert "Traceback" not in errors[0] and not [m for m in messages(at) if "root:" in m]
        else:
            assert errors == [], (page, errors)
        assert time.perf_counter() - started < 20, page
    assert called == []
