"""The MLP adapter's update rule on hand-made inputs: size, the numpy step equals torch autograd + Adam, caps,
direction of a positive / negative verdict, determinism, gates, bad parameters."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from lethe_core.experiments.mlp_adapter_study import MLPAdapterStudy
from lethe_core.mechanisms.mlp_adapter import DeltaNet, MLPAdapter, MLPParams, torch_init
from lethe_core.mechanisms.usage_stream import Mechanism, normalize


@pytest.fixture(autouse=True, scope="module")
def one_blas_thread():
    """As in `run_stream`: threaded BLAS on these small products is many times slower."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def vectors(n=40, seed=0):
    return normalize(np.random.default_rng(seed).normal(size=(n, 384)))


def query(seed=1):
    return normalize(np.random.default_rng(seed).normal(size=384)).astype(np.float32)


def test_parameter_count():
    m = MLPAdapter(vectors(), seed=0)
    assert m.n_parameters() == MLPParams().n_parameters == 148_096
    assert isinstance(m, Mechanism)


@pytest.mark.parametrize("rows", [1, 3])
def test_step_equals_torch_autograd_and_adam(rows):
    p = MLPParams(grad_clip=0.05)  # small enough that clipping is exercised
    rng = np.random.default_rng(3)
    net = DeltaNet(p, seed=7)
    w1, b1, w2, b2 = (torch.tensor(a, requires_grad=True) for a in torch_init(p, 7))
    opt = torch.optim.Adam([w1, b1, w2, b2], lr=p.lr)
    clipped = []
    for _ in range(3):
        q = query(int(rng.integers(100)))
        e = normalize(rng.normal(size=(rows, 384))).astype(np.float32)
        lg = (rng.normal(size=rows) * 4).astype(np.float32)
        delta, loss = net.step(q, e, lg)
        qt, et, lt = torch.tensor(q), torch.tensor(e), torch.tensor(lg)
        opt.zero_grad()
        d = torch.relu(torch.cat([qt.expand(rows, -1), et, lt[:, None]], 1) @ w1 + b1) @ w2 + b2
        cos = torch.nn.functional.normalize(et + d, dim=-1) @ qt
        tl = (-(torch.sigmoid(lt) - 0.5) * cos).mean()
        tl.backward()
        clipped.append(float(torch.nn.utils.clip_grad_norm_([w1, b1, w2, b2], p.grad_clip)) > p.grad_clip)
        opt.step()
        assert delta == pytest.approx(d.detach().numpy(), abs=1e-6) and loss == pytest.approx(float(tl.detach()), abs=1e-6)
    got = net.w
    for a, b in zip(got, (w1, b1, w2, b2)):
        assert np.abs(a - b.detach().numpy()).max() < 1e-5
    assert any(clipped)


def test_per_step_delta_cap():
    p = MLPParams(init_gain=20.0)  # raw deltas far above the cap
    m = MLPAdapter(vectors(), params=p, seed=0)
    raw = m.net.forward(np.concatenate([query(), m.eff[0], [3.0]])[None, :].astype(np.float32))[1]
    assert np.linalg.norm(raw) > 10 * p.step_cap
    m.update(0, query(), np.arange(10), np.full(10, 3.0))
    norms = np.linalg.norm(m.adapter[:10], axis=1)
    assert norms == pytest.approx(np.full(10, p.step_cap), abs=1e-6)
    assert np.all(m.adapter[10:] == 0)
    assert np.allclose(np.linalg.norm(m.eff, axis=1), 1.0, atol=1e-5)


def test_adapter_norm_cap():
    p = MLPParams(init_gain=20.0, step_cap=0.3)
    m = MLPAdapter(vectors(), params=p, seed=0)
    for t in range(6):
        m.update(t, query(t), np.arange(5), np.full(5, 4.0))
    norms = np.linalg.norm(m.adapter[:5], axis=1)
    assert norms.max() <= p.clip + 1e-6 and norms.max() >= p.clip - 1e-4
    assert m.diagnostics()["at_clip"] >= 1


@pytest.mark.parametrize("mode", ["step", "turn"])
def test_positive_verdict_pulls_negative_pushes(mode):
    """After a short warm-up on one query (turns 0-9 relevant, 10-19 not), one update on a fresh turn moves it toward
    the query on a positive verdict and away on a negative one (the Δ of an update comes from the forward pass before
    its optimiser step, as in the reference, so a net that never trained moves at random)."""
    q = query()

    def warmed():
        m = MLPAdapter(vectors(), seed=0, update_mode=mode)
        for t in range(15):
            m.update(t, q, np.arange(20), np.r_[np.full(10, 5.0), np.full(10, -5.0)])
        return m

    up, down = warmed(), warmed()
    before = float(up.eff[30] @ q)
    up.update(99, q, np.array([30]), np.array([5.0]))
    down.update(99, q, np.array([30]), np.array([-5.0]))
    assert float(up.eff[30] @ q) > before + 1e-3
    assert float(down.eff[30] @ q) < before - 1e-3


def test_deterministic_for_a_seed():
    def run(seed):
        m = MLPAdapter(vectors(), seed=seed, arm="gated")
        rng = np.random.default_rng(5)
        for t in range(10):
            m.update(t, query(t), rng.permutation(40)[:12], rng.normal(size=12) * 3)
        return m

    a, b, c = run(1), run(1), run(2)
    assert np.array_equal(a.eff, b.eff) and np.array_equal(a.net.flat, b.net.flat) and a.counts == b.counts
    assert not np.array_equal(a.net.flat, c.net.flat)


def test_gated_freezes_promoted_turns():
    m = MLPAdapter(vectors(), arm="gated", seed=0)
    m.affinity[:] = 0.9
    m.generation[:] = 3
    m.update(0, query(), np.arange(5), np.full(5, 5.0))
    assert m.counts["skipped"] == 5 and np.all(m.adapter == 0)


def test_bad_parameters():
    with pytest.raises(ValueError):
        MLPAdapter(vectors(), arm="nope")
    with pytest.raises(ValueError):
        MLPAdapter(vectors()[:, :10])
    with pytest.raises(ValueError):
        MLPAdapter(vectors(), update_mode="epoch")
    with pytest.raises(ValueError):
        dataclasses.replace(MLPParams(), clip=0.0)
    with pytest.raises(ValueError):
        MLPAdapterStudy(arms=("static",))
    with pytest.raises(ValueError):
        MLPAdapterStudy(update_mode="batch")
