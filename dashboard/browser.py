"""Real-browser check of the dashboard: serve it, load every page in headless Chromium, screenshot it.

`python dashboard/browser.py screenshots [--out DIR] [--pages overview,chronic] [--size 1280x800]` (or `make screenshots`)
writes one PNG per page (default `screenshots/`, gitignored), palette-quantised so each stays small, and prints each
page's render time and the requests it made outside the dashboard's own server (none expected) as JSON. Needs Debian's
`chromium` and `chromium-driver` (the Makefile installs them when missing).
"""

from __future__ import annotations

import argparse
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
TEST_SIZE = (1500, 1100)  # the checks' window: every chart of a page drawn without scrolling
SHOT_SIZE = (1280, 800)  # the screenshots': a laptop screen, what a person sees above the fold
LOCAL_SCHEMES = ("data:", "blob:", "about:", "chrome:", "chrome-extension:", "devtools:")


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


def _driver(size: tuple[int, int] = TEST_SIZE):
    """Headless Chromium whose viewport is exactly `size`, logging its network requests (see `external_requests`)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                 f"--window-size={size[0]},{size[1]}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": size[0], "height": size[1], "deviceScaleFactor": 1,
                                                                   "mobile": False})
    return driver


def external_requests(driver, base: str) -> list[str]:
    """URLs the page requested since the last call that are not the dashboard's own server (fonts, icons, telemetry)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    base_ws = "ws" + base[len("http"):]
    return sorted({u for u in urls if not (u.startswith((base, base_ws)) or u.startswith(LOCAL_SCHEMES))})


def settled(title: str, charts: int = 0):
    """A wait condition: `title` among the h1s, `charts` plotly charts drawn, and Streamlit no longer running."""
    from selenium.webdriver.common.by import By

    def check(d):
        heads = " ".join(h.text for h in d.find_elements(By.CSS_SELECTOR, "h1"))
        running = d.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]')
        return title in heads and not running and len(d.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")) >= charts
    return check


def save_png(driver, path: Path) -> None:
    """The viewport as a palette PNG: a dashboard is flat colours, so 256 of them keep it readable at a fraction of the bytes."""
    from io import BytesIO

    from PIL import Image

    image = Image.open(BytesIO(driver.get_screenshot_as_png())).convert("RGB")
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(path, optimize=True)


def capture(url: str, out_dir: Path, timeout: float = 90, passes: int = 2, pages: tuple[str, ...] | None = None,
            size: tuple[int, int] = TEST_SIZE, query: str = "") -> dict[str, dict]:
    """Load every page (or those of `pages`, with `?query` appended) `passes` times, waiting each time until its title
    and charts are drawn and Streamlit stops running; screenshot the last pass.

    Times run from navigation to that point (what a person waits for): `first` with cold caches (the browser loads the
    app and the server loads results and pools), `warm` on the next visits. `external` lists requests outside the
    dashboard's server on the last pass.
    """
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    out_dir.mkdir(parents=True, exist_ok=True)
    driver = _driver(size)
    report: dict[str, dict] = {}
    try:
        for n in range(passes):
            for page, path in PAGES.items():
                if pages is not None and page not in pages:
                    continue
                external_requests(driver, url)  # drop the log of the previous page
                t0 = time.perf_counter()
                driver.get(f"{url}/{path}" + (f"?{query}" if query else ""))
                try:
                    WebDriverWait(driver, timeout, poll_frequency=0.1).until(settled(TITLES[page], CHARTS[page]))
                except TimeoutException:
                    heads = [h.text for h in driver.find_elements(By.CSS_SELECTOR, "h1")]
                    charts = len(driver.find_elements(By.CSS_SELECTOR, ".js-plotly-plot"))
                    raise RuntimeError(f"page {page!r} not drawn within {timeout:.0f} s: titles {heads}, {charts} of "
                                       f"{CHARTS[page]} charts") from None
                seconds = round(time.perf_counter() - t0, 2)
                entry = report.setdefault(page, {})
                entry["first" if n == 0 else "warm"] = seconds
                if n == passes - 1:
                    time.sleep(0.5)  # late requests (favicon, fonts) of the page just drawn
                    entry["exceptions"] = [e.text for e in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')]
                    entry["charts"] = len(driver.find_elements(By.CSS_SELECTOR, ".js-plotly-plot"))
                    entry["external"] = external_requests(driver, url)
                    png = out_dir / f"{page}.png"
                    save_png(driver, png)
                    entry["screenshot"] = str(png)
    finally:
        driver.quit()
    return report


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    shots = sub.add_parser("screenshots", help="one PNG per page, with render times")
    shots.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "screenshots")
    shots.add_argument("--pages", default=",".join(PAGES), help="comma-separated, of: " + ", ".join(PAGES))
    shots.add_argument("--size", default="x".join(map(str, SHOT_SIZE)), help="viewport WIDTHxHEIGHT")
    shots.add_argument("--query", default="", help="URL query for every page, e.g. run=<folder>&seed=42")
    shots.add_argument("--timeout", type=float, default=90, help="seconds a page may take to draw")
    args = ap.parse_args(argv)
    unknown = set(args.pages.split(",")) - set(PAGES)
    if unknown:
        ap.error(f"unknown pages {sorted(unknown)}; known: {', '.join(PAGES)}")
    width, height = (int(v) for v in args.size.lower().split("x"))
    with serve() as base:
        print(json.dumps(capture(base, args.out, args.timeout, pages=tuple(args.pages.split(",")), size=(width, height),
                                 query=args.query), indent=2))


if __name__ == "__main__":
    main()
