"""Every bad CLI value fails before any work: one `error:` line naming the option, exit code 2, nothing written.

These go through `main()`, the real entry point, so click's own parse errors are covered too.
"""

import json
import os

import pytest

from lethe_core.cli.main import main

SYN = ("synthetic:500", "--reranker", "test:lexical", "--encoder", "test:hash")


def run(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def fails(capsys, home, *args):
    """Exit 2, a single `error:` line on stderr, nothing on stdout and nothing created under LETHE_HOME."""
    code, out, err = run(capsys, *args)
    assert code == 2, (code, out, err)
    assert out == "" and err.count("\n") == 1 and err.startswith("error: "), err
    assert list(home.iterdir()) == [], "work started before the arguments were checked"
    return err.strip()


@pytest.mark.parametrize("args, expected", [
    (("systems", *SYN, "--limit-queries", "-5"), "--limit-queries must be >= 1, got -5"),
    (("systems", *SYN, "--limit-queries", "0"), "--limit-queries must be >= 1, got 0"),
    (("systems", *SYN, "--conversations", "0"), "--conversations must be >= 1, got 0"),
    (("pools", "build", *SYN, "--conversations", "-1"), "--conversations must be >= 1, got -1"),
    (("pools", "build", *SYN, "--k-leg", "0"), "--k-leg must be >= 1, got 0"),
    (("rif", "run", *SYN, "--seeds", "0"), "--seeds must be >= 1, got 0"),
    (("rif", "run", *SYN, "--burn-in", "-10"), "--burn-in must be >= 0, got -10"),
    (("rif", "run", *SYN, "--alpha", "-5"), "--alpha must be >= 0, got -5.0"),
    (("rif", "run", *SYN, "--eta", "-0.1"), "--eta must be >= 0, got -0.1"),
    (("rif", "sweep", *SYN, "--seeds", "0"), "--seeds must be >= 1, got 0"),
    (("reranker", "train", "locomo", "--folds", "0"), "--folds must be >= 1, got 0"),
    (("reranker", "train", "locomo", "--epochs", "0"), "--epochs must be >= 1, got 0"),
    (("notebooks", "build", "--small", "--backend", "fp8"), "--backend must be one of torch, onnx, onnx-int8, got 'fp8'"),
    (("notebooks", "build", "--small", "--reranker", "trained:nothing-here"), "--reranker trained:nothing-here"),
    (("reranker", "train", "locomo", "--negatives", "0"), "--negatives must be >= 1, got 0"),
    (("reranker", "train", "locomo", "--budget", "0"), "--budget must be a fraction in (0, 1], got 0.0"),
    (("reranker", "train", "locomo", "--budget", "1.5"), "--budget must be a fraction in (0, 1], got 1.5"),
    (("reranker", "train", "locomo", "--name", "../x"), "--name must be a plain folder name"),
    (("reranker", "train", "locomo", "--precision", "fp8"), "--precision must be fp32, bf16 or auto, got 'fp8'"),
    (("reranker", "curve", "locomo", "--point", "0.5:1"), "--point must be BUDGET:EPOCHS:NEGATIVES"),
    (("reranker", "curve", "locomo", "--point", "1.5:1:7"), "--point budget must be a fraction in (0, 1], got 1.5"),
    (("reranker", "curve", "locomo", "--point", "0.5:0:7"), "--point epochs must be >= 1, got 0"),
    (("pools", "build", *SYN, "--ray-address", "127.0.0.1:1"), "--ray-address needs --ray"),
    (("pools", "build", *SYN, "--ray", "--workers", "0"), "--workers must be >= 1, got 0"),
    (("data", "describe", "locomo-haystack:12x"), "DATASET 'locomo-haystack:12x': expected locomo-haystack[:N]"),
])
def test_ranges(capsys, isolated_home, args, expected):
    assert fails(capsys, isolated_home, *args).startswith(f"error: {expected}")


@pytest.mark.parametrize("args, expected", [
    (("rif", "run", *SYN, "--protocol", "magic"), "--protocol must be one of paper, heldout, prequential; got 'magic'"),
    (("rif", "sweep", *SYN, "--protocol", "magic"), "--protocol must be one of paper, heldout, prequential"),
    (("systems", *SYN, "--second-stage", "magic"), "--second-stage must be one of ce, fused; got 'magic'"),
    (("rif", "run", *SYN, "--second-stage", "x"), "--second-stage must be one of ce, fused"),
    (("rif", "sweep", *SYN, "--param", "nonsense"), "--param must be one of k, alpha, eta; got 'nonsense'"),
    (("rif", "sweep", *SYN, "--rule", "both"), "--rule must be one of uniform, gap; got 'both'"),
    (("rif", "sweep", *SYN, "--values", "a,b"), "--values must be comma-separated integers >= 1; got 'a'"),
    (("rif", "sweep", *SYN, "--values", "0,10"), "--values must be comma-separated integers >= 1; got '0'"),
    (("rif", "sweep", *SYN, "--values", "1.5"), "--values must be comma-separated integers >= 1; got '1.5'"),
    (("rif", "sweep", *SYN, "--param", "alpha", "--values", "0.1,-1"), "--values must be comma-separated numbers >= 0; got '-1'"),
    (("rif", "sweep", *SYN, "--param", "eta", "--values", "nan"), "--values must be comma-separated numbers >= 0; got 'nan'"),
    (("rif", "run", *SYN, "--arms", "global-gap,clustered30-gapp"), "--arms: unknown arm(s) 'clustered30-gapp'; known: baseline, control,"),
    (("pools", "build", *SYN, "--backend", "gpu"), "--backend must be one of auto, torch, onnx, onnx-int8; got 'gpu'"),
    (("systems", *SYN, "--backend", "cuda"), "--backend must be one of auto, torch, onnx, onnx-int8"),
    (("rif", "run", *SYN, "--backend", "x"), "--backend must be one of"),
    (("rif", "sweep", *SYN, "--backend", "x"), "--backend must be one of"),
])
def test_names(capsys, isolated_home, args, expected):
    assert fails(capsys, isolated_home, *args).startswith(f"error: {expected}")


@pytest.mark.parametrize("spec, expected", [
    ("magic:x", "--reranker must be auto | hub:<name> | local:<folder> | trained:<name> | test:lexical; got 'magic:x'"),
    ("trained:nope", "--reranker trained:nope: no trained reranker 'nope' under"),
    ("local:/nonexistent/folder", "--reranker local:/nonexistent/folder: no folder"),
    ("hub:nobody/no-such-model", "--reranker hub:nobody/no-such-model: 'nobody/no-such-model' is not in the Hugging Face cache"),
    ("test:magic", "--reranker must be auto"),
])
def test_reranker_spec(capsys, isolated_home, spec, expected):
    for cmd in (("systems",), ("rif", "run"), ("pools", "build")):
        err = fails(capsys, isolated_home, *cmd, "synthetic:500", "--encoder", "test:hash", "--reranker", spec)
        assert err.startswith(f"error: {expected}"), err


def test_trained_reranker_names_the_ones_that_exist(capsys, isolated_home, tmp_path, monkeypatch):
    (tmp_path / "home" / "models" / "mine").mkdir(parents=True)
    (tmp_path / "home" / "models" / "mine" / "trained.json").write_text("{}")
    monkeypatch.setenv("LETHE_HOME", str(tmp_path / "home"))
    code, _, err = run(capsys, "systems", "locomo", "--reranker", "trained:other")
    assert code == 2 and "trained here: mine" in err
    code, _, err = run(capsys, "reranker", "report", "other")
    assert code == 2 and err.startswith("error: NAME trained:other: no trained reranker 'other'")


@pytest.mark.parametrize("spec", ["test:magic", "nobody/no-such-encoder", "./missing-folder"])
def test_encoder_spec(capsys, isolated_home, spec):
    err = fails(capsys, isolated_home, "systems", "synthetic:500", "--reranker", "test:lexical", "--encoder", spec)
    assert err.startswith(f"error: --encoder {spec}") or err.startswith("error: --encoder must be"), err


@pytest.mark.parametrize("args, expected", [
    (("data", "describe", "synthetic:abc"), "DATASET 'synthetic:abc': synthetic takes a number of turns, synthetic:N with N in 100..1,000,000"),
    (("systems", "synthetic:50", "--reranker", "test:lexical"), "DATASET 'synthetic:50'"),
    (("rif", "run", "syntheticx", "--reranker", "test:lexical"), "DATASET 'syntheticx'"),
    (("data", "describe", "nosuch"), "DATASET must be one of locomo, realtalk, longmemeval, nfcorpus, beir, synthetic[:N_TURNS], "
                                      "locomo-haystack[:N_TURNS], locomo-haystack-msg[:N_TURNS]; got 'nosuch'"),
    (("pools", "build", "beir", "--reranker", "test:lexical"), "DATASET beir needs --path FOLDER"),
    (("reranker", "train", "nosuch"), "DATASET must be one of"),
])
def test_dataset_spec(capsys, isolated_home, args, expected):
    assert fails(capsys, isolated_home, *args).startswith(f"error: {expected}")


@pytest.mark.parametrize("args, expected", [
    (("rif", "run", "locomo", "--seeds", "x"), "Invalid value for '--seeds'"),
    (("systems", "locomo", "--limit-queries", "many"), "Invalid value for '--limit-queries'"),
    (("rif", "run", "locomo", "--sedes", "3"), "No such option: --sedes"),
    (("systems",), "Missing argument"),
    (("dashboard", "--port", "0"), "Invalid value for '--port'"),
    (("dashboard", "--port", "70000"), "Invalid value for '--port'"),
    (("nosuchcommand",), "No such command"),
])
def test_click_parse_errors_are_one_line(capsys, isolated_home, args, expected):
    err = fails(capsys, isolated_home, *args)
    assert err.startswith(f"error: {expected}") and "--help" in err, err


def test_help_still_works(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "systems" in out and "cache" in out
    code, out, _ = run(capsys, "rif", "run", "--help")
    assert code == 0 and "--backend" in out and "--arms" in out


def test_lethe_home_that_is_a_file(capsys, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.write_text("not a folder")
    monkeypatch.setenv("LETHE_HOME", str(home))
    code, out, err = run(capsys, "systems", *SYN)
    assert code == 2 and err.startswith(f"error: LETHE_HOME={home} is not a directory; point LETHE_HOME at a folder")
    assert err.count("\n") == 1 and home.read_text() == "not a folder"
    monkeypatch.setenv("LETHE_HOME", str(home / "sub"))  # under a file: cannot be created
    code, _, err = run(capsys, "pools", "build", *SYN)
    assert code == 2 and err.startswith(f"error: LETHE_HOME={home / 'sub'} is not writable (its nearest existing parent {home}")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into a read-only folder")
def test_lethe_home_not_writable(capsys, tmp_path, monkeypatch):
    home = tmp_path / "ro"
    home.mkdir(mode=0o500)
    monkeypatch.setenv("LETHE_HOME", str(home))
    code, _, err = run(capsys, "rif", "run", *SYN)
    assert code == 2 and err.startswith(f"error: LETHE_HOME={home} is not writable")


def test_pools_build_json_with_the_default_backend(capsys):
    code, out, err = run(capsys, "pools", "build", *SYN, "--limit-queries", "3", "--backend", "auto", "--json")
    assert code == 0, err
    assert json.loads(out.strip().splitlines()[-1])["n_queries"] == 3


def test_cache_stats(capsys):
    pytest.importorskip("lethe_core.inference.pair_cache")
    code, out, err = run(capsys, "cache", "stats", "--json")
    assert code == 0, err
    info = json.loads(out)
    assert "rerankers" in info and "last_build" in info
    code, out, _ = run(capsys, "cache", "stats")
    assert code == 0 and "pair-score cache" in out


# --- issue 24: subsets, bounded reads, a full disk, LETHE_HOME proved writable, encodable text ---------------------


def test_a_subset_reports_its_own_dropped_data(capsys):
    """`--conversations 2` once reported the whole file's 4 / 3 / 6; the two conversations run have 2 / 0 / 1."""
    code, out, err = run(capsys, "pools", "build", "locomo", "--conversations", "2", "--reranker", "test:lexical",
                         "--encoder", "test:hash", "--json")
    assert code == 0, err
    dropped = json.loads(out.strip().splitlines()[-1])["dropped"]
    assert (dropped["queries_without_qrels"], dropped["unresolved_evidence_ids"], dropped["normalised_evidence_ids"]) == (2, 0, 1)
    code, out, err = run(capsys, "pools", "build", "locomo", "--conversations", "2", "--reranker", "test:lexical",
                         "--encoder", "test:hash")
    assert code == 0, err
    assert ("dropped by the loader in the subset evaluated: queries without qrels: 2, normalised evidence ids: 1; in the whole "
            "file: queries without qrels: 4, unresolved evidence ids: 3, normalised evidence ids: 6 (") in out, out
    whole = json.loads(run(capsys, "pools", "build", "locomo", "--conversations", "2", "--reranker", "test:lexical", "--encoder",
                           "test:hash", "--json")[1].strip().splitlines()[-1])["dropped_whole_file"]
    assert (whole["queries_without_qrels"], whole["unresolved_evidence_ids"], whole["normalised_evidence_ids"]) == (4, 3, 6)


@pytest.mark.parametrize("args, expected", [
    (("systems", "locomo", "--conversations", "1000", "--reranker", "test:lexical", "--encoder", "test:hash"),
     "locomo10.json: --conversations 1000: locomo has 10 conversations; ask for 1 to 10"),
    (("rif", "run", *SYN, "--conversations", "3"), "--conversations 3: synthetic"),
])
def test_more_conversations_than_the_dataset_has(capsys, isolated_home, args, expected):
    err = fails(capsys, isolated_home, *args)
    assert expected in err and err.endswith("ask for 1 to 10" if "locomo" in args else "ask for 1 to 2"), err


def test_conversations_check_for_synthetic_needs_no_load():
    from lethe_core.cli import checks

    assert checks.conversations("synthetic:500", 2) == 2 and checks.conversations("locomo", 1000) == 1000  # the loader's
    with pytest.raises(checks.ArgError, match=r"^--conversations 3: synthetic:500 has 2 conversations; ask for 1 to 2$"):
        checks.conversations("synthetic:500", 3)
    with pytest.raises(checks.ArgError, match="synthetic has 10 conversations"):
        checks.conversations("synthetic", 11)


def test_lethe_home_where_nothing_can_be_created(capsys, monkeypatch):
    """As root, /proc passes the permission test; the command once failed with FileNotFoundError after loading."""
    monkeypatch.setenv("LETHE_HOME", "/proc/nope")
    for cmd in (("systems", *SYN), ("pools", "build", *SYN), ("reranker", "train", "locomo")):
        code, out, err = run(capsys, *cmd)
        assert code == 2 and out == "" and err.count("\n") == 1, (cmd, err)
        assert err.startswith("error: LETHE_HOME=/proc/nope is not writable (cannot create it: "), err


def test_devices_and_fifos_are_refused_not_read(capsys, isolated_home, tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for args, name, kind in [(("stats", "/dev/zero"), "/dev/zero", "a character device"),
                             (("data", "describe", "locomo", "--path", "/dev/zero"), "/dev/zero", "a character device"),
                             (("stats", str(fifo)), fifo, "a FIFO (named pipe)"),
                             (("data", "describe", "longmemeval", "--path", str(fifo)), fifo, "a FIFO (named pipe)")]:
        assert fails(capsys, isolated_home, *args) == f"error: {name}: is {kind}; expected a regular file"


def test_input_size_limit(capsys, isolated_home, tmp_path, monkeypatch):
    big = tmp_path / "per_query.json"
    big.write_text(json.dumps({"configs": [{"name": "baseline", "ndcg": [0.5] * 2000, "recall": [0.5] * 2000}]}))
    monkeypatch.setenv("LETHE_MAX_INPUT_MB", "0.01")
    err = fails(capsys, isolated_home, "stats", str(big))
    assert err.startswith(f"error: {big}: is 0.0 MB, above the input limit of 0.0 MB; set LETHE_MAX_INPUT_MB"), err


def test_a_lone_surrogate_names_file_record_and_field(capsys, isolated_home, tmp_path):
    from lethe_core.util.paths import shared_data_dir

    data = json.loads((shared_data_dir() / "locomo" / "locomo10.json").read_text())
    data[1]["conversation"]["session_2"][5]["text"] = "@@"
    bad = tmp_path / "surrogate.json"
    bad.write_text(json.dumps(data).replace('"@@"', r'"caf\u00e9 \ud800"'))
    for cmd in (("data", "describe", "locomo", "--path", str(bad)),
                ("systems", "locomo", "--path", str(bad), "--reranker", "test:lexical", "--encoder", "test:hash")):
        err = fails(capsys, isolated_home, *cmd)
        assert err.startswith(f"error: {bad}, record #1, field 'conversation.session_2[5].text': lone surrogate \\ud800"), err


def test_a_full_disk_is_one_error_line_naming_the_folder(capsys, isolated_home, monkeypatch):
    import errno

    import numpy as np

    def full(path, **arrays):
        with open(path, "wb") as fh:
            fh.write(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "savez", full)
    code, out, err = run(capsys, "pools", "build", *SYN)
    folder = isolated_home / "cache" / "embeddings" / "test-hash-384"
    errors = [ln for ln in err.splitlines() if "error" in ln]  # stderr also carries the embedding progress bar
    assert code == 2 and out == "" and len(errors) == 1 and err.rstrip("\n").endswith(errors[0]), err
    assert errors[0].startswith(f"error: the disk under {folder} is full: ") and " free; this write needed about " in err
    assert "Traceback" not in err and not list(folder.glob(".tmp-*"))


def test_fold_names_the_datasets_fold_teacher(capsys, isolated_home):
    """`pools build --reranker fold` (make study's deep-pool step) asks for LoCoMo's fold teacher by its recipe name."""
    from lethe_core.rerankers.recipes import fold_teacher

    err = fails(capsys, isolated_home, "pools", "build", "locomo", "--reranker", "fold", "--k-leg", "100")
    assert err.startswith(f"error: --reranker trained:{fold_teacher('locomo')}: no trained reranker"), err
