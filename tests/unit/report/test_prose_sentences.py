import math

import pytest

from lethe_core.report.prose import ci_side, compared, delta_ci, share


def test_share_counts_and_handles_an_empty_whole():
    assert share(15, 5882) == "15 of 5,882 (0.26 %)"
    assert share(15, 5882, "turns") == "15 of 5,882 turns (0.26 %)"
    assert share(0, 0, "turns") == "0 of 0 turns"


@pytest.mark.parametrize("lo, hi, side", [(0.01, 0.02, "above zero"), (-0.02, -0.01, "below zero"), (-0.01, 0.01, "including zero"),
                                          (0.0, 0.01, "including zero"), (math.nan, 0.01, "undefined")])
def test_ci_side(lo, hi, side):
    assert ci_side(lo, hi) == side


def test_delta_ci_is_signed_and_says_where_the_ci_lies():
    assert delta_ci(-0.009, -0.015, -0.003) == "-0.0090 [-0.0150, -0.0030], CI below zero"


def test_compared():
    assert compared(0.3, 0.2) == "higher"
    assert compared(0.1, 0.2, more="larger", less="smaller") == "smaller"
    assert compared(0.2, 0.2) == "the same"
    assert compared(math.nan, 0.2) == "not comparable"
