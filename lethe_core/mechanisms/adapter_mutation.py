"""Checkpoints 02 / 03: a frozen base embedding plus a mutable additive adapter per turn (docs/mutation.md).

The reference: effective = normalize(base + adapter), the adapter's norm clipped at 0.5, so a turn can never
leave a ball around its encoder vector. CK2 (LongMemEval sessions) used a "co-retrieval centroid" fitness — no
commit holds that code; the run it cites ran the unchanged v1 core — and reported ±1 % (static 0.1813, random
+1.2 %, GC −0.9 %). CK3 (019bb1f) made the mutation xenc-guided: cross-encoder logit > 0 → mutate toward the query,
< −4 → away from it, else skip; the proposal is isotropic noise N(0, (0.7σ)²I) plus |N(0, (0.7σ)²)| along
normalize(query − base) (negated for "away"); accepted if the cosine to the query moves the intended way by more
than δ = 0.005; affinity an EMA (α = 0.2) of sigmoid(logit); the random arm used σ = 0.025 and always moved toward
the query. Static + rerank 0.2217, random −0.5 %, guided −0.7 % (2,000 steps, train = test).

Here: arms `random` (σ = 0.025, toward the query for every scored turn, whatever the verdict), `guided` (the CK3
rule, σ = σ0·(1 − affinity)^γ with CK1's σ0 = 0.05, γ = 2 — our reading: the reference's GC arm scaled σ by
affinity) and `centroid` (the CK2 fitness as we read it: the target is the centroid of the cross-encoder's top-10
— the turns retrieved together — and a proposal along normalize(centroid − base) is accepted if it raises the
cosine to that centroid by more than δ). The rule applies to every turn of the scored pool (the dense top-30:
every one has a verdict, so "away" can fire); `centroid` to the top-10 that define the centroid. One proposal per
turn and step. Driven by `lethe_core.mechanisms.usage_stream` under the reference's protocol and a held-out one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from lethe_core.mechanisms.embedding_mutation import sigmoid
from lethe_core.mechanisms.usage_stream import drift, normalize

ARMS = ("random", "guided", "centroid")


@dataclass(frozen=True)
class AdapterParams:
    """The reference's constants (CHECKPOINTS.md, CK2/CK3)."""

    random_sigma: float = 0.025
    sigma0: float = 0.05
    gamma: float = 2.0
    noise_scale: float = 0.7  # both noise terms have standard deviation 0.7·σ
    delta: float = 0.005
    clip: float = 0.5  # maximum adapter norm
    toward: float = 0.0  # logit above: toward the query
    away: float = -4.0  # logit below: away from it
    alpha: float = 0.2
    initial_affinity: float = 0.5
    centroid_top: int = 10  # the cross-encoder's top-n define the co-retrieval centroid

    def __post_init__(self):
        if self.clip <= 0 or self.delta < 0 or self.away > self.toward:
            raise ValueError("clip must be > 0, delta >= 0 and away <= toward")


def clip_norm(adapter: np.ndarray, limit: float) -> np.ndarray:
    """The adapter scaled down to norm `limit` when longer (rows of a matrix each on their own)."""
    a = np.asarray(adapter, dtype=np.float32)
    n = np.linalg.norm(a, axis=-1, keepdims=True)
    return a * np.minimum(1.0, limit / np.maximum(n, 1e-12))


def direction(logit: float, params: AdapterParams = AdapterParams()) -> int:
    """The guided rule: +1 toward the query (logit > toward), −1 away (logit < away), 0 skip."""
    if logit > params.toward:
        return 1
    if logit < params.away:
        return -1
    return 0


class AdapterMutation:
    """Frozen base vectors plus per-turn adapters; `effective()` = normalize(base + adapter)."""

    def __init__(self, vectors: np.ndarray, arm: str = "guided", params: AdapterParams = AdapterParams(), seed: int = 0):
        if arm not in ARMS:
            raise ValueError(f"adapter-mutation arm must be one of {ARMS}, got {arm!r}")
        self.name = arm
        self.arm = arm
        self.params = params
        self.rng = np.random.default_rng(seed)
        self.base = normalize(vectors).astype(np.float32)
        self.adapter = np.zeros_like(self.base)
        self.eff = self.base.copy()
        self.affinity = np.full(len(self.base), params.initial_affinity, dtype=np.float64)
        self.generation = np.zeros(len(self.base), dtype=np.int64)
        self.counts = {"toward": 0, "away": 0, "skip": 0, "accepted": 0}

    # --- the Mechanism protocol (lethe_core.mechanisms.usage_stream)
    def effective(self) -> np.ndarray:
        return self.eff

    def update(self, step: int, qvec: np.ndarray, doc_idx: np.ndarray, logits: np.ndarray) -> None:
        p = self.params
        doc_idx, logits = np.asarray(doc_idx, dtype=np.int64), np.asarray(logits, dtype=np.float64)
        self.affinity[doc_idx] = (1 - p.alpha) * self.affinity[doc_idx] + p.alpha * sigmoid(logits)
        q = normalize(qvec)
        if self.arm == "centroid":
            top = doc_idx[np.argsort(-logits, kind="stable")[: p.centroid_top]]
            if len(top) < 2:
                return
            target = normalize(self.eff[top].mean(axis=0))
            self.step_turns(top, np.tile(target, (len(top), 1)), np.ones(len(top), dtype=np.int64))
            return
        d = np.ones(len(doc_idx), dtype=np.int64) if self.arm == "random" else np.array([direction(float(x), p) for x in logits], dtype=np.int64)
        self.counts["toward"] += int((d > 0).sum())
        self.counts["away"] += int((d < 0).sum())
        self.counts["skip"] += int((d == 0).sum())
        move = d != 0
        if move.any():
            self.step_turns(doc_idx[move], np.tile(q, (int(move.sum()), 1)), d[move])

    def diagnostics(self) -> dict:
        touched = self.generation > 0
        out = drift(self.base, self.eff, touched)
        norms = np.linalg.norm(self.adapter[touched], axis=1)
        out.update(self.counts, mean_adapter_norm=float(norms.mean()) if len(norms) else float("nan"),
                   at_clip=int((norms >= self.params.clip - 1e-6).sum()), mean_affinity=float(self.affinity.mean()))
        return out

    # --- the rule
    def sigma(self, j) -> np.ndarray | float:
        p = self.params
        if self.arm == "random":
            return np.full(np.shape(j), p.random_sigma) if np.ndim(j) else p.random_sigma
        return p.sigma0 * (1.0 - self.affinity[j]) ** p.gamma

    def propose(self, j, target: np.ndarray, d) -> np.ndarray:
        """New (clipped) adapters for turns j (one or an array): isotropic N(0, (0.7σ)²I) plus d·|N(0, (0.7σ)²)| along
        normalize(target − base), σ per turn."""
        j, target, d = np.atleast_1d(j), np.atleast_2d(target), np.atleast_1d(d)
        s = self.params.noise_scale * np.atleast_1d(self.sigma(j))[:, None]
        base = self.base[j]
        u = normalize(target - base)
        noise = self.rng.normal(0.0, 1.0, size=base.shape) * s + d[:, None] * np.abs(self.rng.normal(0.0, 1.0, size=(len(j), 1))) * s * u
        new = clip_norm(self.adapter[j] + noise.astype(np.float32), self.params.clip)
        return new if np.ndim(j) > 1 or len(j) > 1 else new[0]

    def step_turns(self, j: np.ndarray, targets: np.ndarray, d: np.ndarray) -> np.ndarray:
        """Propose for every turn in j (distinct), accept where the cosine to its target moves by more than δ in
        direction d; returns the acceptance mask."""
        j = np.asarray(j, dtype=np.int64)
        new = np.atleast_2d(self.propose(j, targets, d))
        new_eff = normalize(self.base[j] + new)
        gain = d * (np.sum(new_eff * targets, axis=1) - np.sum(self.eff[j] * targets, axis=1))
        ok = gain > self.params.delta
        self.adapter[j[ok]], self.eff[j[ok]] = new[ok], new_eff[ok]
        self.generation[j[ok]] += 1
        self.counts["accepted"] += int(ok.sum())
        return ok

    def step_turn(self, j: int, target: np.ndarray, d: int) -> bool:
        """One turn: propose, accept if the cosine to `target` moves by more than δ in direction d."""
        return bool(self.step_turns(np.array([j]), np.atleast_2d(target), np.array([d]))[0])

    def describe(self) -> dict:
        return {"arm": self.arm, **asdict(self.params)}
