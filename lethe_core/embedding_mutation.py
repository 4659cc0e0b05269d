"""Checkpoint 01: germinal-centre mutation of the turn embeddings themselves (docs/mutation.md).

The reference (`gc_memory` at 13e7f43, not at its HEAD) mutated each retrieved GC-tier entry's embedding:
σ = σ0·(1 − affinity)^γ (σ0 = 0.05, γ = 2), five mutants `normalize(e + N(0, σ²I))`, the best (highest cosine
to the query) accepted only if its cosine gain over the current vector exceeds δ = 0.01 *and* its cosine to the
original embedding stays ≥ 0.7; a random arm mutated with a fixed σ = 0.025. Affinity was an EMA (α = 0.2) of
the retrieval cosine; tiers naive → gc after 3 retrievals, gc → memory at affinity ≥ 0.75 and generation ≥ 5,
apoptosis (removed from the index) at affinity < 0.15 and more than 1,000 steps idle; memory-tier entries score
×1.15; non-memory affinities idle for a decay interval decay by exp(−λ) every 100 steps (λ = 0.01, the version
after its decay fix). Its usage stream and its evaluation used the same 323 NFCorpus test queries.

Here (same constants): the affinity signal is the **cross-encoder's verdict**, sigmoid(raw logit) of the pair, as
issue 12 asks (the reference's CK1 used the bi-encoder cosine; its later stores used this sigmoid). "Retrieved" =
the cross-encoder's top-10 of the dense top-30 (retrieval count, idle clock, affinity); the memory weight
multiplies the dense inner product (the first stage; the reranked order is the cross-encoder's); a turn's
"generation" counts its accepted mutations. The random arm is our reading of "random, fixed σ": one mutant with
σ = 0.025, accepted whenever it keeps the anchor cosine ≥ 0.7 (no fitness test) — undirected drift under the same
life cycle. The stream and its protocols (the reference's train = test and a held-out split) are
`lethe_core.usage_stream`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .usage_stream import drift, normalize

NAIVE, GC, MEMORY, APOPTOTIC = 0, 1, 2, 3
TIER_NAMES = ("naive", "gc", "memory", "apoptotic")
ARMS = ("adaptive", "random")


@dataclass(frozen=True)
class MutationParams:
    """The reference's constants (CHECKPOINTS.md, CK1)."""

    sigma0: float = 0.05
    gamma: float = 2.0
    random_sigma: float = 0.025
    n_mutants: int = 5
    delta: float = 0.01  # required cosine gain toward the query
    anchor: float = 0.7  # minimum cosine to the original embedding
    alpha: float = 0.2  # affinity EMA rate
    initial_affinity: float = 0.5
    retrieved: int = 10  # the cross-encoder's top-n count as retrieved
    naive_to_gc: int = 3  # retrievals
    memory_affinity: float = 0.75
    memory_generation: int = 5
    apoptosis_affinity: float = 0.15
    apoptosis_idle: int = 1000  # steps
    memory_weight: float = 1.15
    decay_lambda: float = 0.01
    decay_every: int = 100

    def __post_init__(self):
        if self.n_mutants < 1 or self.retrieved < 1 or self.decay_every < 1:
            raise ValueError("n_mutants, retrieved and decay_every must be >= 1")
        if not 0 < self.alpha <= 1 or not -1 <= self.anchor <= 1:
            raise ValueError("alpha must lie in (0, 1] and anchor in [-1, 1]")


def sigmoid(x) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))


class EmbeddingMutation:
    """Mutable turn embeddings with the reference's tier life cycle; `arm` = adaptive (affinity-scaled σ, best
    of n mutants, fitness and anchor tests) or random (fixed σ, one mutant, anchor test only)."""

    def __init__(self, vectors: np.ndarray, arm: str = "adaptive", params: MutationParams = MutationParams(), seed: int = 0):
        if arm not in ARMS:
            raise ValueError(f"embedding-mutation arm must be one of {ARMS}, got {arm!r}")
        self.name = arm
        self.arm = arm
        self.params = params
        self.rng = np.random.default_rng(seed)
        self.original = normalize(vectors).astype(np.float32)
        self.vectors = self.original.copy()
        n = len(self.vectors)
        self.affinity = np.full(n, params.initial_affinity, dtype=np.float64)
        self.tier = np.full(n, NAIVE, dtype=np.int8)
        self.retrievals = np.zeros(n, dtype=np.int64)
        self.generation = np.zeros(n, dtype=np.int64)
        self.last = np.zeros(n, dtype=np.int64)  # step of the last retrieval (0 before any)
        self.tried = 0
        self.accepted = 0

    # --- the Mechanism protocol (lethe_core.usage_stream)
    def effective(self) -> np.ndarray:
        return self.vectors

    def weights(self) -> np.ndarray:
        w = np.ones(len(self.vectors), dtype=np.float32)
        w[self.tier == MEMORY] = self.params.memory_weight
        w[self.tier == APOPTOTIC] = 0.0
        return w

    def update(self, step: int, qvec: np.ndarray, doc_idx: np.ndarray, logits: np.ndarray) -> None:
        p = self.params
        doc_idx, logits = np.asarray(doc_idx, dtype=np.int64), np.asarray(logits, dtype=np.float64)
        order = np.argsort(-logits, kind="stable")[: p.retrieved]  # the cross-encoder's top-n (ties: dense order)
        top, verdict = doc_idx[order], sigmoid(logits[order])
        self.retrievals[top] += 1
        self.last[top] = step
        self.affinity[top] = (1 - p.alpha) * self.affinity[top] + p.alpha * verdict
        q = normalize(qvec)
        for j in top[self.tier[top] == GC]:
            self.mutate(int(j), q)
        self.transitions(step)
        if step > 0 and step % p.decay_every == 0:
            self.decay(step)

    def diagnostics(self) -> dict:
        counts = np.bincount(self.tier, minlength=4)
        out = {f"tier_{name}": int(c) for name, c in zip(TIER_NAMES, counts)}
        out.update(drift(self.original, self.vectors, self.generation > 0))
        out.update(mutations_tried=self.tried, mutations_accepted=self.accepted,
                   mean_affinity=float(self.affinity.mean()))
        return out

    # --- the rule
    def sigma(self, j: int) -> float:
        p = self.params
        if self.arm == "random":
            return p.random_sigma
        return p.sigma0 * (1.0 - self.affinity[j]) ** p.gamma

    def propose(self, j: int) -> np.ndarray:
        """Mutants of turn j: normalize(e + N(0, σ²I)), n_mutants of them (adaptive) or one (random)."""
        n = self.params.n_mutants if self.arm == "adaptive" else 1
        e = self.vectors[j]
        return normalize(e + self.rng.normal(0.0, self.sigma(j), size=(n, e.shape[0])).astype(np.float32))

    def accept(self, j: int, q: np.ndarray, mutants: np.ndarray) -> int | None:
        """Index of the accepted mutant or None. Adaptive: the best by cosine to the query, if it gains more than δ
        over the current vector and keeps cosine ≥ anchor to the original. Random: the mutant if it keeps the anchor."""
        p = self.params
        anchor_ok = mutants @ self.original[j] >= p.anchor
        if self.arm == "random":
            return 0 if anchor_ok[0] else None
        gains = mutants @ q - float(self.vectors[j] @ q)
        best = int(np.argmax(gains))
        return best if gains[best] > p.delta and anchor_ok[best] else None

    def mutate(self, j: int, q: np.ndarray) -> bool:
        mutants = self.propose(j)
        self.tried += 1
        pick = self.accept(j, q, mutants)
        if pick is None:
            return False
        self.vectors[j] = mutants[pick]
        self.generation[j] += 1
        self.accepted += 1
        return True

    def transitions(self, step: int) -> None:
        p = self.params
        self.tier[(self.tier == NAIVE) & (self.retrievals >= p.naive_to_gc)] = GC
        self.tier[(self.tier == GC) & (self.affinity >= p.memory_affinity) & (self.generation >= p.memory_generation)] = MEMORY
        dying = ((self.tier == NAIVE) | (self.tier == GC)) & (self.affinity < p.apoptosis_affinity) & (step - self.last > p.apoptosis_idle)
        self.tier[dying] = APOPTOTIC

    def decay(self, step: int) -> None:
        """Non-memory affinities idle for at least one decay interval shrink by exp(−λ) (the post-fix rule)."""
        p = self.params
        idle = (self.tier != MEMORY) & (self.tier != APOPTOTIC) & (step - self.last >= p.decay_every)
        self.affinity[idle] *= np.exp(-p.decay_lambda * p.decay_every / 100.0)

    def describe(self) -> dict:
        return {"arm": self.arm, **asdict(self.params)}
