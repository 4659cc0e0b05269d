"""The dashboard in a real headless Chromium: every page renders; deep links and the cluster filter work as a person uses them."""

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
            sidebar = driver.find_element(By.CSS_SELECTOR, '[data-testid="stSidebar"]')
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
