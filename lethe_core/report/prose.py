"""Sentences a notebook builds from its own run's numbers, so that no result is typed into its prose (docs/notebooks.md).

Each helper returns a fragment for an f-string shown with `display(Markdown(...))`; every one reads correctly on the
small test runs too (nothing counted, an undefined CI). `typed_results` is the rule the tests hold hand-written prose
to (notebook markdown, README.md, docs/): what it finds there must come from a run instead.
"""

from __future__ import annotations

import math
import re

# A typed result: a percentage, a decimal, or a number with thousands separators ('5 %', '−0.0090', '5,882').
RESULT = re.compile(r"(?<![\w@.])\d+(?:\.\d+)? ?%|(?<![\w@.])[−-]?\d+\.\d+|(?<![\w@.])\d{1,3}(?:,\d{3})+(?!\d)")
CI_LEVELS = re.compile(r"\b(?:90|95) ?%")  # "95 % CI" names a level, not a result


def typed_results(text: str) -> list[str]:
    """The numbers in `text` that read as measured results, so a test can keep them out of prose written by hand
    (notebook markdown, README.md, docs/); names such as NDCG@10, conv-48 or top-30 and CI levels are spared."""
    return RESULT.findall(CI_LEVELS.sub("", text))


def share(part: int, whole: int, noun: str = "") -> str:
    """'15 of 5,882 turns (0.26 %)' (noun 'turns'); with nothing to count, '0 of 0 turns'."""
    counted = f"{part:,} of {whole:,}" + (f" {noun}" if noun else "")
    return f"{counted} ({100 * part / whole:.2f} %)" if whole else counted


def ci_side(lo: float, hi: float) -> str:
    """Where a CI of a difference lies: 'above zero', 'below zero', 'including zero' (or 'undefined')."""
    if math.isnan(lo) or math.isnan(hi):
        return "undefined"
    return "above zero" if lo > 0 else "below zero" if hi < 0 else "including zero"


def delta_ci(delta: float, lo: float, hi: float, digits: int = 4) -> str:
    """'−0.0090 [−0.0150, −0.0030], CI below zero' (signed, as the tables print a paired difference)."""
    return f"{delta:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}], CI {ci_side(lo, hi)}"


def compared(ours: float, other: float, more: str = "higher", less: str = "lower", same: str = "the same") -> str:
    """The word for how `ours` compares with `other` ('higher', 'lower', 'the same'; 'not comparable' for NaN)."""
    if math.isnan(ours) or math.isnan(other):
        return "not comparable"
    return more if ours > other else less if ours < other else same
