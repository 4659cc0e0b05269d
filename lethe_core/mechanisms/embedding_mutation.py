"""Checkpoint 01: germinal-centre mutation of the turn embeddings themselves (docs/mutation.md).

The reference (`gc_memory` at 13e7f43, not at its HEAD) mutated each retrieved GC-tier entry's embedding:
σ = σ0·(1 − affinity)^γ (σ0 = 0.05, γ = 2), five mutants `normalize(e + N(0, σ²I))`, the best (highest cosine
to the query) accepted only if its cosine gain over the current vector exceeds δ = 0.01 *and* its cosine to the
original embedding stays ≥ 0.7; a random arm mutated with a fixed σ = 0.025. Affinity was an EMA (α = 0.2) of
the retrieval cosine; tiers naive → gc after 3 retrievals, gc → memory at affinity ≥ 0.75 and generation ≥ 5,
apoptosis (removed from the index) at affinity < 0.15 and more than 1,000 steps idle; memory-tier entries score
×1.15; non-memory affinities idle for a decay interval decay by exp(−λ) every 100 steps (λ = 0.01, the version
after its decay fix). Its usage stream and its evaluation used the same 323 NFCorpus test queries.

Here (same constants): the affinity signal is the **cross-encoder's verdict**, sigmoid(raw logit) of the pair
(the reference's CK1 used the bi-encoder cosine; its later stores used this sigmoid). "Retrieved" =
the cross-encoder's top-10 of the dense top-30 (retrieval count, idle clock, affinity); the memory weight
multiplies the dense inner product (the first stage; the reranked order is the cross-encoder's); a turn's
"generation" counts its accepted mutations. The random arm is our reading of "random, fixed σ": one mutant with
σ = 0.025, accepted whenever it keeps the anchor cosine ≥ 0.7 (no fitness test) — undirected drift under the same
life cycle. The stream and its protocols (the reference's train = test and a held-out split) are
`lethe_core.mechanisms.usage_stream`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from lethe_core.mechanisms.usage_stream import drift, normalize

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

    # --- the Mechanism protocol (lethe_core.mechanisms.usage_stream)
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
        self.mutate(top[self.tier[top] == GC], normalize(qvec))
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
    def sigma(self, j):
        """σ of turn(s) j: fixed (random arm) or σ0·(1 − affinity)^γ (adaptive)."""
        p = self.params
        if self.arm == "random":
            return np.full(np.shape(j), p.random_sigma) if np.ndim(j) else p.random_sigma
        return p.sigma0 * (1.0 - self.affinity[j]) ** p.gamma

    def propose(self, j) -> np.ndarray:
        """Mutants normalize(e + N(0, σ²I)): n_mutants per turn (adaptive) or one (random); shape (n, d) for one
        turn j, (len(j), n, d) for an array of turns."""
        n = self.params.n_mutants if self.arm == "adaptive" else 1
        js = np.atleast_1d(j)
        e = self.vectors[js][:, None, :]
        sigma = np.atleast_1d(self.sigma(js))[:, None, None]
        noise = self.rng.normal(0.0, 1.0, size=(len(js), n, e.shape[2])) * sigma
        mutants = normalize((e + noise).astype(np.float32))
        return mutants if np.ndim(j) else mutants[0]

    def accept_many(self, js: np.ndarray, q: np.ndarray, mutants: np.ndarray) -> np.ndarray:
        """Per turn, the index of the accepted mutant or −1. Adaptive: the best by cosine to the query, if it gains
        more than δ over the current vector and keeps cosine ≥ anchor to the original. Random: the (single) mutant if
        it keeps the anchor."""
        p = self.params
        anchors = np.einsum("mnd,md->mn", mutants, self.original[js])
        if self.arm == "random":
            return np.where(anchors[:, 0] >= p.anchor, 0, -1)
        gains = mutants @ q - (self.vectors[js] @ q)[:, None]
        best = np.argmax(gains, axis=1)
        rows = np.arange(len(js))
        ok = (gains[rows, best] > p.delta) & (anchors[rows, best] >= p.anchor)
        return np.where(ok, best, -1)

    def accept(self, j: int, q: np.ndarray, mutants: np.ndarray) -> int | None:
        """`accept_many` for one turn and its (n, d) mutants: the accepted index or None."""
        pick = int(self.accept_many(np.array([j]), q, np.asarray(mutants, dtype=np.float32)[None])[0])
        return None if pick < 0 else pick

    def mutate(self, js: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Propose and test mutants for the distinct turns js; returns the acceptance mask."""
        js = np.asarray(js, dtype=np.int64)
        if len(js) == 0:
            return np.zeros(0, dtype=bool)
        mutants = self.propose(js)
        pick = self.accept_many(js, q, mutants)
        ok = pick >= 0
        self.vectors[js[ok]] = mutants[np.flatnonzero(ok), pick[ok]]
        self.generation[js[ok]] += 1
        self.tried += len(js)
        self.accepted += int(ok.sum())
        return ok

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
