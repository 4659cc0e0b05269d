"""No result is typed by hand into a notebook's prose (issue #26 item 4; docs/notebooks.md).

The header cell (claim, the reference's figures, what runs here) may quote the reference; every later markdown
cell explains and must not carry a measured number: results are printed by code from the run. What counts as a
typed result: a decimal (0.26, −0.0090), a percentage other than a CI level (5 %, 37%), or a number written
with a thousands separator (5,882).
"""

from __future__ import annotations

import jupytext
import pytest

from lethe_core.report.notebooks import discover
from lethe_core.report.prose import typed_results

NOTEBOOKS = discover()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_typed_result_after_the_header(path):
    cells = [c for c in jupytext.read(path).cells if c.cell_type == "markdown"]
    found = {i: typed_results(c.source) for i, c in enumerate(cells[1:], start=1)}
    found = {i: hits for i, hits in found.items() if hits}
    assert not found, f"{path.name}: markdown cells after the header type numbers {found}; print them from the run"


def test_the_pattern_sees_typed_results_and_spares_levels_and_names():
    assert typed_results("At 0.95 only 15 of 5,882 turns (0.26 %) merge; Δ −0.0090") == ["0.95", "5,882", "0.26 %", "−0.0090"]
    assert typed_results("95 % CI over queries; NDCG@10 and R@30 at K = 30; conv-48; top-30 pools") == []
