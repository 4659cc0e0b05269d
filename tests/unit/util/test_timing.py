"""Timings as records (`lethe_core.util.timing`): what README.md's timing table is generated from."""

import json
import sys

from lethe_core.util import timing
from lethe_core.util.paths import results_dir


def test_record_appends_one_line_with_its_facts_and_latest_reads_the_newest():
    first = timing.record("make-setup", 108.04, fresh_clone=True, note="local pip cache")
    timing.record("make-setup", 95.0, fresh_clone=False)
    lines = (results_dir() / "timings.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0]) == first
    assert first["seconds"] == 108.0 and first["finished"].endswith("+00:00") and first["cpu_count"] >= 1
    assert first["commit"] is None or len(first["commit"]) >= 4
    assert timing.latest("make-setup")["seconds"] == 95.0 and timing.latest("make-test") is None


def test_the_runner_records_a_command_that_succeeds_and_passes_on_its_status():
    ok = timing.main(["notebooks-build", "--note", "two jobs", "--", sys.executable, "-c", "pass"])
    failed = timing.main(["make-test", "--", sys.executable, "-c", "raise SystemExit(3)"])
    assert (ok, failed) == (0, 3)
    assert timing.latest("notebooks-build")["note"] == "two jobs" and timing.latest("notebooks-build")["fresh_clone"] is False
    assert timing.latest("make-test") is None  # a failed step measured nothing
    assert timing.main(["make-test"]) == 2 and timing.main(["make-test", "--", "/nonexistent/command"]) == 127


def test_a_make_dry_run_leaves_no_record():
    assert timing.make_dry_run("n --no-print-directory") and timing.make_dry_run("in")
    assert not timing.make_dry_run(" --no-print-directory") and not timing.make_dry_run("") and not timing.make_dry_run("-j2")
