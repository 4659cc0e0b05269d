"""Generated blocks of README.md and docs/*.md (`lethe_core.report.documents`, `lethe-lab docs refresh`)."""

import json

import pytest

from lethe_core.cli.main import main
from lethe_core.report import documents
from lethe_core.report.documents import DocumentError, blocks, hand_written, not_generated, refresh


def _point(budget, full, control):
    return {"budget": budget, "epochs": 1, "negatives": 7, "steps_per_fold": [54, 54], "train_minutes": 1.6,
            "full": full, "full_ci": [full - 0.01, full + 0.01], "control": control, "control_ci": [control - 0.01, control + 0.01],
            "control_minus_full": {"mean": control - full, "ci": [control - full - 0.005, control - full + 0.005]},
            "full_minus_rrf": {"mean": full - 0.3}}


def _curve(root):
    folder = root / "learning_curve"
    folder.mkdir(parents=True)
    summary = {"dataset": "locomo", "precision": "bf16", "second_stage": "ce", "config": {"backend": "onnx"},
               "points": [_point(0.1, 0.25, 0.2), _point(1.0, 0.5, 0.5)]}
    (folder / "summary.json").write_text(json.dumps(summary))


def _doc(tmp_path, body):
    path = tmp_path / "doc.md"
    path.write_text(f"# Title\n\nProse.\n\n{body}\nAfter.\n")
    return path


def _block(name, inner):
    return f"<!-- generated: {name} · source: stale -->\n{inner}\n<!-- /generated: {name} -->\n"


def test_a_block_is_rewritten_from_its_results_folder(tmp_path):
    _curve(tmp_path / "results")
    path = _doc(tmp_path, _block("learning-curve", "| old table |"))
    assert refresh(path, tmp_path / "results") == [("learning-curve", "generated")]
    text = path.read_text()
    assert "| old table |" not in text and "| 10% | 1 | 7 | 54 / 54 | 1.6 | 0.2500 [0.2400, 0.2600] |" in text
    assert "training precision `bf16`" in text and "evaluation backend `onnx`" in text
    assert text.startswith("# Title\n\nProse.\n\n") and text.endswith("<!-- /generated: learning-curve -->\n\nAfter.\n")
    assert f"source: {documents.GENERATORS['learning-curve'].source} -->" in text  # the marker names the real source
    assert refresh(path, tmp_path / "results") == [("learning-curve", "unchanged")]


def test_a_block_whose_source_is_absent_is_kept_verbatim(tmp_path):
    path = _doc(tmp_path, _block("learning-curve", "| a table from another machine |"))
    status = refresh(path, tmp_path / "results")
    assert status[0][0] == "learning-curve" and status[0][1].startswith("kept") and "lethe-lab reranker curve locomo" in status[0][1]
    assert "| a table from another machine |" in path.read_text()


def test_an_empty_block_without_its_source_gets_the_note_naming_the_command(tmp_path):
    path = _doc(tmp_path, _block("haystack-study", ""))
    refresh(path, tmp_path / "results")
    assert not_generated("haystack-study") in path.read_text()
    assert "`make haystack`" in not_generated("haystack-study")


def test_timings_table_reads_the_latest_measured_record_of_each_step_in_order(tmp_path):
    root = tmp_path / "results"
    root.mkdir()
    rows = [{"name": "make-test", "seconds": 656.0, "finished": "2026-12-05T10:00:00+00:00", "commit": "abc1234", "cpu_count": 2,
             "fresh_clone": True},
            {"name": "make-setup", "seconds": 200.0, "finished": "2026-12-04T09:00:00+00:00", "commit": "0ebcd28", "cpu_count": 2},
            {"name": "make-setup", "seconds": 108.0, "finished": "2026-12-05T09:00:00+00:00", "commit": "abc1234", "cpu_count": 2,
             "fresh_clone": True, "note": "from the local pip cache"},
            {"name": "make-setup", "seconds": 2.0, "finished": "2026-12-07T08:00:00+00:00", "commit": "def5678", "cpu_count": 2,
             "rerun_in": "make-study"},
            {"name": "make-study", "seconds": 7384.0, "finished": "2026-12-07T09:00:00+00:00", "commit": "def5678", "cpu_count": 2,
             "fresh_clone": True, "segments": 2, "commits": ["abc1234", "def5678"], "paused_seconds": 900.0}]
    (root / "timings.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"name": "make-ru')  # a torn last line
    table = documents.timings(root).splitlines()
    assert table[2] == "| `make setup` (from the local pip cache) | 1 min 48 s | abc1234 | 2026-12-05 | 2 | fresh clone |"
    assert table[3] == ("| `make study`: make run, make teachers, make matrix, the deep pools, the notebook build (2 resumed segments summed; work a stop lost was redone; 15 min 0 s held with SIGSTOP left out) | 2 h 3 min 4 s "
                        "| abc1234, def5678 | 2026-12-07 | 2 | fresh clone |")
    assert table[4] == "| `make test` | 10 min 56 s | abc1234 | 2026-12-05 | 2 | fresh clone |"
    assert len(table) == 5 and documents.timings(tmp_path / "nothing") is None


def _gain(delta, p_holm=0.5):
    return {"delta": delta, "ci": [delta - 0.01, delta + 0.01], "p_holm": p_holm, "vs_control": {"mean": -0.01, "ci": [-0.02, 0.0]}}


def _size(dataset, turns, saturation):
    sysrow = {"ndcg@10": 0.5, "ndcg@10_ci": [0.49, 0.51]}
    return {"dataset": dataset, "turns": turns, "systems": {n: sysrow for n in ("rrf", "full", "control")},
            "protocols": {"paper": {"gains": {a: _gain(0.001) for a in ("clustered30-gap", "global-gap", "control")},
                                    "saturation": {"global-gap": saturation, "clustered30-gap": saturation / 2}}},
            "duplicates": {"top30": {"share": 0.01}}, "seconds": {"load": 2.0, "pools": 145.0, "systems": 3.0, "rif_paper": 50.0}}


def test_haystack_blocks_read_the_study_summary(tmp_path):
    folder = tmp_path / "haystack_study"
    folder.mkdir()
    summary = {"reranker": "trained:x", "protocols": ["paper"], "seeds": [42, 43],
               "sizes": [_size("locomo", 5882, 0.6), _size("locomo-haystack", 144607, 0.08)]}
    (folder / "summary.json").write_text(json.dumps(summary))
    study = documents.haystack_study(tmp_path)
    assert "| locomo-haystack | 144,607 |" in study and "- At 144,607 turns" in study
    stages = documents.haystack_stages(tmp_path)
    assert "| locomo | 5,882 | 2 s | 2 min 25 s | 3 s | 50 s |" in stages
    assert documents.haystack_study(tmp_path / "nothing") is None and documents.haystack_stages(tmp_path / "nothing") is None


def test_unknown_block_name_is_an_error_naming_file_block_and_line(tmp_path):
    path = _doc(tmp_path, _block("no-such-table", "x"))
    with pytest.raises(DocumentError, match=r"doc\.md, line 5: unknown generated block 'no-such-table'"):
        refresh(path, tmp_path)


def test_unclosed_block_is_an_error_naming_file_block_and_line(tmp_path):
    path = _doc(tmp_path, "<!-- generated: timings · source: x -->\n| t |\n")
    with pytest.raises(DocumentError, match=r"doc\.md, line 5: generated block 'timings' is not closed"):
        refresh(path, tmp_path)
    two = _block("timings", "a").replace("<!-- /generated: timings -->\n", "") + _block("learning-curve", "b")
    with pytest.raises(DocumentError, match=r"line 1: generated block 'timings' is not closed before block 'learning-curve' opens at line 3"):
        blocks(two, "doc.md")
    with pytest.raises(DocumentError, match=r"line 3: closing marker of block 'timings', but no block is open"):
        blocks("a\n\n<!-- /generated: timings -->\n", "doc.md")
    with pytest.raises(DocumentError, match="malformed"):
        blocks("<!-- generated: timings -->\n", "doc.md")


def test_markers_in_fenced_code_are_text_and_hand_written_drops_code_and_blocks():
    text = ("Typed 0.25 here.\n\n```text\n<!-- generated: nope · source: x -->\n0.99\n```\n\nA `0.77` span.\n\n"
            + _block("timings", "| 1 min 48 s | 0.55 |"))
    assert blocks(text) == [documents.Block("timings", 9, 11)]
    prose = hand_written(text)
    assert "0.25" in prose and not any(x in prose for x in ("0.99", "0.77", "0.55", "generated"))


def test_cli_refresh_reports_each_block_and_fails_in_one_line(tmp_path, capsys):
    path = _doc(tmp_path, _block("timings", "x"))
    with pytest.raises(SystemExit) as done:
        main(["docs", "refresh", str(path)])
    assert done.value.code == 0 and "timings: kept" in capsys.readouterr().out
    bad = _doc(tmp_path, _block("nope", "x"))
    with pytest.raises(SystemExit) as done:
        main(["docs", "refresh", str(bad)])
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.startswith("error: ") and "unknown generated block 'nope'" in err and err.count("\n") == 1
