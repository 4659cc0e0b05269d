"""The dashboard in a real headless Chromium: every page renders; deep links and the cluster filter work as a person uses them."""

import os
import sys

import pytest

from lethe_core.util.paths import REPO_ROOT

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
        assert info["external"] == [], (page, info["external"])  # favicon, icon font, telemetry: all local or off
    assert report["overview"]["charts"] >= 1 and report["clusters"]["charts"] >= 3


def test_deep_link_on_a_fresh_server_then_the_filter_follows_the_sidebar(results_home):
    """(a) The first request to a new server is a sub-page: it has the app's frame (run picker, navigation).
    (b) A cluster picked through the UI filters the pages reached through the sidebar, and is still picked on return."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    home, _ = results_home
    with browser.serve({"LETHE_HOME": str(home)}) as url:
        driver = browser._driver()
        wait = WebDriverWait(driver, 90, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,))  # reruns redraw

        def settled(title):
            def check(d):
                heads = " ".join(h.text for h in d.find_elements(By.CSS_SELECTOR, "h1"))
                return title in heads and not d.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]')
            wait.until(check)
            assert not driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')

        def go(title):
            link = next(a for a in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebarNavLink"]') if title in a.text)
            link.click()
            settled(title)

        def captions():
            return [c.text for c in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stCaptionContainer"]')]

        def filter_picker():
            """The clusters page's filter widget, once drawn: the title is drawn before the script reaches it, and
            Streamlit shows its running indicator only after a delay, so `settled` alone can return early."""
            return wait.until(lambda d: next((m for m in d.find_elements(By.CSS_SELECTOR, '[data-testid="stMultiSelect"]')
                                              if "Filter the other pages" in m.text), None))

        try:
            driver.get(f"{url}/inspector")
            settled("Query inspector")
            # the sidebar's run picker is drawn after the title `settled` waits for (as the filter widget below): wait for it
            sidebar = wait.until(lambda d: next((s for s in d.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebar"]')
                                                 if "Results run" in s.text), None))
            assert "Results run" in sidebar.text
            assert len(driver.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebarNavLink"]')) == len(browser.PAGES)
            assert not any(c.startswith("Filtered to clusters") for c in captions())

            go("Query clusters")
            field = filter_picker().find_element(By.CSS_SELECTOR, "input")
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", field)
            field.click()
            option = wait.until(lambda d: next((o for o in d.find_elements(By.CSS_SELECTOR, '[role="option"]') if o.text.strip() == "3"), None))
            option.click()
            field.send_keys(Keys.ESCAPE)
            settled("Query clusters")

            go("Query inspector")
            wait.until(lambda d: any(c.startswith("Filtered to clusters 3 ") for c in captions()))
            go("Suppression heatmap")
            wait.until(lambda d: any(c.startswith("Filtered to clusters 3 ") for c in captions()))
            go("Query clusters")
            assert "3" in filter_picker().text.splitlines()[1:]  # the chip under the label; empty, it reads "Choose options"
        finally:
            driver.quit()


def test_a_url_reopens_the_same_run_seed_and_page(results_home, tmp_path):
    """Two runs; a link to the older one's what-if page at seed 43 opens exactly that, keeps it in the URL through the
    sidebar navigation, and the URL copied from the address bar opens the same view in a fresh browser; no Deploy button."""
    import shutil
    from urllib.parse import parse_qs, urlparse

    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    home, summary = results_home
    shutil.copytree(home, tmp_path / "home")
    older = "rif-locomo-paper-test_lexical-older"
    shutil.copytree(tmp_path / "home" / "results" / summary["run_id"], tmp_path / "home" / "results" / older)
    stamp = (tmp_path / "home" / "results" / summary["run_id"] / "summary.json").stat().st_mtime - 3600
    os.utime(tmp_path / "home" / "results" / older / "summary.json", (stamp, stamp))

    def view(driver) -> tuple[str, dict]:
        parsed = urlparse(driver.current_url)
        return parsed.path.strip("/"), {k: v[0] for k, v in parse_qs(parsed.query).items()}

    with browser.serve({"LETHE_HOME": str(tmp_path / "home")}) as url:
        for attempt in range(2):  # the link, then the URL the first visit left in the address bar
            driver = browser._driver()
            wait = WebDriverWait(driver, 90, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,))
            try:
                driver.get(f"{url}/whatif?run={older}&seed=43" if attempt == 0 else copied)
                wait.until(browser.settled("What-if replay"))
                sidebar = driver.find_element(By.CSS_SELECTOR, '[data-testid="stSidebar"]')
                wait.until(lambda d: older in sidebar.text and view(d) == ("whatif", {"run": older, "seed": "43"}))
                seed = wait.until(lambda d: next((i for i in d.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebar"] input')
                                                  if i.get_attribute("aria-label") == "Seed"), None))
                assert seed.get_attribute("value") == "43"
                assert not driver.find_elements(By.CSS_SELECTOR, '[data-testid="stAppDeployButton"]')
                if attempt == 0:
                    link = next(a for a in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebarNavLink"]')
                                if "Overview" in a.text)
                    link.click()  # Streamlit clears the query on navigation; the app writes the run and seed back
                    wait.until(browser.settled("Overview"))
                    wait.until(lambda d: view(d) == ("", {"run": older, "seed": "43"}))
                    driver.get(f"{url}/whatif?run={older}&seed=43")
                    wait.until(browser.settled("What-if replay"))
                    wait.until(lambda d: view(d) == ("whatif", {"run": older, "seed": "43"}))
                    copied = driver.current_url
            finally:
                driver.quit()
