"""Suppression state per (cluster, entry), with the last step each entry was touched.

Dense arrays: K x N float64 values and int64 last-touched steps. Measured on LoCoMo
(N = 5,882, K <= 100) that is at most 9.4 MB per arm and every read or write is one
fancy-indexing call; a dict of dicts (the reference's layout) is kept only as the
baseline of benchmarks/rif_replay.py. At LongMemEval scale (N = 199,509, K = 30) the
arrays take 96 MB per arm, still fine on 24 GB.

Decay follows the reference: lazy, applied to an entry only when the update touches it
(`s *= exp(-lambda * (step - last_step))`), so an entry that leaves the pool keeps its
value forever. `eager=True` decays at read time instead (the penalty sees the decayed
value), an option the reference lacks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

WINNER_RELIEF = 0.05  # default `reinforce`: what a winner loses per update
CAP = 1.0  # default `cap`: the most suppression an entry can carry


@dataclass(frozen=True)
class RIFParams:
    alpha: float = 0.3
    eta: float = 0.1
    decay: float = 0.005  # lambda
    pool_size: int = 30  # P
    winners: int = 10
    eager: bool = False
    cap: float = CAP  # the reference sweep's "max" (v3: 2, v5: 3, v6: 5)
    reinforce: float = WINNER_RELIEF  # winner relief per update (the reference's v3: 0.1)


class SuppressionState:
    def __init__(self, n_clusters: int, n_entries: int, params: RIFParams = RIFParams()):
        self.params = params
        self.values = np.zeros((n_clusters, n_entries), dtype=np.float64)
        self.last = np.zeros((n_clusters, n_entries), dtype=np.int64)

    def penalty(self, cluster: int, entries: np.ndarray, step: int) -> np.ndarray:
        s = self.values[cluster, entries]
        if self.params.eager:
            s = s * np.exp(-self.params.decay * (step - self.last[cluster, entries]))
        return s

    def update(self, cluster: int, step: int, pool: np.ndarray, strengths: np.ndarray, is_winner: np.ndarray) -> None:
        """Touch every pool member: decay, then losers gain eta * strength (capped at `cap`), winners lose `reinforce` (floored at 0)."""
        p = self.params
        s = self.values[cluster, pool] * np.exp(-p.decay * (step - self.last[cluster, pool]))
        s = np.where(is_winner, np.maximum(0.0, s - p.reinforce), np.minimum(s + p.eta * strengths, p.cap))
        self.values[cluster, pool] = s
        self.last[cluster, pool] = step

    def suppressed_entries(self) -> int:
        """(cluster, entry) pairs carrying any suppression."""
        return int((self.values > 0).sum())

    def suppressed_docs(self) -> int:
        """Distinct entries suppressed in at least one cluster (saturation of the corpus)."""
        return int((self.values > 0).any(axis=0).sum())

    def snapshot(self, min_value: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        k, n = np.nonzero(self.values > min_value)
        return k, n, self.values[k, n]
