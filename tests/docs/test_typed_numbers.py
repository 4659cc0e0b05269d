"""No result is typed by hand into README.md or docs/*.md (issue #26): a number there is either inside a generated
block (`lethe-lab docs refresh` writes it from a results folder), inside code, or quoted from the reference.

What counts as a typed result is the notebooks' rule (`lethe_core.report.prose.typed_results`: a decimal, a percentage
other than a CI level, a number with a thousands separator). A number that also occurs in the reference
(../shared/seed/paper.tex, ../shared/DESIGN.md, ../shared/CHECKPOINTS.md) is a quotation of it, not a result of ours.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lethe_core.report.documents import hand_written
from lethe_core.report.prose import typed_results
from lethe_core.util.paths import REPO_ROOT

DOCUMENTS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
REFERENCE = [REPO_ROOT.parent / "shared" / p for p in ("seed/paper.tex", "DESIGN.md", "CHECKPOINTS.md")]
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def numbers(text: str) -> set[str]:
    """Every number in `text`, LaTeX's `5{,}882` read as 5,882."""
    return set(NUMBER.findall(text.replace("{,}", ",")))


def core(hit: str) -> str:
    """A typed result without sign, unit or spacing ('−0.0090' -> '0.0090', '5 %' -> '5')."""
    return re.sub(r"[^\d.,]", "", hit)


def typed_numbers(text: str, quoted: set[str], where: str = "<text>") -> list[tuple[int, str]]:
    """(line of the hand-written prose, number) for every typed result that is not a quotation of the reference."""
    prose = hand_written(text, where)
    return [(i, hit) for i, line in enumerate(prose.split("\n"), start=1) for hit in typed_results(line) if core(hit) not in quoted]


@pytest.fixture(scope="module")
def reference() -> set[str]:
    missing = [str(p) for p in REFERENCE if not p.exists()]
    if missing:
        pytest.fail(f"reference missing: {missing} (CI lays ../shared beside the clone)")
    return set().union(*(numbers(p.read_text(encoding="utf-8")) for p in REFERENCE))


@pytest.mark.parametrize("path", DOCUMENTS, ids=[str(p.relative_to(REPO_ROOT)) for p in DOCUMENTS])
def test_no_typed_number_outside_code_and_generated_blocks(path: Path, reference):
    found = typed_numbers(path.read_text(encoding="utf-8"), reference, path.name)
    assert not found, (f"{path.relative_to(REPO_ROOT)} types {len(found)} result(s) by hand ((prose line, number): {found[:20]}); "
                       "put them in a generated block (lethe_core/report/documents.py) or point to where they are generated")


def test_the_rule_catches_a_typed_number_and_spares_quotes_code_and_generated_blocks():
    doc = ("Our NDCG@10 is 0.5034 on 5,882 turns (7.7 % repeat).\n\n"
           "The paper reports 0.26 on 199,509 turns.\n\n"
           "Run `lethe-lab stats --alpha 0.05` to see 0.4321 printed:\n\n```text\nfull 0.5034\n```\n\n"
           "<!-- generated: timings · source: x -->\n| make run | 21 min 43 s | 0.99 |\n<!-- /generated: timings -->\n")
    quoted = numbers("the reference's 0.26 at 199{,}509 turns")
    assert typed_numbers(doc, quoted) == [(1, "0.5034"), (1, "5,882"), (1, "7.7 %"), (5, "0.4321")]
