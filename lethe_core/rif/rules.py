"""Suppression strengths (paper eqs. 1-2; docs/method.md, "Clustered RIF"), vectorised over a pool.

uniform:  (1 - r_init / P) * sigmoid(-x)
rank-gap: max(0, r_final - r_init) / P * sigmoid(-x)
Both are 0 when P <= 1. x is the reranker's raw logit, as in the paper (the calibrated one under `--calibration`,
an ablation): a confident positive (x >> 0) is barely penalised.
"""

from __future__ import annotations

import numpy as np

RULES = ("uniform", "gap")


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def strength(rule: str, r_init: np.ndarray, r_final: np.ndarray, logit: np.ndarray, pool_size: int) -> np.ndarray:
    if pool_size <= 1:
        return np.zeros(len(r_init))
    doubt = sigmoid(-np.asarray(logit, dtype=np.float64))
    if rule == "uniform":
        return (1.0 - np.asarray(r_init) / pool_size) * doubt
    if rule == "gap":
        return np.maximum(0, np.asarray(r_final) - np.asarray(r_init)) / pool_size * doubt
    raise ValueError(f"unknown rule {rule!r}; choose one of {RULES}")
