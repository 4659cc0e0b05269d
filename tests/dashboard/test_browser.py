"""The dashboard in a real headless Chromium: every page renders, with charts and no exception."""

import sys

import pytest

from lethe_core.paths import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "dashboard"))
import browser  # noqa: E402

pytestmark = pytest.mark.skipif(not browser.browser_available(),
                                reason="needs Debian chromium + chromium-driver (make test installs them)")


def test_every_page_renders_in_chromium(results_home, tmp_path):
    home, _ = results_home
    with browser.serve({"LETHE_HOME": str(home)}) as url:
        report = browser.capture(url, tmp_path / "shots")
    assert set(report) == set(browser.PAGES)
    for page, info in report.items():
        assert info["exceptions"] == [], (page, info["exceptions"])
        assert (tmp_path / "shots" / f"{page}.png").stat().st_size > 20_000, page  # not a blank skeleton
    assert report["overview"]["charts"] >= 1 and report["clusters"]["charts"] >= 3
