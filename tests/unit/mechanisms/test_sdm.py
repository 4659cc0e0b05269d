"""Kanerva SDM (lethe_core.mechanisms.sdm) on hand-made addresses, and the checkpoint-15 study on a tiny benchmark."""

from __future__ import annotations

import numpy as np
import pytest

from lethe_core.mechanisms.sdm import SparseDistributedMemory, binarize, hamming, nearest, rank_binary


def bits(*rows: str) -> np.ndarray:
    return np.array([[c == "1" for c in r] for r in rows])


def test_hamming_matches_a_bit_count():
    a = bits("10110000", "11111111")
    b = bits("10110000", "00000000", "10100001")
    assert hamming(a, b).tolist() == [[0, 3, 2], [5, 8, 5]]


def test_activation_picks_the_nearest_locations_ties_by_lower_index():
    m = SparseDistributedMemory(n_locations=5, n_bits=8, n_active=2, seed=0)
    m.locations = bits("11111111", "10000000", "00000011", "00000001", "00000010")
    m._location_signs = m.locations.astype(np.float32) * 2 - 1
    # distances from 00000000: 8, 1, 2, 1, 1 -> the two nearest are 1 and 3 (ties at distance 1 by index)
    assert m.activate(bits("00000000")).tolist() == [[1, 3]]
    assert nearest(np.array([[3, 1, 1, 0]]), 3).tolist() == [[3, 1, 2]]


def test_write_adds_plus_minus_one_per_bit_to_the_activated_counters():
    m = SparseDistributedMemory(n_locations=50, n_bits=16, n_active=3, seed=1)
    x = bits("1010101010101010")
    active = m.activate(x)[0]
    m.write(x)
    sign = np.where(x[0], 1, -1)
    assert (m.counters[active] == sign).all()
    assert np.count_nonzero(m.counters) == 3 * 16  # nothing else touched
    m.write(x)
    assert (m.counters[active] == 2 * sign).all()


def test_write_then_read_recovers_the_address():
    rng = np.random.default_rng(0)
    stored = rng.integers(0, 2, size=(5, 512)).astype(bool)
    m = SparseDistributedMemory(n_locations=2000, n_bits=512, n_active=10, seed=2)
    m.write(stored)
    out = m.read(stored)
    assert (out == stored).all()
    assert m.rank(out, 1)[:, 0].tolist() == [0, 1, 2, 3, 4]
    # An empty memory reads all zeros (sum 0 is not > 0): the read is the memory, not the cue.
    assert not SparseDistributedMemory(100, 512, 10, seed=3).read(stored).any()


def test_cleanup_converges_onto_the_stored_address():
    x = bits("1100110011001100")
    m = SparseDistributedMemory(n_locations=8, n_bits=16, n_active=8, seed=4)  # every location active: read = x
    m.write(x)
    cue = x.copy()
    cue[0, :7] = ~cue[0, :7]  # 7 bits off: the first read changes 7 > 5 bits, the second none
    out, reads = m.read_cleanup(cue, iterations=3, tolerance=5)
    assert (out == x).all() and reads.tolist() == [2]
    out, reads = m.read_cleanup(x, iterations=3, tolerance=5)  # already clean: one read
    assert reads.tolist() == [1]
    _, reads = m.read_cleanup(cue, iterations=3, tolerance=-1)  # never settles: stops at the cap
    assert reads.tolist() == [3]
    first = m.read(cue)
    assert (m.read_cleanup(cue, 3, 5, first=first)[0] == out).all()


def test_binarize_is_the_sign_of_the_projection_and_rank_binary_orders_by_distance():
    planes = np.array([[1.0, -1.0, 0.5], [0.0, 1.0, -2.0]], dtype=np.float32)
    v = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    assert binarize(v, planes).tolist() == [[True, False, True], [False, True, False]]
    with pytest.raises(ValueError):
        binarize(np.zeros((1, 3)), planes)
    stored = bits("000", "111", "001")
    assert rank_binary(bits("011"), stored).tolist() == [[1, 2, 0]]


def test_bad_parameters_are_value_errors():
    with pytest.raises(ValueError):
        SparseDistributedMemory(n_locations=5, n_active=6)
    from lethe_core.experiments.sdm_study import SDMExperiment

    with pytest.raises(ValueError):
        SDMExperiment(faithful="sometimes")
    with pytest.raises(ValueError):
        SDMExperiment(seeds=2, benchmark_seeds=3)


def test_study_on_a_tiny_benchmark_is_deterministic_and_reused(tmp_path):
    from lethe_core.experiments.sdm_study import SDMExperiment
    from lethe_core.retrieval.pipeline import PipelineConfig

    cfg = dict(seeds=1, n_families=4, n_locations=200, pipeline=PipelineConfig(encoder="test:hash"), n_resamples=100,
               progress=False)
    a = SDMExperiment(**cfg).run(tmp_path / "r1", tmp_path / "c")
    b = SDMExperiment(**cfg).run(tmp_path / "r2", tmp_path / "c")
    assert a["table"] == b["table"] and a["paired"] == b["paired"]
    assert SDMExperiment(**cfg).run(tmp_path / "r1", tmp_path / "c") == a  # reused from summary.json
    rows = {(r["variant"], r["mode"], r["method"]): r for r in a["table"]}
    assert rows[("fixed", "exact", "faiss")]["p@1"] == 1.0  # an event's own text finds it (unique texts)
    assert rows[("fixed", "exact", "faiss")]["ceiling"] == 1.0
    assert rows[("fixed", "partial", "faiss")]["ceiling"] < 1.0  # preference siblings share verb + object
    assert {r["variant"] for r in a["table"]} == {"fixed", "faithful"}
