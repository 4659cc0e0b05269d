"""An executed notebook's HTML is whole offline: no script or stylesheet from a CDN, and its plotly figures draw in
headless Chromium with the network switched off."""

from __future__ import annotations

import re
import sys

import pytest

from lethe_core.report.notebooks import execute
from lethe_core.util.paths import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "dashboard"))
import browser  # noqa: E402

NOTEBOOK = '''# %% [markdown]
# # Claim
# A tiny notebook with the checkpoint notebooks' figure set-up.

# %% tags=["parameters"]
points = 3

# %%
import pandas as pd
from lethe_core.util.figures import line_ci, setup_notebook

setup_notebook()
frame = pd.DataFrame({"x": range(points), "y": [0.1 * i for i in range(points)]})
line_ci(frame.assign(lo=frame.y - 0.05, hi=frame.y + 0.05), "x", "y", "lo", "hi", "A line", "x (steps)", "y (units)").show()
line_ci(frame.assign(lo=frame.y - 0.1, hi=frame.y + 0.1), "x", "y", "lo", "hi", "Another line", "x (steps)", "y (units)").show()
'''
# An element that makes the browser fetch something when the page loads.
REMOTE = re.compile(r'<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)="(?:https?:)?//[^"]*"|@import\s+url\(\s*["\']?(?:https?:)?//')


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    root = tmp_path_factory.mktemp("nb_html")
    (root / "tiny.py").write_text(NOTEBOOK)
    execute(root / "tiny.py", root / "out", {"points": 4})
    return root / "out" / "tiny.html"


def test_html_loads_nothing_from_the_network(page):
    html = page.read_text()
    assert REMOTE.findall(html) == []
    assert html.count('class="plotly-graph-div"') == 2


def test_the_pattern_catches_what_nbconvert_and_plotly_put_there_by_default():
    """The check above could not pass by accident: the tags the stock lab template and plotly write are caught."""
    for tag in ('<script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js"></script>',
                '<script src="https://cdnjs.cloudflare.com/ajax/libs/mathjax/3.2.2/es5/tex-svg.min.js"></script>',
                '<link rel="stylesheet" href="//fonts.example.org/a.css">'):
        assert REMOTE.search(tag), tag


@pytest.mark.skipif(not browser.browser_available(), reason="needs Debian chromium + chromium-driver (make test installs them)")
def test_figures_draw_in_chromium_offline(page):
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser._driver()
    try:
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.emulateNetworkConditions",
                               {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
        driver.get(page.as_uri())
        drawn = "return document.querySelectorAll('.plotly-graph-div .main-svg .scatterlayer .trace').length"
        WebDriverWait(driver, 60, poll_frequency=0.2).until(lambda d: d.execute_script(drawn) >= 4)  # 2 figures x (band + line)
        assert driver.execute_script("return typeof window.Plotly") == "object"
        titles = driver.execute_script("return [...document.querySelectorAll('.plotly-graph-div .gtitle')].map(e => e.textContent)")
        assert titles == ["A line", "Another line"]
    finally:
        driver.quit()
