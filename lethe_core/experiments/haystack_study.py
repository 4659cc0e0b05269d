"""The haystack size curve (`make haystack`): the systems table and RIF at growing `locomo-haystack` sizes.

Does RIF's gain depend on corpus size? Every size runs the same pipeline, reranker and arms; only the
filler grows (a smaller haystack is a prefix of a larger one, docs/haystack.md). Each stage reads the
pool, pair-score and embedding caches, and a finished size is stored in `sizes/<dataset>.json`, so a
killed study resumes where it stopped. Several seeds are read as every table reads them
(`rif.SEED_CONVENTION`): the gains are the RIF summaries' (each query's NDCG@10 averaged over the seeds, CIs
over queries); the hot / cold / unseen buckets, which follow each seed's burn-in stream, pool the (query, seed)
rows over the seeds. Definitions (saturation, buckets, verdicts): docs/haystack_study.md.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from lethe_core.measures import stats
from lethe_core.datasets import load_dataset
from lethe_core.datasets.haystack import GRANULARITIES, HAYSTACK_NAME, duplicate_report, duplicate_share, is_filler
from lethe_core.datasets.splits import PAPER
from lethe_core.util.figures import static_export_problem, style, write_static, write_svgs
from lethe_core.util.paths import REPO_ROOT
from lethe_core.pools.cache import PoolBuilder
from lethe_core.results.runs import load_run
from lethe_core.results.store import atomic_write, digest, run_dir, write_json, write_summary, write_text
from lethe_core.retrieval.pipeline import PipelineConfig
from lethe_core.rerankers import resolve_reranker
from lethe_core.rif.protocols import PROTOCOLS
from lethe_core.retrieval.second_stage import DEFAULT_MODE
from lethe_core.experiments.behaviour_study import ALL, behaviour_study
from lethe_core.experiments.rif import SEED_CONVENTION, RIFExperiment
from lethe_core.experiments.setup import DataSpec
from lethe_core.experiments.systems import SystemsExperiment

GAIN_ARMS = ("clustered30-gap", "global-gap", "control")  # the arms the size curve follows, each against the baseline
SATURATION_ARMS = ("global-gap", "clustered30-gap")
COLOURS = {"clustered30-gap": "#1f77b4", "global-gap": "#d62728", "control": "#2ca02c",  # one colour per arm in every chart
           "hot": "#ff7f0e", "cold": "#17becf", "unseen": "#7f7f7f"}
BUCKETS = ("hot", "cold", "unseen")  # paper protocol only: the other protocols' rows carry "heldout" / "stream"
SYSTEM_ROWS = ("rrf", "full", "control")
PAPER_TURNS = 199_509  # LongMemEval S, the corpus of the paper's claim
ALPHA = 0.05
STUDY_DIR = "haystack_study"
FIGURES_DIR = REPO_ROOT / "docs" / "figures" / "haystack"  # the charts' static copies that RESULTS.md shows (`--publish`)
FIG_SIZE = dict(width=1000, height=520)  # static copies: wide enough for the titles, which name the reranker
SECTION_TITLE = "## LoCoMo in a conversation haystack: the size curve"


@dataclass
class HaystackStudyConfig:
    """What the size curve runs; `run()` writes results/haystack_study/ (docs/haystack_study.md)."""

    sizes: tuple[int, ...] = (25_000, 50_000, 100_000)  # haystack turns, LoCoMo's included, between LoCoMo and `full`
    locomo: bool = True  # plain LoCoMo as the first point of the curve (its pools are the ones `locomo` runs use)
    full: bool = True  # the whole haystack as the last point
    granularities: tuple[str, ...] = ("turn",)  # add "message" for `locomo-haystack-msg[:N]`
    protocols: tuple[str, ...] = PROTOCOLS
    seeds: int = 5
    ks: tuple[int, ...] = (10, 30, 50, 100)  # RIF cluster counts (every arm of each); must hold 30 for clustered30-gap
    burn_in: int | None = None  # RIFExperiment's default (5,000)
    reranker: str = "auto"
    backend: str = "auto"
    second_stage: str = DEFAULT_MODE
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    path: str | None = None  # LoCoMo's file
    limit_queries: int | None = None  # quick runs only
    ray: bool = False  # pool builds (embedding, pair scoring) on Ray workers (docs/distributed.md)
    workers: int = 2
    ray_address: str | None = None
    progress: bool = True

    def __post_init__(self):
        self.sizes, self.granularities, self.protocols = tuple(self.sizes), tuple(self.granularities), tuple(self.protocols)
        self.ks = tuple(self.ks)
        if 30 not in self.ks:
            raise ValueError(f"ks must hold 30 (the curve follows clustered30-gap), got {list(self.ks)}")
        bad = [p for p in self.protocols if p not in PROTOCOLS]
        if bad or not self.protocols:
            raise ValueError(f"protocols must be a non-empty subset of {PROTOCOLS}, got {list(self.protocols)}")
        bad = [g for g in self.granularities if g not in GRANULARITIES]
        if bad or not self.granularities:
            raise ValueError(f"granularities must be a non-empty subset of {GRANULARITIES}, got {list(self.granularities)}")
        if self.seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {self.seeds}")
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")
        if self.ray_address and not self.ray:
            raise ValueError("ray_address needs ray=True")
        if any(b <= a for a, b in zip(self.sizes, self.sizes[1:])):
            raise ValueError(f"sizes must be strictly increasing, got {list(self.sizes)}")
        if not (self.sizes or self.locomo or self.full):
            raise ValueError("the study has no size: give sizes, or locomo=True / full=True")

    def datasets(self) -> list[str]:
        """The dataset names of the curve, smallest first (plain LoCoMo once, then each granularity's haystacks)."""
        names = ["locomo"] if self.locomo else []
        for g in self.granularities:
            base = HAYSTACK_NAME + ("-msg" if g == "message" else "")
            names += [f"{base}:{n}" for n in self.sizes] + ([base] if self.full else [])
        return names

    def validate(self) -> dict[str, int]:
        """Sizes against LoCoMo's and each full haystack's turn count (loads them: seconds, no model); returns those counts."""
        locomo = _turns("locomo", self.path)
        limits = {"locomo": locomo}
        if self.sizes and self.sizes[0] <= locomo:
            raise ValueError(f"haystack sizes must exceed LoCoMo's {locomo:,} turns, got {self.sizes[0]:,}")
        for g in self.granularities:
            name = HAYSTACK_NAME + ("-msg" if g == "message" else "")
            limits[name] = _turns(name, self.path)
            if self.sizes and self.sizes[-1] >= limits[name]:
                raise ValueError(f"size {self.sizes[-1]:,} is not below the full {name} ({limits[name]:,} turns); "
                                 "use full=True for the whole haystack")
        return limits

    def key(self) -> str:
        """What a stored size depends on (not sizes, Ray or progress): a stored size with another key is recomputed."""
        keep = {k: v for k, v in asdict(self).items() if k not in ("sizes", "locomo", "full", "granularities", "ray", "workers",
                                                                    "ray_address", "progress")}
        return digest(keep, 12)

    def run(self, results_root: Path | None = None) -> dict:
        return HaystackStudy(self, run_dir(STUDY_DIR, results_root)).run()


@lru_cache(maxsize=None)
def _turns(name: str, path: str | None) -> int:
    """A dataset's turn count; kept per process (the full haystack takes seconds to load, and its size is fixed)."""
    return len(load_dataset(name, path).require_corpus())


class HaystackStudy:
    """Runs the stages of one config into `out`; `stages` records what each size computed or reused."""

    def __init__(self, config: HaystackStudyConfig, out: Path):
        self.config, self.out = config, out
        self.stages: list[dict] = []

    def log(self, text: str) -> None:
        if self.config.progress:
            print(f"[haystack study] {text}", file=sys.stderr, flush=True)

    def run(self) -> dict:
        cfg = self.config
        limits = cfg.validate()
        names = cfg.datasets()
        self.log(f"{len(names)} sizes x {len(cfg.protocols)} protocols x {cfg.seeds} seeds; key {cfg.key()}; out {self.out}")
        (self.out / "sizes").mkdir(parents=True, exist_ok=True)
        sizes = [self.size(i, name, len(names)) for i, name in enumerate(names)]
        largest = max(sizes, key=lambda s: s["turns"])
        summary = {"config": {**asdict(cfg), "pipeline": asdict(cfg.pipeline)}, "key": cfg.key(), "limits": limits,
                   "reranker": largest["reranker"], "reranker_identity": largest["reranker_identity"],
                   "protocols": list(cfg.protocols), "seeds": largest["seeds"], "sizes": sizes,
                   "behaviour": self.behaviour(largest), "stages": self.stages, "results_dir": str(self.out)}
        summary["charts"] = write_charts(summary, self.out)
        write_text(self.out / "size_curve.md", size_curve_table(summary))
        write_summary(self.out, summary)
        self.log(f"done: {self.out / 'summary.json'}")
        return summary

    def size(self, i: int, name: str, total: int) -> dict:
        cfg, where = self.config, f"{i + 1}/{total} {name}"
        stored = self.out / "sizes" / f"{name.replace(':', '-')}.json"
        if stored.exists():
            record = json.loads(stored.read_text())
            if record.get("key") == cfg.key() and record.get("seed_convention") == SEED_CONVENTION:  # else first-seed numbers
                self.log(f"{where}: stored, not recomputed")
                self.stages.append({"dataset": name, "stage": "size", "status": "stored"})
                return record
        runs = self.out / "runs"
        seconds: dict[str, float] = {}
        t = time.perf_counter()
        ds = load_dataset(name, cfg.path, None, cfg.limit_queries)
        corpus = ds.require_corpus()
        seconds["load"] = time.perf_counter() - t
        self.log(f"{where}: {len(corpus):,} turns, {len(ds.queries):,} queries; pools")
        t = time.perf_counter()
        builder = PoolBuilder(ds, resolve_reranker(cfg.reranker, backend=cfg.backend), cfg.pipeline, progress=cfg.progress)
        if cfg.ray:
            from lethe_core.pools.distributed import RayConfig, build_pools_on_ray

            pools = build_pools_on_ray(builder, RayConfig(workers=cfg.workers, address=cfg.ray_address), progress=cfg.progress)
        else:
            pools = builder.build()
        seconds["pools"] = time.perf_counter() - t
        # `scored` / `hits` exist only when some query had no stored pool; with Ray the pairs were scored before, so read as hits
        self.stages.append({"dataset": name, "stage": "pools", "status": "built" if hasattr(builder, "scored") else "cached",
                            "pairs_scored": int(getattr(builder, "scored", 0)), "pairs_from_cache": int(getattr(builder, "hits", 0))})
        self.log(f"{where}: systems")
        t = time.perf_counter()
        data = DataSpec(dataset=name, path=cfg.path, reranker=cfg.reranker, backend=cfg.backend, limit_queries=cfg.limit_queries,
                        pipeline=cfg.pipeline, second_stage=cfg.second_stage, progress=cfg.progress)
        systems = SystemsExperiment(data).run(runs)
        seconds["systems"] = time.perf_counter() - t
        record = {"key": cfg.key(), "seed_convention": SEED_CONVENTION, "dataset": ds.name, "name": name, "turns": len(corpus),
                  "filler_turns": sum(is_filler(turn.id) for turn in corpus.turns), "n_queries": len(ds.queries),
                  "reranker": systems["reranker"], "reranker_identity": systems["reranker_identity"],
                  "systems": {r["name"]: r for r in systems["systems"] if r["name"] in SYSTEM_ROWS},
                  "systems_dir": systems["results_dir"], "protocols": {}}
        for protocol in cfg.protocols:
            self.log(f"{where}: rif {protocol}")
            t = time.perf_counter()
            rif = RIFExperiment(data, protocol=protocol, seeds=cfg.seeds, ks=cfg.ks, burn_in=cfg.burn_in, map=False).run(runs)
            seconds[f"rif_{protocol}"] = time.perf_counter() - t
            record["seeds"] = rif["seeds"]
            record["protocols"][protocol] = protocol_record(rif, len(corpus))
        top30 = _rrf_top(pools.packed([q.id for q in ds.queries]), corpus.ids, cfg.pipeline.pool_size)
        dup = duplicate_report(corpus)
        record["duplicates"] = {**{k: v for k, v in dup.as_dict().items() if k != "most_common"},
                                "top30": duplicate_share(top30, dup.duplicate_ids, k=cfg.pipeline.pool_size)}
        record["seconds"] = {k: round(v, 2) for k, v in seconds.items()}
        self.stages.append({"dataset": name, "stage": "size", "status": "computed"})
        write_json(stored, record)
        return record

    def behaviour(self, largest: dict) -> dict:
        """The behaviour decomposition of clustered30-gap at the largest size, per protocol: the `all` rows in the summary,
        every row (per question type) in behaviour_<dataset>_<protocol>.csv."""
        out = {"dataset": largest["dataset"], "arm": GAIN_ARMS[0], "protocols": {}}
        for protocol, rec in largest["protocols"].items():
            tables = behaviour_study(load_run(rec["results_dir"]), GAIN_ARMS[0])
            csv = self.out / f"behaviour_{largest['dataset']}_{protocol}.csv"
            atomic_write(csv, lambda p: tables["deltas"].to_csv(p, index=False))
            rows = tables["deltas"][tables["deltas"]["group"] == ALL].drop(columns="group")
            out["protocols"][protocol] = {"csv": csv.name, "all": json.loads(rows.to_json(orient="records"))}
        return out


def _rrf_top(packed, ids: list[str], k: int) -> list[list[str]]:
    """Each query's first-stage (RRF) top-k as turn ids: the list the reranker reorders in `full` (pool rows are in RRF order)."""
    return [[ids[j] for j in packed.doc_idx[packed.rows(i)][:k]] for i in range(len(packed.query_ids))]


def protocol_record(rif: dict, turns: int) -> dict:
    """One RIF summary reduced to the curve: gains of GAIN_ARMS vs baseline, saturation, bucket gains (paper protocol)."""
    arms = {a["name"]: a for a in rif["arms"]}
    gains = {}
    for name in GAIN_ARMS:
        a = arms[name]
        gains[name] = {"delta": a["delta_ndcg"]["mean"], "ci": a["delta_ndcg"]["ci"], "p": a["p"], "p_holm": a["p_holm"],
                       "seed_mean": a["delta_ndcg"]["seed_mean"], "seed_sd": a["delta_ndcg"]["seed_sd"],
                       "vs_control": a.get("delta_vs_control")}
    saturation, seeds = saturation_of(rif, turns)
    record = {"results_dir": rif["results_dir"], "run_id": rif["run_id"], "baseline_ndcg": arms["baseline"]["ndcg@10"]["mean"],
              "gains": gains, "saturation": saturation, "saturation_seeds": seeds}
    if rif["protocol"] == PAPER:
        record["buckets"] = bucket_gains(load_run(rif["results_dir"]).per_query, rif["seeds"][0])
    return record


def saturation_of(rif: dict, turns: int) -> tuple[dict[str, float], list[int]]:
    """Per SATURATION_ARM: distinct suppressed turns / corpus turns after the replay, averaged over a run's splits
    (held-out: A->B and B->A) and over the seeds the summary reports: every seed from `suppressed_by_seed`
    where the RIF summary has it, else the first seed's `suppressed_entries`. Also returns those seeds."""
    by_seed = rif.get("suppressed_by_seed") or {str(rif["seeds"][0]): {a["name"]: a["suppressed_entries"] for a in rif["arms"]}}
    out = {}
    for name in SATURATION_ARMS:
        per_seed = [np.mean([s["docs"] for s in arms[name].values()]) if arms.get(name) else 0.0 for arms in by_seed.values()]
        out[name] = float(np.mean(per_seed) / turns)
    return out, [int(s) for s in by_seed]


def bucket_gains(per_query: pd.DataFrame, seed: int, arm: str = GAIN_ARMS[0]) -> dict:
    """Paired NDCG@10 gain of `arm` over the baseline per hot / cold / unseen bucket, with 95 % CI (bootstrap `seed`).

    A query's bucket follows its seed's burn-in stream, so it has no one bucket to average its seeds in: the
    (query, seed) rows are pooled over the seeds (`n` rows of `queries` queries; the mean `rif.summarise` reports),
    and the CI resamples queries with their rows in the bucket, one query's seeds not being independent draws."""
    key = ["seed", "query_id", "split"]
    mine = per_query[per_query["arm"] == arm].set_index(key)
    base = per_query[per_query["arm"] == "baseline"].set_index(key)["ndcg@10"].reindex(mine.index)
    queries = mine.index.get_level_values("query_id").astype(str).to_numpy()
    out = {}
    for b in BUCKETS:
        m = (mine["bucket"] == b).to_numpy()
        if m.any():
            d = stats.hierarchical_paired_ci(mine["ndcg@10"].to_numpy()[m], base.to_numpy()[m], queries[m], seed=seed)
            out[b] = {"n": int(m.sum()), "queries": len(set(queries[m])), "delta": d.mean, "ci": [d.lo, d.hi]}
    return out


def _fmt(x: float | None, signed: bool = True) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:+.4f}" if signed else f"{x:.4f}"


def _gain(g: dict) -> str:
    p = "–" if g["p_holm"] is None else f"{g['p_holm']:.3f}"
    return f"{_fmt(g['delta'])} [{_fmt(g['ci'][0])}, {_fmt(g['ci'][1])}] p={p}"


def saturation_protocol(summary: dict) -> str:
    """The protocol saturation is read from: paper (the whole query set trains suppression) when it ran."""
    return PAPER if PAPER in summary["protocols"] else summary["protocols"][0]


def size_curve_table(summary: dict) -> str:
    """The RESULTS.md table: one row per size; gains are NDCG@10 deltas vs baseline on each query's seed mean
    (`SEED_CONVENTION`), 95 % CI over queries, Holm p."""
    protocols, sat = summary["protocols"], saturation_protocol(summary)
    head = ["dataset", "turns", *[f"{s} NDCG@10" for s in SYSTEM_ROWS],
            *[f"{arm} Δ ({p})" for p in protocols for arm in GAIN_ARMS],
            *[f"saturation {arm} ({sat})" for arm in SATURATION_ARMS], "duplicate share of top-30"]
    lines = [f"Reranker: `{summary['reranker']}`; seeds {summary['seeds']}; gains: NDCG@10 arm − baseline, {SEED_CONVENTION} "
             "(each query's NDCG@10 averaged over the seeds), 95 % paired bootstrap CI over queries, Holm p over the run's arms.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in summary["sizes"]:
        sysrow = [f"{s['systems'][n]['ndcg@10']:.4f} [{s['systems'][n]['ndcg@10_ci'][0]:.4f}, {s['systems'][n]['ndcg@10_ci'][1]:.4f}]"
                  for n in SYSTEM_ROWS]
        gains = [_gain(s["protocols"][p]["gains"][arm]) for p in protocols for arm in GAIN_ARMS]
        sats = [f"{s['protocols'][sat]['saturation'][arm]:.1%}" for arm in SATURATION_ARMS]
        lines.append("| " + " | ".join([s["dataset"], f"{s['turns']:,}", *sysrow, *gains, *sats,
                                         f"{s['duplicates']['top30']['share']:.2%}"]) + " |")
    return "\n".join(lines) + "\n"


def behaviour_table(summary: dict) -> str:
    """The behaviour decomposition of clustered30-gap at the largest size: one row per behaviour, one column per protocol
    (rate of the arm − rate of the baseline over all queries, each query's seed mean, 95 % paired CI); behaviours no
    query has are left out."""
    b = summary["behaviour"]
    protocols = list(b["protocols"])
    rows = {r["metric"]: {} for p in protocols for r in b["protocols"][p]["all"] if r["n"]}
    for p in protocols:
        for r in b["protocols"][p]["all"]:
            if r["n"]:
                rows[r["metric"]][p] = f"{_fmt(r['delta'])} [{_fmt(r['lo'])}, {_fmt(r['hi'])}]"
    lines = [f"Behaviour decomposition of {b['arm']} at `{b['dataset']}` (arm − baseline over all "
             f"{max(r['n'] for p in protocols for r in b['protocols'][p]['all']):,} queries, {SEED_CONVENTION}, 95 % paired CI; "
             "definitions: docs/method.md):", "", "| behaviour | " + " | ".join(protocols) + " |",
             "|---" * (len(protocols) + 1) + "|"]
    lines += [f"| {m} | " + " | ".join(v.get(p, "–") for p in protocols) + " |" for m, v in rows.items()]
    return "\n".join(lines) + "\n"


def _error_bars(gains: list[dict]) -> dict:
    return dict(type="data", symmetric=False, array=[g["ci"][1] - g["delta"] for g in gains],
                arrayminus=[g["delta"] - g["ci"][0] for g in gains])


def curves(sizes: list[dict]) -> dict[str, list[dict]]:
    """The sizes as one line per granularity ("turn", "message"), smallest first; plain LoCoMo (no filler) starts each."""
    is_haystack = [s["dataset"].startswith(HAYSTACK_NAME) for s in sizes]
    base = [s for s, h in zip(sizes, is_haystack) if not h]
    out = {}
    for label, msg in (("turn", False), ("message", True)):
        pts = [s for s, h in zip(sizes, is_haystack) if h and s["dataset"].startswith(HAYSTACK_NAME + "-msg") == msg]
        if pts:
            out[label] = sorted(base + pts, key=lambda s: s["turns"])
    return out or {"turn": sorted(base, key=lambda s: s["turns"])}


def figures(summary: dict) -> dict[str, go.Figure]:
    """Gains vs size per protocol, saturation vs size, bucket gains vs size (paper protocol), all with x = corpus turns;
    one line per arm and granularity (message haystacks dashed)."""
    lines, rr = curves(summary["sizes"]), summary["reranker"]

    def add(fig, key, label, pts, values, bars=None):
        fig.add_scatter(x=[s["turns"] for s in pts], y=values, name=key if len(lines) == 1 else f"{key}, {label}s",
                        mode="lines+markers", error_y=_error_bars(bars) if bars else None, line_color=COLOURS[key],
                        line_dash="dash" if label == "message" else "solid")

    out = {}
    for p in summary["protocols"]:
        fig = go.Figure()
        for arm in GAIN_ARMS:
            for label, pts in lines.items():
                g = [s["protocols"][p]["gains"][arm] for s in pts]
                add(fig, arm, label, pts, [v["delta"] for v in g], g)
        fig.add_hline(y=0, line_dash="dot")
        fig.update_xaxes(type="log")
        out[f"gains_{p}"] = style(fig, f"NDCG@10 gain vs baseline by corpus size, {p} protocol ({SEED_CONVENTION}, 95 % CI; reranker {rr})",
                                  "corpus turns (log)", "Δ NDCG@10")
    sat = saturation_protocol(summary)
    fig = go.Figure()
    for arm in SATURATION_ARMS:
        for label, pts in lines.items():
            add(fig, arm, label, pts, [s["protocols"][sat]["saturation"][arm] for s in pts])
    fig.update_xaxes(type="log")
    fig.update_yaxes(tickformat=".0%", range=[0, 1])
    seeds = summary["sizes"][0]["protocols"][sat]["saturation_seeds"]
    out["saturation"] = style(fig, f"Share of the corpus under suppression, {sat} protocol, seeds {seeds} (reranker {rr})",
                              "corpus turns (log)", "suppressed turns / corpus turns")
    if all("buckets" in s["protocols"].get(PAPER, {}) for s in summary["sizes"]):
        fig = go.Figure()
        for b in BUCKETS:
            for label, pts in lines.items():
                pts = [s for s in pts if b in s["protocols"][PAPER]["buckets"]]
                if pts:
                    g = [s["protocols"][PAPER]["buckets"][b] for s in pts]
                    add(fig, b, label, pts, [v["delta"] for v in g], g)
        fig.add_hline(y=0, line_dash="dot")
        fig.update_xaxes(type="log")
        out["buckets"] = style(fig, f"{GAIN_ARMS[0]} gain by query bucket, paper protocol (query-seed rows pooled, 95 % CI; reranker {rr})",
                               "corpus turns (log)", "Δ NDCG@10")
    return out


def write_charts(summary: dict, out: Path) -> dict[str, list[str]]:
    """HTML for every figure (plotly.js once beside them, so they open offline); PNG too where kaleido finds a Chromium."""
    png = static_export_problem() is None
    # Written here, atomically and every time: plotly writes it only when absent and in place, so a kill mid-write
    # would leave a truncated bundle for good (and an upgraded plotly would keep the old one).
    write_text(out / "plotly.min.js", get_plotlyjs())
    charts = figures(summary)
    for name, fig in charts.items():
        atomic_write(out / f"{name}.html", lambda p: fig.write_html(p, include_plotlyjs="directory"))
    if png:
        write_static({out / f"{name}.png": fig for name, fig in charts.items()}, "png", **FIG_SIZE)
    return {name: [f"{name}.html", *([f"{name}.png"] if png else [])] for name in charts}


def _significant(g: dict) -> bool:
    return g["p_holm"] is not None and g["p_holm"] < ALPHA and g["ci"][0] > 0


def size_trend(points: list[tuple[int, float, list[float]]]) -> stats.Trend | None:
    """The trend test of an estimate across corpus sizes: weighted slope per tenfold of turns (`stats.weighted_trend`,
    every size weighted by its CI), or None with fewer than two sizes."""
    if len(points) < 2:
        return None
    turns, est, ci = zip(*points)
    return stats.weighted_trend(np.log10(turns), est, [c[0] for c in ci], [c[1] for c in ci])


def _trend_words(t: stats.Trend) -> str:
    side = "rises" if t.lo > 0 else "falls" if t.hi < 0 else "shows no trend"
    return f"{side} with size ({_fmt(t.slope)} per tenfold of turns, 95 % CI [{_fmt(t.lo)}, {_fmt(t.hi)}], p {t.p:.3f})"


def verdicts(summary: dict) -> list[str]:
    """Sentences computed from the numbers: the paper's claim at the largest size, and the saturation explanation."""
    sizes = sorted(summary["sizes"], key=lambda s: s["turns"])
    small, large = sizes[0], sizes[-1]
    arm = GAIN_ARMS[0]
    out = []
    share = large["turns"] / PAPER_TURNS
    for p in summary["protocols"]:
        g = large["protocols"][p]["gains"][arm]
        c = large["protocols"][p]["gains"]["control"]
        holds = _significant(g)
        beats = g["vs_control"] is not None and g["vs_control"]["ci"][0] > 0
        out.append(f"At {large['turns']:,} turns ({share:.0%} of the paper's {PAPER_TURNS:,}), {p} protocol: {arm} changes NDCG@10 by "
                   f"{_gain(g)} against the baseline, so the paper's claim {'holds' if holds else 'does not hold'} here "
                   f"(rule: Holm p < {ALPHA} and CI above 0); the control arm's change is {_gain(c)}, and {arm} "
                   f"{'beats' if beats else 'does not beat'} control (CI of the difference "
                   f"{'above 0' if beats else 'not above 0'}).")
    sat = saturation_protocol(summary)
    s0, s1 = small["protocols"][sat]["saturation"]["global-gap"], large["protocols"][sat]["saturation"]["global-gap"]
    gain = size_trend([(z["turns"], z["protocols"][sat]["gains"][arm]["delta"], z["protocols"][sat]["gains"][arm]["ci"]) for z in sizes])
    head = f"Saturation ({sat} protocol, global-gap) goes from {s0:.1%} of {small['turns']:,} turns to {s1:.1%} of {large['turns']:,}."
    if gain is None:
        tail = "One size cannot test the saturation explanation."
    elif s1 >= s0:
        tail = (f"Saturation did not fall with size, so this curve cannot test the saturation explanation (the {arm} gain "
                f"{_trend_words(gain)}).")
    elif gain.lo > 0:
        tail = f"The {arm} gain {_trend_words(gain)}: less saturation came with a larger gain, consistent with the paper's saturation explanation."
    else:
        tail = f"The {arm} gain {_trend_words(gain)}: saturation fell but the gain did not rise, so the curve does not support the saturation explanation."
    control = [(z["turns"], z["protocols"][sat]["gains"][arm]["vs_control"]) for z in sizes]
    if gain is not None and all(c is not None for _, c in control):
        beyond = size_trend([(t, c["mean"], c["ci"]) for t, c in control])
        tail += (f" Beside it, the control arm (the whole union reranked, nothing learned): {arm} − control "
                 f"{_trend_words(beyond)}, so {'part of the trend belongs to suppression itself' if beyond.lo > 0 else 'no trend is left once the deeper union is accounted for'}.")
    out.append(f"{head} {tail}")
    return out


def export_figures(summary: dict, out: Path = FIGURES_DIR) -> dict[str, Path]:
    """Static copies of the charts (GitHub shows SVG inline), drawn by kaleido with the Chromium of `make browser`."""
    charts = figures(summary)
    for fig in charts.values():
        fig.update_layout(height=FIG_SIZE["height"])
    write_svgs({out / f"{name}.svg": fig for name, fig in charts.items()}, width=FIG_SIZE["width"])
    return {name: out / f"{name}.svg" for name in charts}


def results_section(summary: dict, charts_base: str = "data/results/haystack_study", images: dict[str, str] | None = None) -> str:
    """The RESULTS.md section: the size-curve table, the charts (links to the interactive HTML; `images`, name -> path
    relative to RESULTS.md, are shown inline), and the computed verdicts."""
    links = ", ".join(f"[{name}]({charts_base}/{files[0]})" for name, files in summary["charts"].items())
    shown = [f"![{name}]({path})" for name, path in (images or {}).items()]
    return "\n".join([SECTION_TITLE, "", size_curve_table(summary), *[x for img in shown for x in (img, "")],
                      f"Interactive charts (after `make haystack`): {links}.", "",
                      *([behaviour_table(summary)] if "behaviour" in summary else []), *[f"- {v}" for v in verdicts(summary)], ""])


def splice_section(doc: str, section: str, before: str = "## Changes since") -> str:
    """`doc` with its size-curve section replaced by `section` (up to the next `## ` heading), or inserted before the
    heading starting with `before` (at the end when there is none)."""
    lines = doc.split("\n")
    if SECTION_TITLE in lines:
        start = lines.index(SECTION_TITLE)
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    else:
        start = end = next((i for i, line in enumerate(lines) if line.startswith(before)), len(lines))
    return "\n".join(lines[:start] + section.rstrip("\n").split("\n") + [""] + lines[end:])


def publish(summary: dict, results_md: Path = REPO_ROOT / "RESULTS.md", figures_dir: Path = FIGURES_DIR) -> Path:
    """Writes the SVG charts to `figures_dir` and the section, showing them, into `results_md`; returns `results_md`."""
    images = {name: os.path.relpath(path, results_md.parent) for name, path in export_figures(summary, figures_dir).items()}
    doc = results_md.read_text() if results_md.exists() else ""
    results_md.write_text(splice_section(doc, results_section(summary, images=images)))
    return results_md


__all__ = ["GAIN_ARMS", "HaystackStudy", "HaystackStudyConfig", "PAPER_TURNS", "bucket_gains", "curves", "export_figures", "figures",
           "protocol_record", "publish", "results_section", "splice_section", "size_curve_table", "verdicts", "write_charts"]
