"""Sentences a notebook builds from its own run's numbers, so that no result is typed into its prose (docs/notebooks.md).

Each helper returns a fragment for an f-string shown with `display(Markdown(...))`; every one reads correctly on the
small test runs too (nothing counted, an undefined CI).
"""

from __future__ import annotations

import math


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
