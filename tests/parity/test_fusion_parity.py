from lethe_core.retrieval.fusion import rrf


def test_rrf_formula_zero_based_ranks():
    scores = rrf([["a", "b", "c"], ["b", "d"]], k=60)
    assert scores["a"] == 1 / 60
    assert scores["b"] == 1 / 61 + 1 / 60
    assert scores["c"] == 1 / 62 and scores["d"] == 1 / 61
    # The union's RRF range at k_leg = 30 is what docs/method.md quotes (0.011 .. 0.033).
    full = rrf([list(range(30)), list(range(30))])
    assert round(max(full.values()), 4) == 0.0333 and round(1 / (60 + 29), 4) == 0.0112
