"""Checkpoint 04: a learned MLP adapter — a small network, trained online on the cross-encoder's verdicts,
proposes the per-turn adapter step (docs/mlp_adapter.md).

The reference (`gc_memory/mlp_adapter.py`, commits ef9a9c6 … 2798a4a) replaced the Gaussian proposals of CK2/CK3
by `DeltaPredictor`: concat(query 384, turn embedding 384, cross-encoder logit 1) = 769 → 128 (ReLU) → 384,
xavier-uniform weights with gain 0.1 and zero biases (148,096 parameters), one optimiser step per retrieved turn
(Adam, lr 5e-3; the first commits used SGD) on the loss −(sigmoid(logit) − 0.5)·cos(normalize(e + Δ), q), gradient
norm clipped at 1.0; the Δ of that forward pass (capped at norm 0.01) is added to the turn's adapter, whose norm
is clipped at 0.5, and the effective vector is normalize(base + adapter). Its store also kept the GC tiers (only
"GC-tier" turns, with σ0·(1 − affinity)^γ ≥ 1e-4, were trained) and an acceptance test (the new cosine to the
query must beat the old by δ = 0.005, later 0.001). It reported NFCorpus MLP 0.3362 (+0.6 %, a peak at step 400
picked on the evaluation queries, gone by step 800), "MLP + probability gate + low promotion" 0.3356 (+0.4 %,
code never committed) and LongMemEval +0.1 %, one seed, train = test.

Here (a `lethe_core.mechanisms.usage_stream` Mechanism): arm `mlp` is the rule as specified — every scored turn of the
dense top-30 gets one training step and its Δ, in dense order, so a positive verdict (logit > 0) pulls the turn
toward the query and a negative one pushes it away; no tiers and no acceptance test. Arm `gated` is our
*approximation* of the reference's gated variant (its code was never committed): affinity = EMA (α = 0.2) of
sigmoid(logit); a turn is promoted (never trained again) at affinity ≥ 0.65 and generation ≥ 3 ("low promotion");
otherwise it is trained with probability 1 − affinity (our reading of the "probability gate"), and its Δ is kept
only if it raises the cosine to the query by more than δ = 0.001. Update granularity: the reference took one
optimiser step per retrieved turn (`update_mode="turn"`, available); the study's default is one step per stream
step on the mean loss of its retrieved turns (`"step"`, 30 times cheaper — per-turn Adam over 148k parameters costs
~1–4 ms a turn on this shared CPU, too slow for seeds × protocols). Weights initialised by torch from a seeded
generator, the step written out in numpy (checked against torch autograd + Adam in the tests): a seed gives the
same run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from lethe_core.mechanisms.embedding_mutation import sigmoid
from lethe_core.mechanisms.usage_stream import drift, normalize

ARMS = ("mlp", "gated")


@dataclass(frozen=True)
class MLPParams:
    """The reference's constants (CHECKPOINTS.md, CK4); the gate constants are the `gated` arm's."""

    dim: int = 384
    hidden: int = 128
    init_gain: float = 0.1  # xavier-uniform gain; biases zero
    lr: float = 5e-3  # Adam
    grad_clip: float = 1.0
    step_cap: float = 0.01  # maximum norm of one Δ
    clip: float = 0.5  # maximum adapter norm
    # gated arm (approximation)
    alpha: float = 0.2  # affinity EMA of sigmoid(logit)
    initial_affinity: float = 0.5
    promote_affinity: float = 0.65
    promote_generation: int = 3
    delta: float = 0.001  # acceptance: cosine gain toward the query

    def __post_init__(self):
        if self.dim < 1 or self.hidden < 1 or self.lr <= 0 or self.grad_clip <= 0 or self.step_cap <= 0 or self.clip <= 0:
            raise ValueError("dim, hidden, lr, grad_clip, step_cap and clip must be positive")

    @property
    def n_parameters(self) -> int:
        return (2 * self.dim + 1) * self.hidden + self.hidden + self.hidden * self.dim + self.dim


def cap_norm(x: np.ndarray, limit: float) -> np.ndarray:
    """Rows (or a vector) scaled down to norm `limit` when longer."""
    x = np.asarray(x, dtype=np.float32)
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return (x * np.minimum(1.0, limit / np.maximum(n, 1e-12))).astype(np.float32)


def torch_init(params: MLPParams, seed: int) -> list[np.ndarray]:
    """The network's initial weights [W1 (769, 128), b1, W2 (128, 384), b2] (x @ W conventions): torch's
    xavier-uniform with gain `init_gain` from a seeded generator, zero biases."""
    gen = torch.Generator().manual_seed(int(seed))
    out = []
    for fan_in, fan_out in ((2 * params.dim + 1, params.hidden), (params.hidden, params.dim)):
        w = torch.empty(fan_out, fan_in)
        torch.nn.init.xavier_uniform_(w, gain=params.init_gain, generator=gen)
        out += [w.T.contiguous().numpy(), np.zeros(fan_out, dtype=np.float32)]
    return out


class DeltaNet:
    """concat(query, embedding, logit) → hidden (ReLU) → Δ, trained by Adam with gradient-norm clipping.

    Forward, backward and Adam written out in numpy over one flat parameter buffer (torch's per-call overhead
    was ~4 ms a step on this shared machine, numpy's step ~0.5–1.5 ms). `tests/unit/mechanisms/test_mlp_adapter.py` checks the
    step against torch autograd + `torch.optim.Adam` + `clip_grad_norm_`. Adam as torch's defaults (β = 0.9,
    0.999, ε = 1e-8, bias-corrected)."""

    BETAS = (0.9, 0.999)
    EPS = 1e-8

    def __init__(self, params: MLPParams, seed: int):
        self.params = params
        shapes = [(2 * params.dim + 1, params.hidden), (params.hidden,), (params.hidden, params.dim), (params.dim,)]
        sizes = [int(np.prod(s)) for s in shapes]
        self.flat = np.zeros(sum(sizes), dtype=np.float32)
        self.grad = np.zeros_like(self.flat)
        self.m, self.v, self.tmp = np.zeros_like(self.flat), np.zeros_like(self.flat), np.zeros_like(self.flat)
        offsets = np.cumsum([0] + sizes)
        self.w = [self.flat[a:b].reshape(s) for a, b, s in zip(offsets[:-1], offsets[1:], shapes)]
        self.g = [self.grad[a:b].reshape(s) for a, b, s in zip(offsets[:-1], offsets[1:], shapes)]
        for view, init in zip(self.w, torch_init(params, seed)):
            view[...] = init
        self.t = 0

    @property
    def n_parameters(self) -> int:
        return int(self.flat.size)

    def forward(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """x (B, 769) → (pre-activations (B, 128), Δ (B, 384))."""
        w1, b1, w2, b2 = self.w
        pre = x @ w1 + b1
        return pre, np.maximum(pre, 0.0) @ w2 + b2

    def step(self, q: np.ndarray, e: np.ndarray, logits: np.ndarray) -> tuple[np.ndarray, float]:
        """One Adam step on the mean over the B rows of −(sigmoid(logit) − 0.5)·cos(normalize(e + Δ), q)
        (q (384,), e (B, 384), logits (B,)). Returns the Δ of the forward pass (before the step) and the loss.
        """
        q = np.ascontiguousarray(q, dtype=np.float32)
        e = np.atleast_2d(np.asarray(e, dtype=np.float32))
        logits = np.atleast_1d(np.asarray(logits, dtype=np.float32))
        b = len(e)
        x = np.concatenate([np.broadcast_to(q, e.shape), e, logits[:, None]], axis=1)
        pre, delta = self.forward(x)
        u = e + delta
        n = np.maximum(np.linalg.norm(u, axis=1, keepdims=True), 1e-12)  # torch's normalize: eps 1e-12
        cos = (u @ q)[:, None] / n
        s = (1.0 / (1.0 + np.exp(-logits.astype(np.float64))) - 0.5).astype(np.float32)[:, None]
        loss = float(np.mean(-s[:, 0] * cos[:, 0]))
        g_delta = (-s / b) * (q[None, :] / n - cos * u / (n * n))  # d loss / d Δ
        w1, b1, w2, b2 = self.w
        h = np.maximum(pre, 0.0)
        gw1, gb1, gw2, gb2 = self.g
        np.matmul(h.T, g_delta, out=gw2)
        gb2[...] = g_delta.sum(axis=0)
        g_pre = (g_delta @ w2.T) * (pre > 0)
        np.matmul(x.T, g_pre, out=gw1)
        gb1[...] = g_pre.sum(axis=0)
        total = float(np.sqrt(np.dot(self.grad, self.grad)))
        clip = self.params.grad_clip / (total + 1e-6)  # as torch.nn.utils.clip_grad_norm_
        if clip < 1.0:
            self.grad *= np.float32(clip)
        self._adam()
        return delta, loss

    def _adam(self) -> None:
        b1, b2 = self.BETAS
        self.t += 1
        g, m, v, tmp = self.grad, self.m, self.v, self.tmp
        m *= b1
        m += (1 - b1) * g
        v *= b2
        np.multiply(g, g, out=tmp)
        tmp *= 1 - b2
        v += tmp
        np.sqrt(v, out=tmp)
        tmp *= np.float32(1.0 / np.sqrt(1 - b2 ** self.t))
        tmp += self.EPS
        np.divide(m, tmp, out=tmp)
        tmp *= np.float32(self.params.lr / (1 - b1 ** self.t))
        self.flat -= tmp


UPDATES = ("turn", "step")


class MLPAdapter:
    """Frozen base vectors plus per-turn adapters written by an online-trained MLP; `effective()` = normalize(base + adapter).

    `update_mode`: `turn` — the reference's, one optimiser step per retrieved turn in dense order, each turn's
    input its current effective vector; `step` — one optimiser step per stream step on the mean loss of the
    retrieved turns (30 times cheaper: what the study runs by default, docs/mlp_adapter.md)."""

    def __init__(self, vectors: np.ndarray, arm: str = "mlp", params: MLPParams = MLPParams(), seed: int = 0,
                 update_mode: str = "step", threads: int | None = 1):
        if arm not in ARMS:
            raise ValueError(f"MLP-adapter arm must be one of {ARMS}, got {arm!r}")
        if update_mode not in UPDATES:
            raise ValueError(f"update_mode must be one of {UPDATES}, got {update_mode!r}")
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != params.dim:
            raise ValueError(f"vectors must be (n_turns, {params.dim}), got {vectors.shape}")
        if threads:
            torch.set_num_threads(threads)  # torch only initialises the weights; keep it off the shared cores
        self.name = arm
        self.arm = arm
        self.update_mode = update_mode
        self.params = params
        self.rng = np.random.default_rng(seed)
        self.net = DeltaNet(params, seed)
        self.base = normalize(vectors)
        self.adapter = np.zeros_like(self.base)
        self.eff = self.base.copy()
        self.affinity = np.full(len(self.base), params.initial_affinity, dtype=np.float64)
        self.generation = np.zeros(len(self.base), dtype=np.int64)
        self.counts = {"trained": 0, "applied": 0, "rejected": 0, "skipped": 0, "optimizer_steps": 0}
        self.loss_sum = 0.0

    # --- the Mechanism protocol (lethe_core.mechanisms.usage_stream)
    def effective(self) -> np.ndarray:
        return self.eff

    def update(self, step: int, qvec: np.ndarray, doc_idx: np.ndarray, logits: np.ndarray) -> None:
        p = self.params
        doc_idx, logits = np.asarray(doc_idx, dtype=np.int64), np.asarray(logits, dtype=np.float32)
        if len(doc_idx) == 0:
            return
        q = normalize(qvec).astype(np.float32)
        if self.arm == "gated":
            self.affinity[doc_idx] = (1 - p.alpha) * self.affinity[doc_idx] + p.alpha * sigmoid(logits)
            keep = np.array([self._open(int(j)) for j in doc_idx], dtype=bool)
            self.counts["skipped"] += int((~keep).sum())
            doc_idx, logits = doc_idx[keep], logits[keep]
            if len(doc_idx) == 0:
                return
        if self.update_mode == "turn":
            for j, lg in zip(doc_idx, logits):
                delta, loss = self.net.step(q, self.eff[j], np.array([lg]))
                self._record(loss, 1)
                self.apply(np.array([j]), q, delta)
        else:
            delta, loss = self.net.step(q, self.eff[doc_idx], logits)
            self._record(loss, len(doc_idx))
            self.apply(doc_idx, q, delta)

    def diagnostics(self) -> dict:
        touched = self.generation > 0
        out = drift(self.base, self.eff, touched)
        norms = np.linalg.norm(self.adapter, axis=1)
        t = norms[touched]
        out.update(self.counts, mean_adapter_norm=float(t.mean()) if len(t) else 0.0,
                   max_adapter_norm=float(norms.max()) if len(norms) else 0.0,
                   at_clip=int((t >= self.params.clip - 1e-6).sum()),
                   mean_loss=self.loss_sum / self.counts["trained"] if self.counts["trained"] else float("nan"))
        if self.arm == "gated":
            out["promoted"] = int(self._promoted().sum())
        return out

    # --- the rule
    def _record(self, loss: float, n: int) -> None:
        self.counts["trained"] += n
        self.counts["optimizer_steps"] += 1
        self.loss_sum += loss * n

    def _promoted(self) -> np.ndarray:
        p = self.params
        return (self.affinity >= p.promote_affinity) & (self.generation >= p.promote_generation)

    def _open(self, j: int) -> bool:
        """Gated arm: promoted turns are frozen; the others are trained with probability 1 − affinity."""
        p = self.params
        if self.affinity[j] >= p.promote_affinity and self.generation[j] >= p.promote_generation:
            return False
        return bool(self.rng.random() < 1.0 - self.affinity[j])

    def apply(self, j: np.ndarray, q: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """Move turns j (distinct) by their Δ capped at `step_cap`, the adapter clipped at `clip`; the gated arm keeps
        a move only if the cosine to the query rises by more than δ. Returns the mask of turns that moved."""
        j = np.asarray(j, dtype=np.int64)
        new = cap_norm(self.adapter[j] + cap_norm(delta, self.params.step_cap), self.params.clip)
        new_eff = normalize(self.base[j] + new)
        ok = np.ones(len(j), dtype=bool)
        if self.arm == "gated":
            ok = new_eff @ q - np.sum(self.eff[j] * q, axis=1) > self.params.delta
        self.adapter[j[ok]], self.eff[j[ok]] = new[ok], new_eff[ok]
        self.generation[j[ok]] += 1
        self.counts["applied"] += int(ok.sum())
        self.counts["rejected"] += int((~ok).sum())
        return ok

    def n_parameters(self) -> int:
        return self.net.n_parameters

    def describe(self) -> dict:
        return {"arm": self.arm, "update_mode": self.update_mode, **asdict(self.params)}
