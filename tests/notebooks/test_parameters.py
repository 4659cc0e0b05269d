"""Every notebook's `parameters` cell reads cleanly as papermill reads it: each assignment is a parameter papermill
knows (a comment holding `=` or `>=` once made it skip the line, print "Unable to parse line" into the build log and
drop that name from its inspection)."""

from __future__ import annotations

import ast

import jupytext
import pytest
from papermill.translators import PythonTranslator

from lethe_core.report.notebooks import SMALL, discover

NOTEBOOKS = discover()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_papermill_sees_every_parameter(path, caplog):
    cell = next(c for c in jupytext.read(path).cells if "parameters" in c.metadata.get("tags", []))
    assigned = [t.id for node in ast.parse(cell.source).body if isinstance(node, ast.Assign) for t in node.targets]
    seen = [p.name for p in PythonTranslator.inspect(cell)]
    assert seen == assigned, f"{path.name}: papermill reads {seen}, the cell assigns {assigned}"
    assert set(SMALL) <= set(seen)
    assert not [r for r in caplog.records if "Unable to parse" in r.getMessage()]  # papermill logs it as a warning
