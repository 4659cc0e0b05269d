"""LETHE_HOME is proved writable by creating and removing a file in it; input files have a size limit."""

import pytest

from lethe_core.util.paths import DEFAULT_MAX_INPUT_MB, LetheHomeError, max_input_bytes, writable_home


def test_a_home_where_nothing_can_be_created_is_refused_even_as_root(monkeypatch):
    # /proc passes os.access(W_OK) as root, but nothing can be created there: the old check let it through and the
    # command died with FileNotFoundError after loading the dataset.
    monkeypatch.setenv("LETHE_HOME", "/proc/nope")
    with pytest.raises(LetheHomeError, match=r"^LETHE_HOME=/proc/nope is not writable \(cannot create it: "):
        writable_home()


def test_the_write_check_leaves_nothing_behind(tmp_path, monkeypatch):
    home = tmp_path / "new" / "home"
    monkeypatch.setenv("LETHE_HOME", str(home))
    assert writable_home() == home and home.is_dir() and list(home.iterdir()) == []


def test_input_limit_from_the_environment(monkeypatch):
    monkeypatch.delenv("LETHE_MAX_INPUT_MB", raising=False)
    assert max_input_bytes() == DEFAULT_MAX_INPUT_MB * 2**20
    monkeypatch.setenv("LETHE_MAX_INPUT_MB", "0.5")
    assert max_input_bytes() == 2**19
    for bad in ("0", "-3", "lots", "inf", "nan"):
        monkeypatch.setenv("LETHE_MAX_INPUT_MB", bad)
        with pytest.raises(ValueError, match="LETHE_MAX_INPUT_MB must be a positive number of megabytes"):
            max_input_bytes()
