"""Real-browser check of the dashboard: serve it, load every page in headless Chromium, screenshot it.

`python dashboard/browser.py [OUT_DIR]` (or `make screenshots`) writes one PNG per page (default
`screenshots/`, gitignored) and prints each page's render time as JSON. Needs Debian's `chromium`
and `chromium-driver` (the Makefile installs them when missing).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

APP = Path(__file__).resolve().parent / "app.py"
PAGES = {"overview": "", "clusters": "clusters", "suppression": "suppression", "chronic": "chronic",
         "behaviour": "behaviour", "inspector": "inspector", "whatif": "whatif"}
CHARTS = {"overview": 2, "clusters": 3, "suppression": 2, "chronic": 2, "behaviour": 3, "inspector": 0, "whatif": 1}
TITLES = {"overview": "Overview", "clusters": "Query clusters", "suppression": "Suppression heatmap",
          "chronic": "Chronic false positives", "behaviour": "Behaviour decomposition", "inspector": "Query inspector",
          "whatif": "What-if replay"}


def browser_available() -> bool:
    return bool(shutil.which("chromium") and shutil.which("chromedriver"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(env: dict | None = None, timeout: float = 60):
    """Run the dashboard on a free loopback port; yields its base URL."""
    port = _free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(APP), "--server.port", str(port), "--server.address", "127.0.0.1",
           "--server.headless", "true", "--browser.gatherUsageStats", "false"]
    proc = subprocess.Popen(cmd, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            time.sleep(0.5)
        else:
            raise RuntimeError("the dashboard did not start")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _driver():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1500,1100"):
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)


def capture(url: str, out_dir: Path, timeout: float = 90, passes: int = 2, pages: tuple[str, ...] | None = None) -> dict[str, dict]:
    """Load every page (or those of `pages`) `passes` times, waiting each time until its title and charts are drawn
    and Streamlit stops running; screenshot the last pass.

    Times run from navigation to that point (what a person waits for): `first` with cold caches (the
    browser loads the app and the server loads results and pools), `warm` on the next visits.
    """
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    out_dir.mkdir(parents=True, exist_ok=True)
    driver = _driver()
    report: dict[str, dict] = {}
    try:
        for n in range(passes):
            for page, path in PAGES.items():
                if pages is not None and page not in pages:
                    continue
                t0 = time.perf_counter()
                driver.get(f"{url}/{path}")

                def rendered(d, page=page):
                    heads = [h.text for h in d.find_elements(By.CSS_SELECTOR, "h1")]
                    running = d.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]')
                    charts = d.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")
                    return TITLES[page] in " ".join(heads) and not running and len(charts) >= CHARTS[page]

                WebDriverWait(driver, timeout, poll_frequency=0.1).until(rendered)
                seconds = round(time.perf_counter() - t0, 2)
                entry = report.setdefault(page, {})
                entry["first" if n == 0 else "warm"] = seconds
                if n == passes - 1:
                    entry["exceptions"] = [e.text for e in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')]
                    entry["charts"] = len(driver.find_elements(By.CSS_SELECTOR, ".js-plotly-plot"))
                    png = out_dir / f"{page}.png"
                    driver.save_screenshot(str(png))
                    entry["screenshot"] = str(png)
    finally:
        driver.quit()
    return report


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "screenshots")
    with serve() as base:
        print(json.dumps(capture(base, out), indent=2))
