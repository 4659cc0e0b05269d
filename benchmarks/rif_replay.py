"""Time of the full paper protocol (all arms, 5,000 burn-in steps, frozen evaluation) on the LoCoMo pools.

Baseline measured in the same run: a plain per-entry dictionary loop written like the
reference implementation (dict of (cluster, entry) -> (value, last step), Python sorting).
Both replay the same schedule; the script checks they end in the same suppression state.
`seconds` is the whole paper table (all arms: burn-in + frozen evaluation of every query);
`ratio_vs_dict_loop` compares burn-in alone (dict loop seconds / compiled kernel seconds).
Prints one JSON object whose last two keys are `seconds` and `ratio_vs_dict_loop`.

`--smoke`: the same measurement at a tiny size in seconds (synthetic:2000, lexical test reranker, hashing encoder,
two arms, 300 burn-in steps), what tests/benchmarks/test_benchmarks_smoke.py runs.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

from lethe_core.experiments.rif import RIFExperiment
from lethe_core.experiments.setup import DataSpec
from lethe_core.retrieval.pipeline import PipelineConfig, query_vectors
from lethe_core.rif.clusters import QueryClusters
from lethe_core.rif.protocols import ReplayContext, hot_cold_schedule, run_paper
from lethe_core.rif.replay import Arm, learn, retrieve
from lethe_core.rif.state import SuppressionState


def dict_loop_burn_in(ctx: ReplayContext, arm: Arm, clusters_of, schedule) -> dict:
    """The reference's shape: Python dicts and lists, one entry at a time."""
    prm, p = arm.params, ctx.pools
    supp: dict[tuple[int, int], tuple[float, int]] = {}
    for step, i in enumerate(schedule, start=1):
        c = int(clusters_of[i])
        rows = p.rows(int(i))
        docs = p.doc_idx[rows].tolist()
        rrf = p.rrf[rows].tolist()
        conf = p.read_logit[rows].tolist()
        adjusted = [(rrf[j] - prm.alpha * supp.get((c, docs[j]), (0.0, 0))[0], j) for j in range(len(docs))]
        adjusted.sort(key=lambda t: (-t[0], t[1]))
        pool = [j for _, j in adjusted[: prm.pool_size]]
        final = sorted(range(len(pool)), key=lambda r: (-conf[pool[r]], r))
        r_final = {pool[r]: rank for rank, r in enumerate(final)}
        for r_init, j in enumerate(pool):
            doubt = 1 / (1 + math.exp(conf[j]))
            if arm.rule == "uniform":
                s = (1 - r_init / prm.pool_size) * doubt
            else:
                s = max(0, r_final[j] - r_init) / prm.pool_size * doubt
            value, last = supp.get((c, docs[j]), (0.0, step))
            value *= math.exp(-prm.decay * (step - last))
            value = max(0.0, value - 0.05) if r_final[j] < prm.winners else min(value + prm.eta * s, 1.0)
            supp[(c, docs[j])] = (value, step)
    return supp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dataset", default="locomo")
    ap.add_argument("--reranker", default="auto")
    ap.add_argument("--burn-in", type=int, default=5000)
    ap.add_argument("--encoder", default="minilm")
    ap.add_argument("--arms", help="comma-separated arm names (default: all)")
    ap.add_argument("--smoke", action="store_true", help="tiny size, seconds: the test suite's run")
    args = ap.parse_args()
    if args.smoke:
        args.dataset, args.reranker, args.encoder, args.burn_in = "synthetic:2000", "test:lexical", "test:hash", 300
        args.arms = "global-gap,clustered10-gap"  # K=10 fits its 30 queries

    data = DataSpec(dataset=args.dataset, reranker=args.reranker, pipeline=PipelineConfig(encoder=args.encoder), progress=False)
    exp = RIFExperiment(data, seeds=1, arms=args.arms.split(",") if args.arms else None)
    loaded = exp.data.load()
    ds = loaded.dataset
    qvecs = query_vectors(ds.queries, exp.data.pipeline)
    ctx = ReplayContext(ds, loaded.packed, qvecs, "ce")
    arms = exp.arm_list()

    run_paper(ctx, arms[:3], seed=42, burn_in=50, snapshot_every=0)  # compile the kernel outside the timing
    t0 = time.perf_counter()
    run_paper(ctx, arms, seed=42, burn_in=args.burn_in, snapshot_every=0)
    ours = time.perf_counter() - t0

    schedule, _ = hot_cold_schedule(len(ctx.pools.query_ids), args.burn_in, 42)
    rif_arms = [a for a in arms if a.kind == "rif"]
    fitted = {arm.name: QueryClusters.fit(qvecs, arm.k, seed=42) for arm in rif_arms}  # k-means is not timed
    assigned = {name: cl.assign(qvecs) for name, cl in fitted.items()}
    t0 = time.perf_counter()
    dict_states = {arm.name: dict_loop_burn_in(ctx, arm, assigned[arm.name], schedule) for arm in rif_arms}
    dict_s = time.perf_counter() - t0

    # The same schedules through the compiled kernel (the default path) and the plain numpy path.
    from lethe_core.rif import fast

    def engine(use_kernel: bool):
        states, t0 = {}, time.perf_counter()
        for arm in rif_arms:
            cof = assigned[arm.name]
            st = SuppressionState(fitted[arm.name].k, len(ds.corpus), arm.params)
            if not (use_kernel and fast.burn_in(ctx.pools, arm, st, cof, schedule, 1)):
                for step, i in enumerate(schedule, start=1):
                    learn(ctx.pools, arm, st, int(cof[i]), step, retrieve(ctx.pools, int(i), arm, st, int(cof[i]), step, "ce"))
            states[arm.name] = st
        return states, time.perf_counter() - t0

    engine(True)  # compile once (cached on disk afterwards)
    kernel_states, kernel_s = engine(True)
    numpy_states, numpy_s = engine(False)
    agree = True
    for arm in rif_arms:
        ref = dict_states[arm.name]
        ks = np.array([k for k, _ in ref]), np.array([d for _, d in ref])
        for st in (kernel_states[arm.name], numpy_states[arm.name]):
            agree &= bool(np.allclose(st.values[ks[0], ks[1]], [v for v, _ in ref.values()], atol=1e-9))
            agree &= int((st.values > 0).sum()) == sum(1 for v, _ in ref.values() if v > 0)

    print(json.dumps({
        "dataset": ds.name, "reranker": loaded.pools.reranker, "arms": len(arms), "rif_arms": len(rif_arms), "burn_in": args.burn_in,
        "queries": len(ds.queries), "burn_in_kernel_seconds": round(kernel_s, 3), "burn_in_numpy_seconds": round(numpy_s, 3),
        "dict_loop_burn_in_seconds": round(dict_s, 3), "states_agree": agree,
        "seconds": round(ours, 3), "ratio_vs_dict_loop": round(dict_s / kernel_s, 1),
    }))


if __name__ == "__main__":
    main()
