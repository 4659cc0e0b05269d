"""Checkpoint 15, sparse distributed memory: FAISS vs SDM vs SDM + clean-up on the synthetic episodic benchmark.

Per seed i (i < `seeds`): the benchmark generated with seed `seed + i % benchmark_seeds`
(`lethe_core.datasets.episodic`), hyperplanes with seed `seed + i`, hard locations with seed `seed + i + 1`.
Events and queries are embedded once with the bundled MiniLM through the embedding cache
(`retrieval.pipeline.query_vectors`); the methods rank the 250 events for every query:
- `faiss`: IndexFlatIP on the same MiniLM vectors (the reference's baseline);
- `binary`: Hamming distance between the query's 512-bit address and the events' (no memory: what
  binarisation alone costs);
- `sdm`: the events' addresses written to the memory, one read, read-out ranked by Hamming distance;
- `sdm_cleanup`: the read iterated (up to 3 reads, stop once ≤ 5 bits change).
The `exact` mode is the reference's sanity check (query = the event's own text). The faithful generator (the
reference's flaws kept) runs on the first seed (`faithful="first"`), on every seed (`"all"`) or not (`"none"`).

Statistics: per query *position* (the same event slot and mode in every seed's benchmark) the mean over
seeds is the unit the bootstrap resamples (CI over queries); the per-seed means give a t-interval (CI over
seeds). Paired tests: SDM (and clean-up, binary) minus FAISS on P@1, per position, Holm-adjusted over modes.
Results: `data/results/sdm-<key>/` with config.json, per_query.parquet (one row per seed, variant, query and
method), summary.json. A finished run with the same config is reused. See docs/sdm.md.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from lethe_core.measures import stats
from lethe_core.datasets.episodic import MODES, EpisodicBenchmark, episodic_benchmark
from lethe_core.results.store import DEFAULT_SAVE_MODE, as_json, digest, reuse_or_run, run_dir, write_json, write_parquet, write_summary
from lethe_core.util.paths import cache_dir
from lethe_core.retrieval.dense import DenseIndex, encoder_name
from lethe_core.retrieval.pipeline import PipelineConfig, query_vectors
from lethe_core.mechanisms.sdm import (CLEANUP_ITERATIONS, CLEANUP_TOLERANCE, N_ACTIVE, N_BITS, N_LOCATIONS, SparseDistributedMemory,
                   binarize, hyperplanes, rank_binary)

METHODS = ("faiss", "binary", "sdm", "sdm_cleanup")
METRICS = ("p@1", "r@5", "r@10", "sibling_confusion")
ALL_MODES = (*MODES, "exact")
FAITHFUL = ("none", "first", "all")
DEPTH = 10


@dataclass
class SDMExperiment:
    """FAISS vs SDM (± clean-up) per noise mode, over seeds of the generator and the hyperplanes."""

    seeds: int = 5
    benchmark_seeds: int | None = None  # distinct generator seeds (None: one per seed); seed i uses i % this
    seed: int = 42  # the reference's seed (events 42, queries 43, hyperplanes 42)
    n_families: int = 50
    siblings_per_family: int = 5
    faithful: str = "first"
    n_locations: int = N_LOCATIONS
    n_bits: int = N_BITS
    n_active: int = N_ACTIVE
    cleanup_iterations: int = CLEANUP_ITERATIONS
    cleanup_tolerance: int = CLEANUP_TOLERANCE
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)  # only its encoder is used
    n_resamples: int = stats.N_RESAMPLES
    progress: bool = True

    def __post_init__(self):
        if self.seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {self.seeds}")
        if self.benchmark_seeds is not None and not 1 <= self.benchmark_seeds <= self.seeds:
            raise ValueError(f"benchmark_seeds must be between 1 and seeds ({self.seeds}), got {self.benchmark_seeds}")
        if self.faithful not in FAITHFUL:
            raise ValueError(f"faithful must be one of {FAITHFUL}, got {self.faithful!r}")
        if not 1 <= self.n_active <= self.n_locations:
            raise ValueError(f"need 1 <= n_active <= n_locations, got {self.n_active}, {self.n_locations}")
        if self.cleanup_iterations < 1 or self.cleanup_tolerance < 0:
            raise ValueError("cleanup_iterations must be >= 1 and cleanup_tolerance >= 0")

    def plan(self) -> list[dict]:
        """One entry per (seed index, variant): which benchmark, hyperplane and location seeds it uses."""
        n_bench = self.benchmark_seeds or self.seeds
        out = []
        for i in range(self.seeds):
            for variant in ("fixed", "faithful"):
                if variant == "faithful" and (self.faithful == "none" or (self.faithful == "first" and i > 0)):
                    continue
                out.append({"seed_index": i, "variant": variant, "benchmark_seed": self.seed + i % n_bench,
                            "hyperplane_seed": self.seed + i, "location_seed": self.seed + i + 1})
        return out

    def config(self) -> dict:
        return {**{k: v for k, v in asdict(self).items() if k != "progress"}, "pipeline": asdict(self.pipeline),
                "encoder": encoder_name(self.pipeline.encoder, self.pipeline.encoder_backend)}

    def run_id(self, config: dict | None = None) -> str:
        return f"sdm-{self.seeds}seeds-{digest(config or self.config(), 12)}"

    def run(self, results_root: Path | None = None, cache_root: Path | None = None, mode: str = DEFAULT_SAVE_MODE) -> dict:
        config = self.config()
        out = run_dir(self.run_id(config), results_root)
        return reuse_or_run(out, as_json(config), lambda: self._compute(out, config, cache_root), mode)

    def _compute(self, out: Path, config: dict, cache_root: Path | None) -> dict:
        plan = self.plan()
        benches = {(p["variant"], p["benchmark_seed"]): None for p in plan}
        for variant, s in benches:
            benches[(variant, s)] = episodic_benchmark(s, self.n_families, self.siblings_per_family, variant == "faithful")
        # One embedding call for every text (the model loads once, only if a text is not cached).
        items = [x for b in benches.values() for x in (*b.events, *b.queries)]
        vectors = query_vectors(items, self.pipeline, cache_root or cache_dir(), self.progress)
        offsets, pos = {}, 0
        for k, b in benches.items():
            offsets[k] = pos
            pos += len(b.events) + len(b.queries)

        from tqdm.auto import tqdm

        frames, readouts = [], []
        for p in tqdm(plan, desc="sdm seeds", disable=not self.progress):
            b = benches[(p["variant"], p["benchmark_seed"])]
            start = offsets[(p["variant"], p["benchmark_seed"])]
            ev = vectors[start:start + len(b.events)]
            qv = vectors[start + len(b.events):start + len(b.events) + len(b.queries)]
            frame, reads = evaluate(b, ev, qv, p, self)
            frames.append(frame)
            readouts.append({**p, "mean_reads": float(reads.mean()), "converged": float((reads < self.cleanup_iterations).mean())})
        per_query = pd.concat(frames, ignore_index=True)

        summary = {
            "config": as_json(config), "plan": plan, "results_dir": str(out),
            "benchmarks": {f"{v}-{s}": b.stats() for (v, s), b in benches.items()},
            "table": json.loads(summary_table(per_query, self.n_resamples).to_json(orient="records")),
            "paired": json.loads(paired_tests(per_query, self.n_resamples).to_json(orient="records")),
            "exact": json.loads(exact_counts(per_query).to_json(orient="records")),
            "cleanup": readouts,
        }
        write_json(out / "config.json", summary["config"], default=None)
        write_parquet(out / "per_query.parquet", per_query)
        return write_summary(out, summary, default=None)


def evaluate(bench: EpisodicBenchmark, event_vecs: np.ndarray, query_vecs: np.ndarray, plan: dict,
             cfg: SDMExperiment) -> tuple[pd.DataFrame, np.ndarray]:
    """Rank the events for every query (and every event's own text) with each method; one row per query and method."""
    queries = (*bench.queries, *bench.exact_queries())
    qv = np.concatenate([query_vecs, event_vecs])
    index = bench.event_index()
    target = np.array([index[q.target] for q in queries])
    keys = np.array([e.family_key for e in bench.events])
    ceiling = np.concatenate([bench.achievable_p1(), bench.achievable_p1(bench.exact_queries())])

    planes = hyperplanes(event_vecs.shape[1], cfg.n_bits, plan["hyperplane_seed"])
    ev_bits, q_bits = binarize(event_vecs, planes), binarize(qv, planes)
    memory = SparseDistributedMemory(cfg.n_locations, cfg.n_bits, cfg.n_active, plan["location_seed"])
    memory.write(ev_bits)
    first = memory.read(q_bits)
    cleaned, reads = memory.read_cleanup(q_bits, cfg.cleanup_iterations, cfg.cleanup_tolerance, first=first)
    idx, scores = DenseIndex(event_vecs).search(qv, len(bench.events))
    # FAISS leaves ties open (and float rounding differs between rows): equal scores (to 1e-6) by the lower
    # index, as the Hamming rankings, so identical texts get identical rankings.
    order = np.lexsort((idx, -np.round(scores, 6)), axis=1)
    idx = np.take_along_axis(idx, order, axis=1)[:, :DEPTH]
    rankings = {"faiss": idx, "binary": rank_binary(q_bits, ev_bits, DEPTH), "sdm": memory.rank(first, DEPTH),
                "sdm_cleanup": memory.rank(cleaned, DEPTH)}

    base = pd.DataFrame({"query_id": [q.id for q in queries], "mode": [q.mode for q in queries],
                         "position": np.arange(len(queries)), "target": [q.target for q in queries],
                         "text": [q.text for q in queries],
                         "ceiling": ceiling, "reads": reads})
    frames = []
    for method, ranked in rankings.items():
        hit = ranked == target[:, None]
        top1 = ranked[:, 0]
        frames.append(base.assign(method=method, **{
            "p@1": hit[:, 0].astype(float), "r@5": hit[:, :5].any(axis=1).astype(float),
            "r@10": hit[:, :10].any(axis=1).astype(float),
            "sibling_confusion": ((top1 != target) & (keys[top1] == keys[target])).astype(float),
            "top1": [bench.events[i].id for i in top1]}))
    return pd.concat(frames, ignore_index=True).assign(**{k: plan[k] for k in plan}), reads


def _seed_ci(values: np.ndarray) -> tuple[float, float]:
    """Student-t 95 % interval of the mean over seeds (NaN with one seed)."""
    from scipy.special import stdtrit  # scipy.special loads in a fraction of scipy.stats' time

    v = np.asarray(values, float)
    if v.size < 2:
        return float("nan"), float("nan")
    half = stdtrit(v.size - 1, 0.975) * v.std(ddof=1) / np.sqrt(v.size)
    return float(v.mean() - half), float(v.mean() + half)


def _with_overall(per_query: pd.DataFrame) -> pd.DataFrame:
    noise = per_query[per_query["mode"].isin(MODES)]
    return pd.concat([per_query, noise.assign(mode="overall")], ignore_index=True)


def _resample_weights(n: int, n_resamples: int, seed: int = 0) -> np.ndarray:
    """Bootstrap resamples as multinomial counts (n_resamples x n): `weights @ X / n` are the resampled means
    of every column of X at once (the same percentile bootstrap as `stats.bootstrap_ci`, one draw per size)."""
    idx = np.random.default_rng([seed, n]).integers(0, n, size=(n_resamples, n))
    flat = (np.arange(n_resamples)[:, None] * n + idx).ravel()
    return np.bincount(flat, minlength=n_resamples * n).reshape(n_resamples, n).astype(np.float32)


def summary_table(per_query: pd.DataFrame, n_resamples: int = stats.N_RESAMPLES, seed: int = 0) -> pd.DataFrame:
    """Per variant, mode (and `overall` = the four noise modes) and method: each metric's mean, its bootstrap CI
    over query positions (each position's mean over seeds), its t-interval over seeds, and the ceiling."""
    rows, weights = [], {}
    data = _with_overall(per_query)
    one = data[data["method"] == METHODS[0]]  # the ceilings do not depend on the method
    text_ceilings = {k: float(np.mean([text_ceiling_of(s) for _, s in g.groupby("seed_index")]))
                     for k, g in one.groupby(["variant", "mode"], sort=False)}
    for (variant, mode, method), g in data.groupby(["variant", "mode", "method"], sort=False):
        by_pos = g.groupby("position")[[*METRICS, "ceiling"]].mean()
        by_seed = g.groupby("seed_index")[list(METRICS)].mean()
        n = len(by_pos)
        if n not in weights:
            weights[n] = _resample_weights(n, n_resamples, seed)
        boot = weights[n] @ by_pos[list(METRICS)].to_numpy(np.float32) / n
        lo, hi = np.quantile(boot, [0.025, 0.975], axis=0)
        row = {"variant": variant, "mode": mode, "method": method, "n_queries": int(n),
               "n_seeds": int(len(by_seed)), "ceiling": float(by_pos["ceiling"].mean()),
               "text_ceiling": text_ceilings[(variant, mode)]}
        for j, m in enumerate(METRICS):
            lo_s, hi_s = _seed_ci(by_seed[m].to_numpy())
            row.update({m: float(by_pos[m].mean()), f"{m}_lo": float(lo[j]), f"{m}_hi": float(hi[j]),
                        f"{m}_seed_lo": lo_s, f"{m}_seed_hi": hi_s})
        row["share_of_ceiling"] = row["p@1"] / row["ceiling"] if row["ceiling"] else float("nan")
        rows.append(row)
    table = pd.DataFrame(rows)
    rank = {**{m: i for i, m in enumerate((*MODES, "overall", "exact"))}, **{m: i for i, m in enumerate(METHODS)}}
    return table.sort_values(["variant", "mode", "method"], key=lambda c: c.map(rank) if c.name != "variant" else c,
                             kind="stable").reset_index(drop=True)


def text_ceiling_of(rows: pd.DataFrame) -> float:
    """`episodic.text_ceiling` of one seed's rows (a query text -> one ranking)."""
    one = rows.drop_duplicates("query_id")
    best = one.groupby(["text", "target"]).size().groupby(level=0).max()  # `text_ceiling`, vectorised
    return float(best.sum() / len(one))


def paired_tests(per_query: pd.DataFrame, n_resamples: int = stats.N_RESAMPLES) -> pd.DataFrame:
    """P@1 of each memory method minus FAISS per mode (fixed generator), paired over query positions
    (means over seeds), with a permutation p and Holm's adjustment over the modes of one method."""
    rows = []
    data = _with_overall(per_query[per_query["variant"] == "fixed"])
    for method in METHODS[1:]:
        block = []
        for mode in (*MODES, "overall", "exact"):
            g = data[data["mode"] == mode]
            wide = g.pivot_table(index="position", columns="method", values="p@1", aggfunc="mean")
            d = stats.paired_delta_ci(wide[method], wide["faiss"], n_resamples)
            block.append({"method": method, "mode": mode, "delta": d.mean, "lo": d.lo, "hi": d.hi,
                          "p": stats.paired_permutation_test(wide[method], wide["faiss"], n_resamples),
                          "n_queries": int(len(wide))})
        adjusted = stats.adjust([r["p"] for r in block])
        rows += [{**r, "p_holm": float(a)} for r, a in zip(block, adjusted)]
    return pd.DataFrame(rows)


def exact_counts(per_query: pd.DataFrame) -> pd.DataFrame:
    """The sanity check as the reference reports it: events found at rank 1 from their own text, per seed."""
    g = per_query[per_query["mode"] == "exact"].groupby(["variant", "seed_index", "method"], sort=False)
    return g.agg(hits=("p@1", "sum"), events=("p@1", "size"), ceiling=("ceiling", "sum")).reset_index()


__all__ = ["METHODS", "METRICS", "SDMExperiment", "evaluate", "exact_counts", "paired_tests", "summary_table"]
