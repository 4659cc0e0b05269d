"""Checkpoints 01 and 02: embedding mutation and adapter mutation against the static pipeline, over a usage stream,
under the reference's protocol and a held-out one (docs/mutation.md).

For each protocol, seed and arm, `lethe_core.mechanisms.usage_stream.run_stream` drives a mechanism (`embedding_mutation` or
`adapter_mutation`) for `steps` queries and evaluates the frozen state every `eval_every` steps: NDCG@10 of the dense
top-30 reranked by the cross-encoder (`rerank`) and of the dense order (`dense`). The static arm (the encoder's
vectors) does not depend on the schedule, so it is evaluated once per protocol split and compared with every
seed. Protocols: `paper` — the schedule (`hot_cold_schedule`, seeds 42, 43, ...) draws from the evaluation queries
themselves (train = test, as the reference did); `heldout` — the queries split in two (by conversation on LoCoMo, a
seeded split elsewhere), the stream runs on one half and the other is evaluated, both directions, so each query is
evaluated once. The verdict is read at the **final step** (never a peak picked on evaluation data); the whole curve
is reported.

Results: `data/results/mutation-<mechanism>-<dataset>-<reranker>-<hash>/` with config.json, curves.parquet (one row
per protocol, split, seed, arm, step, query and system), final.parquet (the final step only), trace.parquet (the
mechanism's diagnostics per evaluation: tiers, drift, acceptance counts) and summary.json (curves with 95 % CIs,
the final paired comparison with static: CI over queries, CI over queries and seeds, permutation p, Holm-adjusted p).
A finished run with the same config is read back instead of recomputed (`results.store`). The run loop is
`StreamStudy._compute`, shared with `mlp_adapter_study`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from lethe_core.measures import stats
from lethe_core.mechanisms.adapter_mutation import ARMS as ADAPTER_ARMS
from lethe_core.mechanisms.adapter_mutation import AdapterMutation
from lethe_core.datasets.splits import PAPER, heldout_halves
from lethe_core.mechanisms.embedding_mutation import ARMS as EMBEDDING_ARMS
from lethe_core.mechanisms.embedding_mutation import EmbeddingMutation
from lethe_core.inference.pair_cache import identity_of
from lethe_core.mechanisms.usage_stream import K_FETCH, PROTOCOLS, SYSTEMS, StaticMechanism, StreamData, Verdicts, eval_steps, run_stream
from lethe_core.results.store import digest, slug, write_json, write_parquet, write_summary
from lethe_core.experiments.setup import DataStudy, Loaded

MECHANISMS = {"embedding": EMBEDDING_ARMS, "adapter": ADAPTER_ARMS}
PAPER_SEED = 42
CURVE_RESAMPLES = 2000  # bands over steps; the final comparison uses stats.N_RESAMPLES


def make_mechanism(mechanism: str, arm: str, vectors: np.ndarray, seed: int):
    if arm == "static":
        return StaticMechanism(vectors)
    if mechanism == "embedding":
        return EmbeddingMutation(vectors, arm, seed=seed)
    return AdapterMutation(vectors, arm, seed=seed)


def two_level_ci(deltas: np.ndarray, n_resamples: int = CURVE_RESAMPLES, seed: int = 0) -> stats.Interval:
    """95 % percentile CI of the mean of a (seeds x queries) matrix, resampling seeds and queries independently."""
    d = np.asarray(deltas, dtype=np.float64)
    rng = np.random.default_rng(seed)
    s = rng.integers(0, d.shape[0], size=(n_resamples, d.shape[0]))
    q = rng.integers(0, d.shape[1], size=(n_resamples, d.shape[1]))
    means = np.array([d[np.ix_(si, qi)].mean() for si, qi in zip(s, q)])
    lo, hi = np.quantile(means, [0.025, 0.975])
    return stats.Interval(float(d.mean()), float(lo), float(hi))


@dataclass
class StreamStudy(DataStudy):
    """What the usage-stream studies share (`MutationStudy`, `mlp_adapter_study.MLPAdapterStudy`): protocols, the stream's
    length and evaluation steps, seeds and k; their splits, config, run id and run loop (`_compute`). Subclasses have
    the field `arms` and say `prefix()`, `label()`, `make()` (an arm's mechanism) and `describe()` (their summary fields)."""

    unused_data: ClassVar[tuple[str, ...]] = ("calibration",)
    protocols: tuple[str, ...] = PROTOCOLS  # paper (train = test) | heldout
    steps: int = 2000
    eval_every: int = 250
    seeds: int = 3  # seeds 42, 43, ...
    k: int = K_FETCH

    def __post_init__(self):
        super().__post_init__()
        self.protocols = tuple(self.protocols)
        if not self.protocols or any(p not in PROTOCOLS for p in self.protocols):
            raise ValueError(f"protocols must be among {PROTOCOLS}, got {self.protocols!r}")
        if self.steps < 1 or self.eval_every < 1 or self.seeds < 1 or self.k < 10:
            raise ValueError("steps, eval_every and seeds must be >= 1 and k >= 10")

    def splits(self, data: StreamData, protocol: str) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """(split name, training query positions, evaluation query positions) of a protocol."""
        every = np.arange(len(data.dataset.queries))
        if protocol == PAPER:
            return [("all", every, every)]
        a, b = heldout_halves([q.conversation_id for q in data.dataset.queries], seed=PAPER_SEED)
        return [("A->B", a, b), ("B->A", b, a)]

    def config(self, loaded: Loaded) -> dict:
        """What config.json records: the study's fields (progress aside), the seeds, and what identifies the data and reranker."""
        reranker, ds = loaded.reranker, loaded.dataset
        return {**self.flat_config(progress=False), "arms": list(self.arms), "protocols": list(self.protocols),
                **self.config_extra(), "seeds": [PAPER_SEED + s for s in range(self.seeds)], "reranker_resolved": reranker.name,
                "reranker_identity": identity_of(reranker), "dataset_fingerprint": ds.fingerprint, "n_queries": len(ds.queries)}

    def prefix(self) -> str:
        """The run id's first part."""
        raise NotImplementedError

    def label(self) -> str:
        """What the progress bars call the study."""
        raise NotImplementedError

    def make(self, vectors: np.ndarray, arm: str, seed: int):
        """The mechanism of `arm` over the turn vectors."""
        raise NotImplementedError

    def describe(self, summary: dict, run: "StudyRun") -> None:
        """Add the study's own fields to the summary."""
        raise NotImplementedError

    def run_id(self, loaded: Loaded, config: dict | None = None) -> str:
        """`<prefix>-<dataset>-<reranker>-<digest of the config>`."""
        return f"{self.prefix()}-{loaded.dataset.name}-{slug(loaded.reranker.name)}-{digest(config or self.config(loaded))}"

    def _compute(self, loaded: Loaded, out: Path, config: dict) -> dict:
        """For each protocol, split, seed and arm a usage stream; static once per split (its vectors never move)."""
        from tqdm.auto import tqdm

        d, ds, reranker, root = self.data, loaded.dataset, loaded.reranker, loaded.root
        seeds = config["seeds"]
        data = StreamData.load(ds, d.pipeline, root, d.progress)
        verdicts = Verdicts(data, reranker, root / "pair_scores.sqlite", d.second_stage)
        checkpoints = eval_steps(self.steps, self.eval_every)
        frames, traces = [], []
        jobs = [(p, split, tr, ev) for p in self.protocols for split, tr, ev in self.splits(data, p)]
        try:
            for protocol, split, train, evaluate in jobs:
                tag = dict(protocol=protocol, split=split)
                static = run_stream(data, verdicts, StaticMechanism(data.turn_vectors), train, evaluate, 0, 1, PAPER_SEED).frame()
                for seed in seeds:  # static: the same at every step and seed (its vectors never move)
                    frames.append(pd.concat([static.assign(step=s) for s in checkpoints]).assign(seed=seed, arm="static", **tag))
                for seed in tqdm(seeds, desc=f"{self.label()} {protocol} {split}", unit="seed", disable=not d.progress):
                    for arm in self.arms:
                        res = run_stream(data, verdicts, self.make(data.turn_vectors, arm, seed), train, evaluate, self.steps,
                                         self.eval_every, seed, self.k)
                        frames.append(res.frame().assign(seed=seed, arm=arm, **tag))
                        traces.extend({**t, "seed": seed, "arm": arm, **tag} for t in res.trace)
        finally:
            counts = verdicts.counts
            if counts["hits"] or counts["scored"]:
                verdicts.cache.record_build(f"{self.prefix()} {ds.name}", identity_of(reranker), counts["hits"], counts["scored"])
            verdicts.close()
        curves = pd.concat(frames, ignore_index=True)
        final = curves[curves["step"] == self.steps].reset_index(drop=True)
        trace = pd.DataFrame(traces)
        summary = summarise(curves, self.steps, list(self.arms), list(self.protocols))
        self.describe(summary, StudyRun(ds, reranker, data, seeds, checkpoints, counts, out, config, trace))
        write_parquet(out / "curves.parquet", curves)
        write_parquet(out / "final.parquet", final)
        write_parquet(out / "trace.parquet", trace)
        write_json(out / "config.json", config)
        return write_summary(out, summary)


@dataclass
class MutationStudy(StreamStudy):
    """Static vs mutation arms over a usage stream; `run()` writes data/results/mutation-.../ and returns the summary."""

    mechanism: str = "embedding"  # embedding (CK1) | adapter (CK2/CK3)
    arms: tuple[str, ...] | None = None  # default: every arm of the mechanism; static is always the baseline

    def __post_init__(self):
        super().__post_init__()
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"mechanism must be one of {tuple(MECHANISMS)}, got {self.mechanism!r}")
        arms = tuple(self.arms) if self.arms is not None else MECHANISMS[self.mechanism]
        bad = [a for a in arms if a not in MECHANISMS[self.mechanism]]
        if bad or not arms:
            raise ValueError(f"{self.mechanism} arms must be among {MECHANISMS[self.mechanism]}, got {arms!r}")
        self.arms = arms

    def prefix(self) -> str:
        return f"mutation-{self.mechanism}"

    def label(self) -> str:
        return self.mechanism

    def make(self, vectors: np.ndarray, arm: str, seed: int):
        return make_mechanism(self.mechanism, arm, vectors, seed)

    def describe(self, summary: dict, run: "StudyRun") -> None:
        summary.update({"mechanism": self.mechanism, "dataset": run.ds.name, "reranker": run.reranker.name,
                        "reranker_identity": identity_of(run.reranker), "n_queries": len(run.ds.queries),
                        "n_turns": len(run.data.ids), "seeds": run.seeds, "steps": self.steps, "eval_every": self.eval_every,
                        "eval_steps": run.checkpoints, "pairs": run.counts, "results_dir": str(run.out), "config": run.config,
                        "drift": json.loads(run.trace.to_json(orient="records")) if len(run.trace) else []})


@dataclass
class StudyRun:
    """What a usage-stream run computed, for the study's own summary fields (`StreamStudy.describe`)."""

    ds: object
    reranker: object
    data: StreamData
    seeds: list[int]
    checkpoints: list[int]
    counts: dict
    out: Path
    config: dict
    trace: pd.DataFrame


def _tables(curves: pd.DataFrame) -> dict:
    """(protocol, system, arm, step) -> (seeds x queries) NDCG@10, queries in a fixed order."""
    return {key: g.pivot(index="seed", columns="query_id", values="ndcg@10").sort_index(axis=1)
            for key, g in curves.groupby(["protocol", "system", "arm", "step"], sort=False)}


def summarise(curves: pd.DataFrame, final_step: int, arms: list[str], protocols: list[str], seed: int = 0) -> dict:
    """Curves (mean over seeds and queries, 95 % CI over queries of the seed-mean) and the final-step comparison of
    every arm with static: paired Δ with a CI over queries, a CI over queries and seeds, permutation p, Holm p."""
    curve_rows, final_rows = [], []
    steps = sorted(curves["step"].unique())
    tables = _tables(curves)

    def _per_query(protocol, system, arm, step):
        return tables[(protocol, system, arm, step)]

    for protocol in protocols:
        for system in SYSTEMS:
            base_at = {s: _per_query(protocol, system, "static", s) for s in (steps if system == "rerank" else [final_step])}
            for arm in ["static", *arms]:
                for s in steps:
                    m = _per_query(protocol, system, arm, s)
                    ci = stats.bootstrap_ci(m.mean(axis=0), CURVE_RESAMPLES, seed)
                    row = {"protocol": protocol, "system": system, "arm": arm, "step": int(s), "ndcg@10": ci.mean, "lo": ci.lo, "hi": ci.hi}
                    if system == "rerank" and arm != "static":
                        d = stats.paired_delta_ci(m.mean(axis=0), base_at[s].mean(axis=0), CURVE_RESAMPLES, seed)
                        row.update(delta=d.mean, delta_lo=d.lo, delta_hi=d.hi)
                    curve_rows.append(row)
                if arm == "static":
                    continue
                t, b = _per_query(protocol, system, arm, final_step), _per_query(protocol, system, "static", final_step)
                tq, bq = t.mean(axis=0).to_numpy(), b.mean(axis=0).to_numpy()
                d = stats.paired_delta_ci(tq, bq, seed=seed)
                d2 = two_level_ci(t.to_numpy() - b.to_numpy(), seed=seed)
                per_seed = (t.mean(axis=1) - b.mean(axis=1)).tolist()
                final_rows.append({"protocol": protocol, "system": system, "arm": arm, "static": float(bq.mean()), "ndcg@10": float(tq.mean()),
                                   "delta": d.mean, "ci": [d.lo, d.hi], "ci_seeds_queries": [d2.lo, d2.hi],
                                   "relative": d.mean / bq.mean() if bq.mean() else float("nan"),
                                   "p": stats.paired_permutation_test(tq, bq, seed=seed), "per_seed_delta": per_seed,
                                   "n_queries": int(len(tq)), "n_seeds": int(len(t))})
    rerank = [r for r in final_rows if r["system"] == "rerank"]
    for r, p in zip(rerank, stats.adjust([r["p"] for r in rerank])):
        r["p_holm"] = float(p)
    return {"curves": curve_rows, "final": final_rows}


# --- views for the notebooks (tables only; no computation beyond reshaping)
def curve_table(summary: dict, system: str = "rerank") -> pd.DataFrame:
    """NDCG@10 over steps per protocol and arm (mean, 95 % CI over queries of the seed-mean)."""
    c = pd.DataFrame(summary["curves"])
    return c[c["system"] == system].reset_index(drop=True)


def final_table(summary: dict) -> pd.DataFrame:
    """The final-step comparison with static, one row per protocol, system and arm."""
    f = pd.DataFrame(summary["final"])
    f[["lo", "hi"]] = pd.DataFrame(f["ci"].tolist(), index=f.index)
    f[["lo_seeds", "hi_seeds"]] = pd.DataFrame(f["ci_seeds_queries"].tolist(), index=f.index)
    return f.drop(columns=["ci", "ci_seeds_queries"])


def drift_table(summary: dict) -> pd.DataFrame:
    """The mechanisms' diagnostics per protocol, arm and step, averaged over seeds and held-out directions, with the
    spread over seeds (min / max) of the drift measures."""
    d = pd.DataFrame(summary["drift"])
    if d.empty:
        return d
    num = [c for c in d.columns if c not in ("protocol", "split", "arm", "seed", "step") and pd.api.types.is_numeric_dtype(d[c])]
    g = d.groupby(["protocol", "arm", "step"], sort=False)
    out = g[num].mean()
    for col in ("anchor_cos", "nn_overlap"):
        if col in d:
            out[f"{col}_min"], out[f"{col}_max"] = g[col].min(), g[col].max()
    return out.reset_index()


STEP_AXIS = "usage-stream step (queries issued)"


def _labelled(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(label=frame["arm"] + " / " + frame["protocol"])


def curve_figures(summary: dict) -> list:
    """Per protocol: reranked NDCG@10 of every arm over the stream (95 % CI bands); then the paired Δ vs static of
    every arm and protocol, and the dense order alone."""
    from lethe_core.util import figures

    name = summary["dataset"]
    curves = curve_table(summary, "rerank")
    out = [figures.line_ci(curves[curves["protocol"] == p], "step", "ndcg@10", "lo", "hi",
                           f"{name}, {p} protocol: dense top-30 + cross-encoder over the usage stream", STEP_AXIS,
                           "NDCG@10 (mean, 95 % CI)", color="arm") for p in summary["config"]["protocols"]]
    out.append(figures.line_ci(_labelled(curves[curves["arm"] != "static"]), "step", "delta", "delta_lo", "delta_hi",
                               f"{name}: change in NDCG@10 against static (paired)", STEP_AXIS,
                               "ΔNDCG@10 vs static (95 % CI)", color="label"))
    out.append(figures.line_ci(_labelled(curve_table(summary, "dense")), "step", "ndcg@10", "lo", "hi",
                               f"{name}: dense order alone (no reranker) over the usage stream", STEP_AXIS,
                               "NDCG@10 of the dense top-10 (mean, 95 % CI)", color="label"))
    return out


def final_figure(summary: dict):
    """Bars of the final-step Δ vs static (reranked) per arm and protocol, 95 % CI over queries."""
    from lethe_core.util import figures

    f = final_table(summary)
    return figures.bar_ci(_labelled(f[f["system"] == "rerank"]), "label", "delta", "lo", "hi",
                          f"{summary['dataset']}: final-step change in NDCG@10 against static (reranked)", "arm / protocol",
                          "ΔNDCG@10 at the final step (95 % CI over queries)")


def drift_figures(summary: dict) -> list:
    """Anchor cosine and neighbour overlap of the moved turns over the stream (mean, min–max over seeds)."""
    from lethe_core.util import figures

    d = drift_table(summary)
    if d.empty:
        return []
    d = _labelled(d)
    return [figures.line_ci(d.dropna(subset=[col]), "step", col, f"{col}_min", f"{col}_max",
                            f"{summary['dataset']}: drift of the moved vectors ({col})", STEP_AXIS,
                            f"{what} (mean, min–max over seeds)", color="label")
            for col, what in (("anchor_cos", "mean cosine of moved turns to their original vector"),
                              ("nn_overlap", "share of top-10 neighbours kept (moved turns)"))]
