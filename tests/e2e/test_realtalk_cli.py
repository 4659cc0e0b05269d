"""`lethe-lab data describe realtalk` end to end (docs/realtalk.md)."""

import json

from typer.testing import CliRunner

from lethe_core.cli.main import app

runner = CliRunner()


def test_describe_realtalk_json_is_complete_and_deterministic():
    runs = [runner.invoke(app, ["data", "describe", "realtalk", "--json"]) for _ in range(2)]
    assert all(r.exit_code == 0 for r in runs), runs[0].output
    assert runs[0].stdout == runs[1].stdout
    info = json.loads(runs[0].stdout)
    assert info["dataset"] == "realtalk"
    assert (info["conversations"], info["sessions"], info["turns"]) == (10, 219, 8944)
    assert info["queries"] >= 700 and set(info["queries_by_type"]) == {"fact", "date", "inference"}
    assert info["unresolved_evidence"] and info["dropped"]["unresolved_evidence_ids"] == len(info["unresolved_evidence"])
    assert all({"raw", "piece", "reason", "query"} <= set(u) for u in info["unresolved_evidence"])
    assert info["queries"] + info["dropped"]["queries_without_qrels"] == 728


def test_describe_realtalk_one_file_and_a_bad_one(tmp_path):
    from lethe_core.util.paths import shared_data_dir

    one = shared_data_dir() / "realtalk" / "Chat_1_Emi_Elise.json"
    res = runner.invoke(app, ["data", "describe", "realtalk", "--path", str(one), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["conversations"] == 1
    bad = tmp_path / "Chat_1_x.json"
    bad.write_text('{"session_1": []}')
    res = runner.invoke(app, ["data", "describe", "realtalk", "--path", str(bad)])
    assert res.exit_code != 0
    assert "Chat_1_x.json, record rt-1, field 'qa': missing" in res.output
    assert "Traceback" not in res.output
