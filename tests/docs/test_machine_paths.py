"""No committed document names a path of the machine that wrote it (issue #26): the repository is read on other
machines and on its hosting page, where `/work/...` or a home folder means nothing. Paths are written relative to the
clone (`../shared/...`, `data/...`)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from lethe_core.util.paths import REPO_ROOT

SUFFIXES = (".md", ".svg", ".py", ".txt", ".toml", ".json")


def committed_documents() -> list[Path]:
    """The tracked documents and figures, notebook sources included (their markdown cells are documents too)."""
    out = subprocess.run(["git", "ls-files", "*.md", "docs/figures/**", "notebooks/*.py"], cwd=REPO_ROOT,
                         capture_output=True, text=True, check=True).stdout
    return [REPO_ROOT / f for f in out.splitlines() if f.endswith(SUFFIXES)]


def machine_paths() -> re.Pattern:
    """The folder above this checkout (where `../shared` lies), this checkout itself, and the home folder."""
    roots = {p for p in (REPO_ROOT, REPO_ROOT.parent, Path.home()) if p != Path(p.anchor)}
    return re.compile("|".join(re.escape(f"{p}/") for p in sorted(map(str, roots), key=len, reverse=True)))


MACHINE_PATHS = machine_paths()


def test_the_pattern_finds_a_path_of_this_machine_and_nothing_relative():
    pattern = MACHINE_PATHS
    assert pattern.search(f"read {REPO_ROOT.parent}/shared/data/x.json") and pattern.search(f"{REPO_ROOT}/data/results")
    assert not pattern.search("read ../shared/data/x.json and data/results/")


@pytest.mark.parametrize("path", committed_documents(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_no_committed_document_names_a_path_of_this_machine(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    hits = [(i, m.group(0)) for i, line in enumerate(text.splitlines(), start=1) for m in MACHINE_PATHS.finditer(line)]
    assert not hits, f"{path.relative_to(REPO_ROOT)}: machine paths at lines {hits[:5]}"
