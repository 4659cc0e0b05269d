"""Render time of every dashboard page in headless Chromium on the newest results, plus the what-if replay.

Prints one JSON object: per page the seconds from navigation until its title and charts are
drawn (what a person waits for), on the first visit (cold caches) and on a later one, and `whatif_replay_seconds`,
the replay behind the what-if page measured directly (one arm, 5,000 steps, paper protocol).
Screenshots land in screenshots/ (gitignored).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "dashboard"))

import browser  # noqa: E402

from lethe_core.analysis import what_if  # noqa: E402
from lethe_core.results import list_runs, replay_context  # noqa: E402


def main() -> None:
    runs, problems = list_runs()
    runs.sort(key=lambda r: r.summary["protocol"] != "paper")  # the dashboard's default run
    if not runs:  # stale or broken folders are listed with the command that regenerates each
        raise SystemExit("\n".join(["no loadable results: run `lethe-lab rif run locomo --protocol paper` first", *problems]))
    ctx = replay_context(runs[0])
    what_if(ctx, 0.3, 0.1, 30, "gap")  # warm-up, as the page's second render would be
    t0 = time.perf_counter()
    what_if(ctx, 0.3, 0.1, 30, "gap")
    replay = time.perf_counter() - t0
    with browser.serve() as url:
        report = browser.capture(url, ROOT / "screenshots")
    print(json.dumps({"run": runs[0].run_id, "queries": len(ctx.pools.query_ids),
                      "pages_first_visit_s": {p: r["first"] for p, r in report.items()},
                      "pages_warm_s": {p: r["warm"] for p, r in report.items()}, "whatif_replay_seconds": round(replay, 2)}))


if __name__ == "__main__":
    main()
