"""Timings as records (`lethe_core.util.timing`): what README.md's timing table is generated from."""

import json
import os
import subprocess
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


def test_a_killed_step_leaves_its_segment_and_the_resumed_run_records_the_chain(monkeypatch):
    """The first run dies without warning (its heartbeat is all that is left), a second fails, the third completes:
    the record sums the three segments and keeps the first one's fresh-clone fact."""
    monkeypatch.setattr(timing, "HEARTBEAT", 0.05)
    killed = sys.executable, "-c", "import time, os, signal; time.sleep(0.3); os.kill(os.getppid(), signal.SIGKILL)"
    runner = [sys.executable, "-c", "import sys; from lethe_core.util import timing; timing.HEARTBEAT = 0.05; "
              "sys.exit(timing.main(sys.argv[1:]))", "make-study", "--fresh-clone", "--", *killed]
    assert subprocess.call(runner) == -9
    segment = json.loads(timing.inflight_file("make-study").read_text())
    assert segment["segments"] == 1 and segment["fresh_clone"] is True and 0.0 < segment["seconds"] < 5
    assert timing.latest("make-study") is None

    assert timing.main(["make-study", "--", sys.executable, "-c", "import time; time.sleep(0.2); raise SystemExit(2)"]) == 2
    failed = json.loads(timing.inflight_file("make-study").read_text())
    assert failed["segments"] == 2 and failed["seconds"] >= segment["seconds"] + 0.2

    assert timing.main(["make-study", "--", sys.executable, "-c", "pass"]) == 0
    done = timing.latest("make-study")
    assert done["segments"] == 3 and done["fresh_clone"] is True and done["seconds"] >= failed["seconds"] - 0.1
    assert not timing.inflight_file("make-study").exists()

    assert timing.main(["make-study", "--", sys.executable, "-c", "pass"]) == 0  # a new chain
    assert "segments" not in timing.latest("make-study") and timing.latest("make-study")["fresh_clone"] is False


def test_a_step_rerun_inside_the_chain_that_already_ran_it_is_marked_as_a_rerun():
    """make study runs make run; resumed, it runs make run again, which finds everything cached: that second record
    names the chain (the README's table skips it) while the first, and the chain's own record, stay measurements."""
    nested = ("import subprocess, sys; step = [sys.executable, '-m', 'lethe_core.util.timing', 'make-run', '--', sys.executable, '-c', 'pass']; "
              "sys.exit(subprocess.call(step) or subprocess.call(step))")
    assert timing.main(["make-study", "--", sys.executable, "-c", nested]) == 0
    runs = [e for e in timing.read() if e["name"] == "make-run"]
    assert [e.get("rerun_in") for e in runs] == [None, "make-study"]
    assert "rerun_in" not in timing.latest("make-study") and timing.OUTER not in os.environ
    assert timing.main(["make-run", "--", sys.executable, "-c", "pass"]) == 0  # on its own, outside any chain
    assert "rerun_in" not in timing.latest("make-run")


def test_a_command_that_cannot_start_leaves_no_chain():
    assert timing.main(["make-study", "--", "/nonexistent/command"]) == 127
    assert not timing.inflight_file("make-study").exists()


def test_a_step_held_with_sigstop_leaves_the_held_time_out(monkeypatch):
    """The command stops the runner for about a second and continues it: the heartbeat sees the silence and the
    record leaves it out (the runner's own wall clock would have counted it)."""
    monkeypatch.setattr(timing, "HEARTBEAT", 0.05)
    hold = ("import os, signal, time; parent = os.getppid(); time.sleep(0.2); os.kill(parent, signal.SIGSTOP); "
            "time.sleep(1.5); os.kill(parent, signal.SIGCONT); time.sleep(0.2)")
    assert timing.main(["make-study", "--", sys.executable, "-c", hold]) == 0
    rec = timing.latest("make-study")
    assert 1.0 < rec["paused_seconds"] < 1.6 and rec["seconds"] < 1.4


def test_sigterm_saves_the_segment_to_the_second():
    """`kill -TERM` (how a background make is stopped: it ignores SIGINT) leaves the exact segment, not the last beat."""
    runner = [sys.executable, "-c", "import sys; from lethe_core.util import timing; timing.HEARTBEAT = 60; "
              "sys.exit(timing.main(sys.argv[1:]))", "make-study", "--", sys.executable, "-c",
              "import os, signal, time; time.sleep(1.0); os.kill(os.getppid(), signal.SIGTERM); time.sleep(30)"]
    assert subprocess.call(runner) == 143
    segment = json.loads(timing.inflight_file("make-study").read_text())
    assert segment["segments"] == 1 and 1.0 <= segment["seconds"] < 5
