"""The CLI end to end on small real data (bundled MiniLM, lexical test reranker)."""

import json
from pathlib import Path
import subprocess
import sys

from typer.testing import CliRunner

from lethe_core.cli.main import app
from lethe_core.experiments.systems import pool_recall

runner = CliRunner()


def invoke(*args):
    result = runner.invoke(app, list(args))
    return result


def test_describe_locomo_json():
    res = invoke("data", "describe", "locomo", "--json")
    assert res.exit_code == 0, res.output
    info = json.loads(res.stdout)
    for key in ("dataset", "turns", "sessions", "conversations", "queries", "queries_by_type", "qrels", "unresolved_evidence"):
        assert key in info
    assert (info["turns"], info["sessions"], info["conversations"]) == (5882, 272, 10)
    assert info["queries"] >= 1530 and len(info["unresolved_evidence"]) == 3


def test_describe_haystack_json_is_the_same_corpus_twice():
    runs = [invoke("data", "describe", "locomo-haystack:8000", "--json") for _ in range(2)]
    assert all(r.exit_code == 0 for r in runs), runs[0].output
    info = [json.loads(r.stdout) for r in runs]
    assert info[0] == info[1]
    assert info[0]["turns"] == 8000 and info[0]["queries"] >= 1530 and info[0]["conversations"] > 10


def test_bad_path_is_one_clear_line(tmp_path):
    res = invoke("data", "describe", "locomo", "--path", str(tmp_path / "missing.json"))
    assert res.exit_code == 2
    assert "missing.json: file not found" in res.output and "Traceback" not in res.output


def test_unknown_dataset_and_reranker():
    assert "DATASET must be one of" in invoke("data", "describe", "nosuch").output
    res = invoke("systems", "synthetic:300", "--reranker", "magic:x")
    assert res.exit_code == 2 and "--reranker must be auto" in res.output


def test_systems_json_is_deterministic_and_complete():
    args = ("systems", "locomo", "--conversations", "1", "--limit-queries", "40", "--reranker", "test:lexical", "--json")
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    a = json.loads(first.stdout.strip().splitlines()[-1])
    assert a["dataset"] == "locomo" and a["reranker"] == "test:lexical" and a["n_queries"] == 40
    names = [s["name"] for s in a["systems"]]
    assert names == ["vector", "bm25", "rrf", "vector_rerank", "full", "control"]
    for s in a["systems"]:
        assert 0 <= s["ndcg@10"] <= 1 and 0 <= s["recall@10"] <= 1 and 0 <= pool_recall(s) <= 1
    by = {s["name"]: s for s in a["systems"]}
    # The control arm reranks the whole union, so its pool recall can only be higher.
    assert pool_recall(by["control"]) >= pool_recall(by["full"]) == pool_recall(by["rrf"])
    b = json.loads(invoke(*args).stdout.strip().splitlines()[-1])  # second run reads the cached pools
    assert a["systems"] == b["systems"]


def test_systems_tokenizer_scope_and_audited_labels():
    """The checkpoint-8/10 variants from the command line: a tokenizer, the per-conversation scope, audited labels."""
    args = ("--conversations", "2", "--limit-queries", "30", "--reranker", "test:lexical", "--encoder", "test:hash", "--json")
    res = invoke("systems", "locomo", *args, "--tokenizer", "regex-porter", "--scope", "conversation")
    assert res.exit_code == 0, res.output
    a = json.loads(res.stdout.strip().splitlines()[-1])
    assert (a["config"]["pipeline"]["tokenizer"], a["config"]["pipeline"]["scope"]) == ("regex-porter", "conversation")
    assert {"hit@1", "hit@10", "recall_all@10", "mrr@10"} <= set(a["systems"][0])
    audited = invoke("systems", "locomo-audited", *args)
    assert audited.exit_code == 0, audited.output
    assert json.loads(audited.stdout.strip().splitlines()[-1])["dataset"] != "locomo"
    bad = invoke("systems", "locomo", *args, "--tokenizer", "whitespace")
    assert bad.exit_code == 2 and "--tokenizer" in bad.output and "Traceback" not in bad.output


def test_module_entry_point():
    out = subprocess.run([sys.executable, "-m", "lethe_core", "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "systems" in out.stdout


def test_rif_run_three_protocols_deterministic_json():
    base = ("rif", "run", "locomo", "--conversations", "2", "--reranker", "test:lexical", "--encoder", "test:hash",
            "--seeds", "2", "--burn-in", "600", "--arms", "global-gap,clustered10-gap,control", "--json")
    for protocol in ("paper", "heldout", "prequential"):
        args = (*base, "--protocol", protocol)
        first = invoke(*args)
        assert first.exit_code == 0, first.output
        a = json.loads(first.stdout.strip().splitlines()[-1])
        assert a["protocol"] == protocol and a["seeds"] == [42, 43] and a["reranker"] == "test:lexical"
        assert a["logit_reading"] == "raw"  # the paper's reading, the default (the lexical scorer has no calibration)
        assert [x["name"] for x in a["arms"]] == ["baseline", "global-gap", "clustered10-gap", "control"]
        for arm in a["arms"]:
            assert {"mean", "ci", "seed_sd"} <= set(arm["ndcg@10"]) and "p_holm" in arm and "recall@30" in arm
            assert "suppressed_entries" in arm and "delta_ndcg" in arm
        recomputed = invoke(*args, "--overwrite")
        assert "reusing" not in recomputed.output
        b = json.loads(recomputed.stdout.strip().splitlines()[-1])
        assert a["arms"] == b["arms"]  # same seeds, same numbers
        assert (Path(a["results_dir"]) / "per_query.parquet").exists()
        reused = invoke(*args)  # the finished run with this config is read back, and says so
        assert "reusing the finished run" in reused.output and json.loads(reused.stdout.strip().splitlines()[-1])["arms"] == a["arms"]


def test_rif_unknown_arm_and_protocol():
    res = invoke("rif", "run", "synthetic:500", "--arms", "nonsense", "--reranker", "test:lexical", "--encoder", "test:hash")
    assert res.exit_code == 2 and "--arms: unknown arm(s) 'nonsense'" in res.output
    res = invoke("rif", "run", "synthetic:500", "--protocol", "magic", "--reranker", "test:lexical")
    assert res.exit_code == 2 and "--protocol must be one of paper, heldout, prequential" in res.output


def test_rif_sweep_over_k():
    res = invoke("rif", "sweep", "locomo", "--conversations", "2", "--reranker", "test:lexical", "--encoder", "test:hash", "--param", "k",
                 "--values", "1,10", "--rule", "gap", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert [r["arm"] for r in out["rows"]] == ["global-gap", "clustered10-gap"]
    assert all(-1 <= r["delta_ndcg"] <= 1 and r["p"] is not None for r in out["rows"])


def test_pools_build_then_resume():
    args = ("pools", "build", "synthetic:500", "--reranker", "test:lexical", "--encoder", "test:hash")
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    assert "18 query pools" in first.output and "[reranker test:lexical]" in first.output
    again = invoke(*args)  # everything cached: same answer, nothing rebuilt
    summary = first.output[first.output.index("18 query pools"):].strip()
    assert again.exit_code == 0 and summary in again.output and "pools synthetic-500" not in again.output  # no progress: nothing rebuilt


def _beir_with_gaps(folder: Path) -> Path:
    """40 documents; q1 fine, q2 with one qrel to an unknown document, q3 with only unknown documents (dropped)."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = [{"_id": f"d{i}", "title": "", "text": f"note {i} about topic{i % 5} and item{i}"} for i in range(40)]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs))
    queries = [{"_id": "q1", "text": "topic1 item1"}, {"_id": "q2", "text": "topic2 item2"}, {"_id": "q3", "text": "topic3"}]
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries))
    (folder / "qrels").mkdir(exist_ok=True)
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\nq2\tnope\t1\nq3\tgone\t1\n")
    return folder


def test_dropped_data_is_reported_where_results_are_made(tmp_path):
    folder = _beir_with_gaps(tmp_path / "gaps")
    common = ("beir", "--path", str(folder), "--reranker", "test:lexical", "--encoder", "test:hash")
    hint = f"(see `lethe-lab data describe beir --path {folder} --json`)"
    res = invoke("pools", "build", *common)
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.output.splitlines() if ln.startswith("dropped by the loader:"))
    assert "queries without qrels: 1" in line and "qrels to unknown turns: 2" in line and line.endswith(hint)
    res = invoke("systems", *common)
    assert res.exit_code == 0, res.output
    assert line in res.output.splitlines()
    res = invoke("systems", *common, "--json")
    dropped = json.loads(res.stdout.strip().splitlines()[-1])["dropped"]
    assert dropped["queries_without_qrels"] == 1 and dropped["qrels_to_unknown_turns"] == 2


def test_rif_burn_in_zero_means_no_burn_in():
    """`--burn-in 0` is a run without learning (once silently read as the 5,000-step default)."""
    res = invoke("rif", "run", "synthetic:500", "--reranker", "test:lexical", "--encoder", "test:hash", "--burn-in", "0",
                 "--seeds", "2", "--arms", "global-gap,clustered10-gap", "--json")
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout.strip().splitlines()[-1])
    assert s["burn_in"] == 0 and all(a["delta_ndcg"]["mean"] == 0 for a in s["arms"])
