"""Constants and helpers shared by the dashboard tests (imported by name: pytest puts this folder on sys.path)."""

from streamlit.testing.v1 import AppTest

from lethe_core.util.paths import REPO_ROOT

APP = str(REPO_ROOT / "dashboard" / "app.py")
PAGES = ["overview", "clusters", "suppression", "chronic", "behaviour", "inspector", "whatif"]


def messages(at: AppTest) -> list[str]:
    """Every error, warning and info text on the page, sidebar included."""
    return [m.value for kind in (at.error, at.warning, at.info) for m in kind]
