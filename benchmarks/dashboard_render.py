"""Render time of every dashboard page in headless Chromium on the newest results, plus the what-if replay.

Prints one JSON object: per page the seconds from navigation until its title and charts are
drawn (what a person waits for), on the first visit (cold caches) and on a later one, and `whatif_replay_seconds`,
the replay behind the what-if page measured directly (one arm, 5,000 steps, paper protocol).
Screenshots land in screenshots/ (gitignored).

`tasks_s`: what a person does, timed in Chromium on the dashboard's default run against `BUDGETS_S`: open a shared link
to a run's what-if page at a seed (`deep_link`), then press Run replay until its numbers show (`whatif_run`). A task over
its budget is listed in `over_budget` and, at full size, fails the benchmark (exit 1); `--smoke` only reports it.

`--smoke`: seconds, what tests/benchmarks/test_benchmarks_smoke.py runs: a tiny run made here (synthetic:2000, lexical
test reranker, hashing encoder) in a temporary LETHE_HOME, the replay at 300 steps, and the overview page only (in
Chromium when it is installed; without it `pages_first_visit_s` is null and `browser` says why).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "dashboard"))

import browser  # noqa: E402

from lethe_core.results.analysis import what_if  # noqa: E402
from lethe_core.results.catalog import catalog, default_entry  # noqa: E402
from lethe_core.results.runs import list_runs, replay_context  # noqa: E402

# The most seconds a person should wait for each task on `make run` results (2 cores): issue 23 asks for answers in ten.
BUDGETS_S = {"deep_link": 10.0, "whatif_run": 10.0}


def tiny_results() -> None:
    """A small real run under the current LETHE_HOME (seconds: no query map)."""
    from lethe_core.experiments.rif import RIFExperiment
    from lethe_core.experiments.setup import DataSpec
    from lethe_core.retrieval.pipeline import PipelineConfig

    data = DataSpec(dataset="synthetic:2000", reranker="test:lexical", pipeline=PipelineConfig(encoder="test:hash"), progress=False)
    RIFExperiment(data, arms=["clustered10-gap", "control"], seeds=1, burn_in=300, map=False).run()  # control: the overview draws both forests


def timed_tasks(url: str, run_id: str, seed: int, timeout: float = 120) -> dict[str, float]:
    """Seconds for each task of BUDGETS_S, in a fresh browser: a link opens the run's what-if page, then Run replay."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser._driver()
    wait = WebDriverWait(driver, timeout, poll_frequency=0.05)
    times = {}
    try:
        t0 = time.perf_counter()
        driver.get(f"{url}/whatif?run={run_id}&seed={seed}")
        wait.until(browser.settled("What-if replay", browser.CHARTS["whatif"]))
        times["deep_link"] = time.perf_counter() - t0
        button = next(b for b in driver.find_elements(By.CSS_SELECTOR, "button") if b.text.strip() == "Run replay")
        t0 = time.perf_counter()
        button.click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="stMetric"]')
                   and browser.settled("What-if replay", browser.CHARTS["whatif"])(d))
        times["whatif_run"] = time.perf_counter() - t0
    finally:
        driver.quit()
    return {k: round(v, 2) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny size, seconds: the test suite's run")
    args = ap.parse_args()
    work = None
    if args.smoke:
        work = tempfile.TemporaryDirectory(prefix="lethe-bench-")
        os.environ["LETHE_HOME"] = work.name  # read by every path of lethe_core, and by the dashboard server started below
        tiny_results()
    k, burn_in = (10, 300) if args.smoke else (30, 5000)
    runs, problems = list_runs()
    if not runs:  # stale or broken folders are listed with the command that regenerates each
        raise SystemExit("\n".join(["no loadable results: run `lethe-lab rif run locomo --protocol paper` first", *problems]))
    shown = default_entry(catalog(runs))  # the dashboard's default run
    run = next(r for r in runs if r.run_id == shown.run_id)
    ctx = replay_context(run)
    what_if(ctx, 0.3, 0.1, k, "gap", burn_in=burn_in)  # warm-up, as the page's second render would be
    t0 = time.perf_counter()
    what_if(ctx, 0.3, 0.1, k, "gap", burn_in=burn_in)
    replay = time.perf_counter() - t0
    out = {"run": run.run_id, "queries": len(ctx.pools.query_ids)}
    if browser.browser_available():
        shots = Path(work.name) / "screenshots" if work else ROOT / "screenshots"
        with browser.serve() as url:
            report = browser.capture(url, shots, pages=("overview",) if args.smoke else None)
            tasks = timed_tasks(url, run.run_id, run.summary["seeds"][0])
        out.update({"browser": "chromium", "pages_first_visit_s": {p: r["first"] for p, r in report.items()},
                    "pages_warm_s": {p: r["warm"] for p, r in report.items()}, "tasks_s": tasks, "budgets_s": BUDGETS_S,
                    "over_budget": sorted(t for t, v in tasks.items() if v > BUDGETS_S[t])})
    elif args.smoke:
        out.update({"browser": "skipped: needs Debian chromium + chromium-driver (make browser)", "pages_first_visit_s": None,
                    "pages_warm_s": None})
    else:
        raise SystemExit("needs Debian chromium + chromium-driver: run `make browser` (as root) first")
    out["whatif_replay_seconds"] = round(replay, 2)
    print(json.dumps(out))
    if work:
        work.cleanup()
    if not args.smoke and out["over_budget"]:
        raise SystemExit(f"over budget: {', '.join(out['over_budget'])} (budgets {BUDGETS_S} s)")


if __name__ == "__main__":
    main()
