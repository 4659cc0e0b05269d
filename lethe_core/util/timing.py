"""Wall times of the long steps (`make setup`, `make run`, `make test`, ...) as records, so no document types one.

Each measurement is one JSON line appended to `<results dir>/timings.jsonl`: the step's name, its seconds, when it
finished (UTC), the commit it ran (git HEAD, short), the cores it had, plus facts the caller states (`fresh_clone`,
`note`). README.md's timing table is generated from the latest record of each step (`lethe_core.report.documents`).

    python -m lethe_core.util.timing make-run [--fresh-clone] [--note TEXT] -- make run

runs the command with the terminal's stdio, records its wall time only when it exits 0 (a failed or killed step
measured nothing), and exits with the command's status.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from lethe_core.util.paths import REPO_ROOT, results_dir

FILE = "timings.jsonl"


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


def make_dry_run(makeflags: str | None = None) -> bool:
    """Whether make runs with -n (its MAKEFLAGS' first word holds the one-letter flags): a dry run still executes the
    recursive `$(MAKE)` lines this wraps, but it measures nothing and must not leave a record."""
    flags = os.environ.get("MAKEFLAGS", "") if makeflags is None else makeflags
    first = flags.split()[0] if flags.split() and not flags.startswith(" ") else ""
    return not first.startswith("-") and "n" in first


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
    start = time.perf_counter()
    try:
        status = subprocess.call(argv[cut + 1:])
    except OSError as exc:  # the command cannot start (not found, not executable): the shell's status for it
        print(f"error: cannot run {argv[cut + 1]!r}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    if status == 0 and not make_dry_run():
        facts = {"fresh_clone": args.fresh_clone, **({"note": args.note} if args.note else {})}
        record(args.name, time.perf_counter() - start, **facts)
    return status


if __name__ == "__main__":
    sys.exit(main())
