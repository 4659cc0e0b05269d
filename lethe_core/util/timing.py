"""Wall times of the long steps (`make setup`, `make run`, `make test`, ...) as records, so no document types one.

Each measurement is one JSON line appended to `<results dir>/timings.jsonl`: the step's name, its seconds, when it
finished (UTC), the commit it ran (git HEAD, short), the cores it had, plus facts the caller states (`fresh_clone`,
`note`). README.md's timing table is generated from the latest record of each step (`lethe_core.report.documents`).

    python -m lethe_core.util.timing make-run [--fresh-clone] [--note TEXT] -- make run

runs the command with the terminal's stdio, records its wall time only when it exits 0, and exits with the command's
status.

Resumable steps (`make study` runs for hours; a session or a machine may stop it) are measured across their resumes:
while a step runs, `<results dir>/timings-inflight/<name>.json` holds its elapsed seconds (rewritten every
`HEARTBEAT` seconds), so a step killed without warning leaves its segment behind, at most one heartbeat short. The
next run of the same step continues that chain: its record's `seconds` is the sum of every segment's wall time
(`segments` counts them, `commits` lists the code each ran), and `fresh_clone` is the first segment's, since a resume
finds the caches the first one wrote. Work a kill lost is redone, so a chained time is an upper bound on one
uninterrupted run. The steps a resumed chain runs again (`make study` reruns `make run` and `make matrix`, which
find their outputs cached and finish in seconds) are recorded with `rerun_in`, naming the chain: their first run in
the same chain already measured them, so the README's table leaves the rerun out. A step held with SIGSTOP
(`kill -STOP`, to free the cores for a while) and continued does not lose its work; the heartbeat sees the gap (no
beat for `PAUSED_AFTER` seconds) and leaves it out, recorded as `paused_seconds`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from lethe_core.util.paths import REPO_ROOT, results_dir
from lethe_core.util.storage import atomic_write

FILE = "timings.jsonl"
INFLIGHT = "timings-inflight"
HEARTBEAT = 30.0
PAUSED_AFTER = 4  # heartbeats: a longer silence is a stopped process (or a suspended machine), not a busy one
OUTER = "LETHE_TIMING_CHAIN"  # "<name> <first segment's start, UTC>" of the outermost running chain, for the steps it runs


def timings_file(results_root: Path | None = None) -> Path:
    return Path(results_root or results_dir()) / FILE


def head_commit() -> str | None:
    """git HEAD's short sha in the repository, or None (no git, not a clone): a record says which code it timed."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def record(name: str, seconds: float, **facts) -> dict:
    """Append one record and return it. One short line written with O_APPEND in a single call, so concurrent steps
    do not interleave."""
    entry = {"name": name, "seconds": round(float(seconds), 1),
             "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
             "commit": head_commit(), "cpu_count": os.cpu_count(), **facts}
    path = timings_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")
    return entry


def read(results_root: Path | None = None) -> list[dict]:
    """Every record, oldest first; a line a kill left unfinished is skipped, not an error."""
    path = timings_file(results_root)
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and "name" in entry and "seconds" in entry:
            out.append(entry)
    return out


def latest(name: str, results_root: Path | None = None) -> dict | None:
    """The newest record of step `name` (the last appended), or None."""
    return next((e for e in reversed(read(results_root)) if e["name"] == name), None)


def inflight_file(name: str, results_root: Path | None = None) -> Path:
    return Path(results_root or results_dir()) / INFLIGHT / f"{name}.json"


class Chain:
    """The segments of one step measured so far (earlier, interrupted runs) plus the running one."""

    def __init__(self, name: str, fresh_clone: bool):
        self.path = inflight_file(name)
        try:
            prior = json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError):
            prior = {}
        self.name = name
        self.earlier = float(prior.get("seconds", 0.0))
        self.segments = int(prior.get("segments", 0)) + 1
        self.commits = [c for c in prior.get("commits", []) if c]
        self.fresh_clone = bool(prior["fresh_clone"]) if prior else fresh_clone
        self.paused = float(prior.get("paused_seconds", 0.0))
        self.started = prior.get("started") or datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._outer = False
        commit = head_commit()
        if commit and commit not in self.commits:
            self.commits.append(commit)
        self.start = self._last = time.perf_counter()
        self._paused_here = 0.0
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, daemon=True)

    def elapsed(self) -> float:
        return self.earlier + time.perf_counter() - self.start - self._paused_here

    def paused_seconds(self) -> float:
        return round(self.paused + self._paused_here, 1)

    def save(self) -> None:
        """Written whole or not at all: a kill mid-write keeps the previous state."""
        state = {"name": self.name, "seconds": round(self.elapsed(), 1), "segments": self.segments, "commits": self.commits,
                 "fresh_clone": self.fresh_clone, "paused_seconds": self.paused_seconds(), "started": self.started,
                 "updated": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, lambda p: p.write_text(json.dumps(state)))

    def _tick(self) -> None:
        """Leave out a silence longer than PAUSED_AFTER heartbeats (all but the one beat it should have lasted)."""
        now = time.perf_counter()
        gap = now - self._last
        if gap > PAUSED_AFTER * HEARTBEAT:
            self._paused_here += gap - HEARTBEAT
        self._last = now

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT):
            self._tick()
            self.save()

    def __enter__(self) -> Chain:
        if OUTER not in os.environ:  # the steps this one runs (subprocesses inherit it) can tell a rerun
            os.environ[OUTER] = f"{self.name} {self.started}"
            self._outer = True
        self.save()
        self._beat.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._beat.join()
        self._tick()
        if self._outer:
            os.environ.pop(OUTER, None)

    def facts(self) -> dict:
        """What the finished chain's record adds: its segments only when it was resumed."""
        facts = {"fresh_clone": self.fresh_clone}
        if self.segments > 1:
            facts |= {"segments": self.segments, "commits": self.commits}
        paused = self.paused_seconds()
        return facts | ({"paused_seconds": paused} if paused else {})


def rerun_in(name: str, results_root: Path | None = None) -> str | None:
    """The outer chain (`OUTER`) in which step `name` already finished once, or None: a resumed `make study` runs its
    finished steps again, and that rerun only rereads what the first run made."""
    outer = os.environ.get(OUTER, "")
    chain, _, since = outer.partition(" ")
    if not since or chain == name:
        return None
    return chain if any(e["name"] == name and e["finished"] >= since for e in read(results_root)) else None


def make_dry_run(makeflags: str | None = None) -> bool:
    """Whether make runs with -n (its MAKEFLAGS' first word holds the one-letter flags): a dry run still executes the
    recursive `$(MAKE)` lines this wraps, but it measures nothing and must not leave a record."""
    flags = os.environ.get("MAKEFLAGS", "") if makeflags is None else makeflags
    first = flags.split()[0] if flags.split() and not flags.startswith(" ") else ""
    return not first.startswith("-") and "n" in first


class _Terminated(Exception):
    """SIGTERM, raised in the main thread so the chain is saved to the second (a background make ignores SIGINT)."""


def _terminate(signum, frame):
    raise _Terminated


def _call(command: list[str]) -> int:
    """The command's exit status; 127 when it cannot start (the shell's status for that), 130 on Ctrl-C, 143 on SIGTERM."""
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return subprocess.call(command)
    except OSError as exc:
        print(f"error: cannot run {command[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    except KeyboardInterrupt:
        return 130
    except _Terminated:
        return 143
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        print("usage: python -m lethe_core.util.timing NAME [--fresh-clone] [--note TEXT] -- CMD [ARGS...]", file=sys.stderr)
        return 2
    cut = argv.index("--")
    parser = argparse.ArgumentParser(prog="python -m lethe_core.util.timing")
    parser.add_argument("name")
    parser.add_argument("--fresh-clone", action="store_true", help="the step ran on a fresh clone (empty data/, no venv)")
    parser.add_argument("--note", default=None)
    args = parser.parse_args(argv[:cut])
    if make_dry_run():  # executes the recursive lines, measures nothing
        return _call(argv[cut + 1:])
    with Chain(args.name, args.fresh_clone) as chain:
        status = _call(argv[cut + 1:])
    seconds = chain.elapsed()
    if status == 0:
        rerun = rerun_in(args.name)
        record(args.name, seconds, **chain.facts(), **({"note": args.note} if args.note else {}),
               **({"rerun_in": rerun} if rerun else {}))
        chain.path.unlink(missing_ok=True)
    elif status == 127 and chain.segments == 1:  # it did nothing: no chain to resume
        chain.path.unlink(missing_ok=True)
    else:  # failed or interrupted: a rerun resumes its work, so its time stays in the chain
        chain.save()
    return status


if __name__ == "__main__":
    sys.exit(main())
