"""Teacher-quality study: how RIF's gain depends on how good its reranker (the teacher) is.

The teacher here is *simulated* and labelled so everywhere: logit = 3 * [relevant] - 1.5 + sigma * N(0, 1)
for every pool member (seeded), with sigma found by bisection so that the reranked top-P pool
reaches a target NDCG@10. Targets run from the first stage's own level (RRF) to the oracle
(sigma = 0). At each level the clustered rank-gap arm is replayed against the baseline under the
held-out protocol (and the paper protocol, for contrast), with the control arm (rerank the whole union,
no RIF) beside it: under repeated visits RIF cycles rejected entries out of the pool, so it drifts
towards the control arm, and it can only help where the teacher reranks the union better than the top-P. Real rerankers are placed on the same
axis by their own baseline NDCG@10 and gain. Never read a simulated point as a cross-encoder result.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from lethe_core.measures import stats
from lethe_core.datasets.splits import HELDOUT, PAPER
from lethe_core.pools.cache import PackedPools
from lethe_core.results.runs import latest_runs, replay_context
from lethe_core.results.store import run_dir, write_json, write_parquet
from lethe_core.rif.protocols import ReplayContext, run_heldout, run_paper
from lethe_core.rif.replay import Arm, Judgements
from lethe_core.rif.state import RIFParams
from lethe_core.retrieval.second_stage import final_order


def simulate_logits(j: Judgements, sigma: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (3.0 * (j.grade > 0) - 1.5 + sigma * rng.standard_normal(len(j.grade))).astype(np.float32)


def pool_ndcg(p: PackedPools, j: Judgements, logits: np.ndarray, pool_size: int = 30) -> float:
    out = []
    disc = 1.0 / np.log2(np.arange(2, 12))
    for i in range(len(p.query_ids)):
        r = p.rows(i)
        pool = np.arange(min(pool_size, r.stop - r.start))
        order = pool[final_order(logits[r][pool], np.nan, "ce")][:10]
        g = j.grade[r][order]
        out.append(((2.0**g - 1) * disc[: len(g)]).sum() / j.idcg[i] if j.idcg[i] > 0 else 0.0)
    return float(np.mean(out))


def sigma_for(p: PackedPools, j: Judgements, target: float, seed: int, hi: float = 50.0, iters: int = 30) -> float:
    lo = 0.0
    if pool_ndcg(p, j, simulate_logits(j, 0.0, seed)) <= target:
        return 0.0
    for _ in range(iters):
        mid = (lo + hi) / 2
        if pool_ndcg(p, j, simulate_logits(j, mid, seed)) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass
class TeacherStudy:
    levels: int = 6
    seed: int = 42
    burn_in: int = 5000
    arm_k: int = 30
    rule: str = "gap"

    def run(self, ctx: ReplayContext, real: list[dict] | None = None, name: str = "teacher", results_root: Path | None = None,
            reranker: str | None = None) -> pd.DataFrame:
        p, j = ctx.pools, ctx.judgements
        first_stage = pool_ndcg(p, j, -np.concatenate([np.arange(p.rows(i).stop - p.rows(i).start) for i in range(len(p.query_ids))]).astype(np.float32))
        oracle = pool_ndcg(p, j, simulate_logits(j, 0.0, self.seed))
        arms = [Arm("baseline", "baseline"), Arm(f"clustered{self.arm_k}-{self.rule}", "rif", self.arm_k, self.rule, RIFParams()),
                Arm("control", "control")]
        rows = []
        for target in np.linspace(first_stage, oracle, self.levels):
            sigma = sigma_for(p, j, float(target), self.seed)
            logits = simulate_logits(j, sigma, self.seed)
            sim = replace(p, logit=logits, read_logit=logits, fuse_w=np.full(len(p.query_ids), np.nan, np.float32))
            sctx = ReplayContext(ctx.dataset, sim, ctx.query_vectors, "ce")
            row = {"teacher": "simulated", "sigma": sigma, "teacher_ndcg@10": pool_ndcg(sim, j, logits)}
            for protocol, fn in ((HELDOUT, run_heldout), (PAPER, run_paper)):
                df = pd.DataFrame(fn(sctx, arms, self.seed, self.burn_in, 0).rows)
                base = df[df["arm"] == "baseline"].set_index(["query_id", "split"])["ndcg@10"]
                mine = df[df["arm"] == arms[1].name].set_index(["query_id", "split"])["ndcg@10"].reindex(base.index)
                d = stats.paired_delta_ci(mine.to_numpy(), base.to_numpy(), seed=self.seed)
                row.update({f"{protocol}_gain": d.mean, f"{protocol}_gain_lo": d.lo, f"{protocol}_gain_hi": d.hi,
                            f"{protocol}_p": stats.paired_permutation_test(mine.to_numpy(), base.to_numpy(), seed=self.seed)})
                if protocol == PAPER:  # the control arm (rerank the whole union) does not depend on the protocol
                    ctrl = df[df["arm"] == "control"].set_index(["query_id", "split"])["ndcg@10"].reindex(base.index)
                    row["control_gain"] = float((ctrl - base).mean())
            rows.append(row)
        for r in real or []:
            rows.append({"teacher": r["name"], "sigma": np.nan, "teacher_ndcg@10": r["teacher_ndcg@10"],
                         "heldout_gain": r.get("heldout_gain"), "heldout_gain_lo": r.get("heldout_gain_lo"),
                         "heldout_gain_hi": r.get("heldout_gain_hi"), "paper_gain": r.get("paper_gain"), "control_gain": r.get("control_gain")})
        table = pd.DataFrame(rows)
        out = run_dir(name, results_root)
        out.mkdir(parents=True, exist_ok=True)
        write_parquet(out / "teacher_curve.parquet", table)
        write_json(out / "config.json", {**asdict(self), "first_stage_ndcg@10": first_stage, "oracle_ndcg@10": oracle,
                                         "dataset": ctx.dataset.name, "reranker": reranker}, default=None, indent=None)
        return table


def run_teacher_study(dataset: str = "locomo", reranker: str | None = None, levels: int = 6, arm: str = "clustered30-gap") -> pd.DataFrame:
    """The study behind RESULTS.md's teacher section, on the newest full paper run of `dataset` (and its held-out run,
    which places the real reranker on the same axis); written to results/teacher-<dataset>/ for the report to read."""
    runs = latest_runs(dataset, reranker, reading="raw")
    if PAPER not in runs:
        raise ValueError(f"no full paper-protocol run for {dataset} under the raw reading; run `lethe-lab rif run {dataset} --protocol paper` first")
    paper = runs[PAPER]
    runs = latest_runs(dataset, paper.summary["reranker"], paper.summary["second_stage"], reading="raw")
    by_name = {name: {a["name"]: a for a in run.summary["arms"]} for name, run in runs.items()}
    real = []
    held = by_name.get(HELDOUT, {}).get(arm)
    if held:
        h = held["delta_ndcg"]
        control = by_name[PAPER].get("control")
        real.append({"name": paper.summary["reranker"], "teacher_ndcg@10": by_name[PAPER]["baseline"]["ndcg@10"]["mean"],
                     "heldout_gain": h["mean"], "heldout_gain_lo": h["ci"][0], "heldout_gain_hi": h["ci"][1],
                     "paper_gain": by_name[PAPER][arm]["delta_ndcg"]["mean"],
                     "control_gain": control["delta_ndcg"]["mean"] if control else None})
    return TeacherStudy(levels=levels).run(replay_context(paper), real, name=f"teacher-{dataset}", reranker=paper.summary["reranker"])
