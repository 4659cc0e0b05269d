"""Kanerva sparse distributed memory (SDM) over binary addresses made from dense embeddings (checkpoint 15).

What the reference did (CHECKPOINTS.md, CK15, `research_playground/sdm/`): 512-bit addresses from MiniLM
embeddings by random Gaussian hyperplanes, bit = sign(Wᵀv) > 0 (seed 42); 8,000 random binary hard locations;
a write activates the 10 locations nearest to the address by Hamming distance and adds ±1 per bit (+1 for a
one bit, −1 for a zero) to their int16 counters; a read sums the counters of the 10 locations activated by the
cue and thresholds the sum at > 0; the read-out ranks the stored memory addresses by Hamming similarity. The
clean-up variant feeds the read-out back as the next cue, up to 3 reads, stopping once a read changes ≤ 5 bits.

Here: the same constants, vectorised (Hamming distances as one matrix product of ±1 vectors; activation ties
broken by the lower location index, ranking ties by the lower memory index, so every result is deterministic
for a seed). Also `rank_binary`: the stored addresses ranked by Hamming distance to the cue's own address
with no memory in between — it separates what binarisation loses from what the memory's read loses.
See docs/sdm.md.
"""

from __future__ import annotations

import numpy as np

N_BITS = 512
N_LOCATIONS = 8_000
N_ACTIVE = 10
CLEANUP_ITERATIONS = 3
CLEANUP_TOLERANCE = 5  # stop once a read changes at most this many bits


def hyperplanes(dim: int, n_bits: int = N_BITS, seed: int = 42) -> np.ndarray:
    """Random Gaussian hyperplanes W (dim x n_bits)."""
    return np.random.default_rng(seed).standard_normal((dim, n_bits)).astype(np.float32)


def binarize(vectors: np.ndarray, planes: np.ndarray) -> np.ndarray:
    """Addresses: bit j of row i is 1 iff vᵢ·W[:, j] > 0 (bool array, n x n_bits)."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim != 2 or v.shape[1] != planes.shape[0]:
        raise ValueError(f"vectors must be (n, {planes.shape[0]}), got {v.shape}")
    return v @ planes > 0


def signs(bits: np.ndarray) -> np.ndarray:
    """Bool addresses as ±1 float32 rows (what `hamming` multiplies)."""
    return np.atleast_2d(bits).astype(np.float32) * 2 - 1


def hamming(a: np.ndarray, b: np.ndarray, b_signs: np.ndarray | None = None) -> np.ndarray:
    """Pairwise Hamming distances between the bool rows of `a` (n x d) and `b` (m x d), as int32 (n x m).
    `b_signs`: `signs(b)`, when the caller keeps it."""
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"addresses differ in length: {a.shape[1]} vs {b.shape[1]}")
    sb = signs(b) if b_signs is None else b_signs
    # d - s·s' = 2 * (number of differing bits); exact in float32 for d <= 2**24.
    return np.rint((a.shape[1] - signs(a) @ sb.T) / 2).astype(np.int32)


def nearest(distances: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k smallest distances per row, ascending, ties by the lower index (n x k)."""
    n, m = distances.shape
    k = min(k, m)
    wide = (int(distances.max(initial=0)) + 1) * m >= 2**31
    dtype = np.int64 if wide else np.int32
    key = distances.astype(dtype) * dtype(m) + np.arange(m, dtype=dtype)  # unique: distance, then index
    part = np.argpartition(key, k - 1, axis=1)[:, :k] if k < m else np.tile(np.arange(m), (n, 1))
    order = np.argsort(np.take_along_axis(key, part, axis=1), axis=1)
    return np.take_along_axis(part, order, axis=1)


class SparseDistributedMemory:
    """Hard locations with int16 counters; `write` stores addresses autoassociatively, `read` reconstructs one."""

    def __init__(self, n_locations: int = N_LOCATIONS, n_bits: int = N_BITS, n_active: int = N_ACTIVE, seed: int = 42):
        if n_locations < 1 or n_bits < 1 or not 1 <= n_active <= n_locations:
            raise ValueError(f"need n_locations >= 1, n_bits >= 1, 1 <= n_active <= n_locations; got "
                             f"{n_locations}, {n_bits}, {n_active}")
        self.n_bits, self.n_active = n_bits, n_active
        self.locations = np.random.default_rng(seed).integers(0, 2, size=(n_locations, n_bits)).astype(bool)
        self._location_signs = signs(self.locations)
        self.counters = np.zeros((n_locations, n_bits), dtype=np.int16)
        self.memory = np.zeros((0, n_bits), dtype=bool)  # the stored addresses, in write order

    def activate(self, addresses: np.ndarray) -> np.ndarray:
        """The `n_active` hard locations nearest to each address (n x n_active)."""
        return nearest(hamming(addresses, self.locations, self._location_signs), self.n_active)

    def write(self, addresses: np.ndarray) -> None:
        """Add ±1 per bit of each address to the counters of its activated locations (saturating at int16)."""
        addresses = np.atleast_2d(np.asarray(addresses, dtype=bool))
        active = self.activate(addresses)
        delta = np.zeros(self.counters.shape, dtype=np.int32)
        np.add.at(delta, active, (addresses.astype(np.int32) * 2 - 1)[:, None, :])
        info = np.iinfo(np.int16)
        self.counters = np.clip(self.counters.astype(np.int32) + delta, info.min, info.max).astype(np.int16)
        self.memory = np.concatenate([self.memory, addresses])

    def read(self, cues: np.ndarray) -> np.ndarray:
        """Sum the counters of each cue's activated locations; bit = sum > 0 (n x n_bits bool)."""
        cues = np.atleast_2d(np.asarray(cues, dtype=bool))
        active = self.activate(cues)
        sums = self.counters[active].sum(axis=1, dtype=np.int32)
        return sums > 0

    def read_cleanup(self, cues: np.ndarray, iterations: int = CLEANUP_ITERATIONS, tolerance: int = CLEANUP_TOLERANCE,
                     first: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Iterated read: feed each read-out back as the cue, at most `iterations` reads, a row stopping once a
        read changes <= `tolerance` bits of its cue. `first`: the plain read of `cues`, when already done (it
        is the clean-up's first read). Returns the read-outs and the number of reads each row took."""
        if iterations < 1:
            raise ValueError(f"iterations must be >= 1, got {iterations}")
        current = np.atleast_2d(np.asarray(cues, dtype=bool)).copy()
        reads = np.zeros(len(current), dtype=np.int32)
        running = np.ones(len(current), dtype=bool)
        for it in range(iterations):
            idx = np.flatnonzero(running)
            if idx.size == 0:
                break
            out = np.asarray(first, dtype=bool)[idx] if it == 0 and first is not None else self.read(current[idx])
            changed = (out != current[idx]).sum(axis=1)
            current[idx] = out
            reads[idx] += 1
            running[idx[changed <= tolerance]] = False
        return current, reads

    def rank(self, readouts: np.ndarray, k: int | None = None) -> np.ndarray:
        """Stored memories ranked by Hamming distance to each read-out (ties: earlier write first)."""
        return rank_binary(readouts, self.memory, k)


def rank_binary(cues: np.ndarray, stored: np.ndarray, k: int | None = None) -> np.ndarray:
    """Rows of `stored` ranked by Hamming distance to each cue, ties by the lower index (n x k)."""
    d = hamming(cues, stored)
    return nearest(d, d.shape[1] if k is None else k)


__all__ = ["CLEANUP_ITERATIONS", "CLEANUP_TOLERANCE", "N_ACTIVE", "N_BITS", "N_LOCATIONS", "SparseDistributedMemory",
           "binarize", "hamming", "signs", "hyperplanes", "nearest", "rank_binary"]
