"""Views over results and cached pools, shared by the dashboard and the notebooks.

Everything here reads a results folder (`lethe_core.results.runs.Run`) and, where a view needs the
candidates themselves, the cached pools (`ReplayContext`); nothing runs a model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from lethe_core.datasets.splits import HELDOUT, PAPER, PREQUENTIAL
from lethe_core.measures import stats
from lethe_core.results.runs import Run
from lethe_core.rif.protocols import ReplayContext, conversation_halves, run_frozen, run_heldout, run_prequential
from lethe_core.rif.replay import Arm, retrieve
from lethe_core.rif.state import RIFParams, SuppressionState
from lethe_core.retrieval.second_stage import teacher_order

BEHAVIOURS = ("exact_episode", "sibling_confusion", "wrong_family")
ANSWER = 10  # the answer list every metric here reads (NDCG@10) and the teacher's winners RIF learns from
# Bootstrap resamples behind the CIs the pages draw: fewer than the reported tables' 10,000, since a page view recomputes them.
VIEW_RESAMPLES = 2000


def headline(run: Run) -> pd.DataFrame:
    rows = []
    for a in run.summary["arms"]:
        n, d, r = a["ndcg@10"], a["delta_ndcg"], a["recall@30"]
        rows.append({
            "arm": a["name"], "NDCG@10": n["mean"], "NDCG lo": n["ci"][0], "NDCG hi": n["ci"][1], "seed sd": n.get("seed_sd", 0.0),
            "Δ NDCG": d["mean"], "Δ lo": d["ci"][0], "Δ hi": d["ci"][1], "p": a["p"], "p (Holm)": a["p_holm"],
            "Recall@30": r["mean"], "Δ Recall@30": a["delta_recall"]["mean"],
            "Δ vs control": (a.get("delta_vs_control") or {}).get("mean"),
            "Δc lo": ((a.get("delta_vs_control") or {}).get("ci") or [None, None])[0],
            "Δc hi": ((a.get("delta_vs_control") or {}).get("ci") or [None, None])[1], "p vs control": a.get("p_vs_control"),
            "suppressed (cluster, entry)": sum(v["entries"] for v in a["suppressed_entries"].values()) if a["suppressed_entries"] else 0,
        })
    return pd.DataFrame(rows)


def paper_seed(run: Run) -> int:
    """The run's first seed: the one its headline table and its suppression snapshots are for."""
    return int(run.summary["seeds"][0])


def seed_rows(run: Run, seed: int | None = None) -> pd.DataFrame:
    """One seed's per-query rows (the paper seed by default): queries pair up between arms only within a seed."""
    pq = run.per_query
    return pq[pq["seed"] == (paper_seed(run) if seed is None else seed)]


def first_seed(run: Run) -> pd.DataFrame:
    return seed_rows(run)


def query_deltas(run: Run, arm: str, seed: int | None = None) -> pd.DataFrame:
    """Per query of `arm`: split, cluster, qtype, baseline and arm NDCG@10 and their difference, worst first, so a
    picker can offer the queries the arm lost most on."""
    pq = seed_rows(run, seed)
    key = ["query_id", "split"]
    mine = pq[pq["arm"] == arm].set_index(key)
    base = pq[pq["arm"] == "baseline"].set_index(key)["ndcg@10"].reindex(mine.index)
    out = pd.DataFrame({"cluster": mine["cluster"].astype(int), "qtype": mine["qtype"], "baseline": base, "ndcg": mine["ndcg@10"]})
    out = out.assign(delta=out["ndcg"] - out["baseline"]).reset_index()
    return out.sort_values(["delta", "query_id"], kind="stable").reset_index(drop=True)


def cluster_table(run: Run, arm: str, seed: int | None = None, n_resamples: int = VIEW_RESAMPLES) -> pd.DataFrame:
    """Per (split, cluster) of `arm`: queries (n), baseline and arm NDCG@10, and the paired delta with its 95 % bootstrap CI.

    A cluster's mean delta over a handful of queries is mostly noise; the CI and n say how much. Clusters are fit per
    split (held-out runs fit them on each half), so a cluster id means something only together with its split.
    """
    d = query_deltas(run, arm, seed)
    rows = []
    for (split, cluster), g in d.groupby(["split", "cluster"], sort=True):
        ci = stats.bootstrap_ci(g["delta"].to_numpy(), n_resamples)
        rows.append({"split": split, "cluster": int(cluster), "queries": len(g), "baseline": float(g["baseline"].mean()),
                     "ndcg": float(g["ndcg"].mean()), "delta": ci.mean, "delta lo": ci.lo, "delta hi": ci.hi})
    return pd.DataFrame(rows, columns=["split", "cluster", "queries", "baseline", "ndcg", "delta", "delta lo", "delta hi"])


def snapshot_steps(run: Run, arm: str) -> list[int]:
    s = run.snapshots
    return sorted(s.loc[s["arm"] == arm, "step"].unique().tolist())


def snapshot_splits(run: Run, arm: str) -> list[str]:
    """The splits `arm` has snapshots for (held-out runs: one per direction, each with its own clusters)."""
    s = run.snapshots
    return sorted(s.loc[s["arm"] == arm, "split"].unique().tolist())


def _top_matrix(long: pd.DataFrame, top: int, clusters: list[int] | None) -> pd.DataFrame:
    """Clusters x the `top` entries with the most suppression summed over clusters, from (cluster, doc_id, value) rows;
    columns are full entry ids, which stay distinct across conversations."""
    if clusters:
        long = long[long["cluster"].isin(clusters)]
    if long.empty:
        return pd.DataFrame()
    best = long.groupby("doc_id")["value"].sum().nlargest(top).index
    return long[long["doc_id"].isin(best)].pivot_table(index="cluster", columns="doc_id", values="value", fill_value=0.0)[list(best)]


def suppression_matrix(run: Run, arm: str, step: int, top: int = 25, clusters: list[int] | None = None,
                       split: str | None = None) -> pd.DataFrame:
    """Clusters x the `top` most suppressed entries at one snapshot step of one split (the first by default)."""
    s = run.snapshots
    s = s[(s["arm"] == arm) & (s["step"] == step)]
    if s.empty:
        return pd.DataFrame()
    return _top_matrix(s[s["split"] == (split if split is not None else s["split"].iloc[0])], top, clusters)


def state_matrix(values: np.ndarray, doc_ids: list[str], top: int = 25, clusters: list[int] | None = None) -> pd.DataFrame:
    """`suppression_matrix` of a state array: the end of burn-in of a seed the snapshots do not hold (`suppression_states`)."""
    k, n = np.nonzero(values > 0)
    return _top_matrix(pd.DataFrame({"cluster": k, "doc_id": [doc_ids[i] for i in n], "value": values[k, n]}), top, clusters)


def saturation(run: Run, n_entries: int) -> pd.DataFrame:
    """Per arm and snapshot step: share of the corpus suppressed in at least one cluster, and (cluster, entry) pairs."""
    s = run.snapshots
    if s.empty:
        return pd.DataFrame(columns=["arm", "step", "share_of_corpus", "entries"])
    g = s.groupby(["arm", "split", "step"])
    out = g.agg(docs=("doc_idx", "nunique"), entries=("doc_idx", "size")).reset_index()
    return out.assign(share_of_corpus=out["docs"] / n_entries)


def final_state(run: Run, arm: str, n_entries: int, n_clusters: int, split: str | None = None) -> np.ndarray:
    """The suppression matrix at the last snapshot (= end of burn-in when burn-in is a multiple of 500)."""
    s = run.snapshots
    s = s[s["arm"] == arm]
    if split:
        s = s[s["split"] == split]
    if len(s):
        last = s[s["step"] == s["step"].max()]
        last = last[last["split"] == last["split"].iloc[0]]
        values = np.zeros((max(n_clusters, int(last["cluster"].max()) + 1), n_entries))
        values[last["cluster"].to_numpy(), last["doc_idx"].to_numpy()] = last["value"].to_numpy()
        return values
    return np.zeros((n_clusters, n_entries))


def arm_params(run: Run) -> RIFParams:
    """The RIF parameters the run was made with (config.json), defaults for options older runs did not record."""
    c, d = run.config, RIFParams()
    return RIFParams(alpha=c.get("alpha", d.alpha), eta=c.get("eta", d.eta), decay=c.get("decay", d.decay),
                     pool_size=c["pipeline"]["pool_size"], eager=bool(c.get("eager_decay", d.eager)),
                     cap=c.get("cap", d.cap), reinforce=c.get("reinforce", d.reinforce))


def suppression_states(ctx: ReplayContext, run: Run, arm: str, seed: int | None = None) -> dict[str, np.ndarray]:
    """`arm`'s suppression (clusters x entries) at the end of burn-in, per split, for one seed ({} for a non-RIF arm).

    snapshots.parquet holds the paper seed only, so another seed's state is replayed from the cached pools: the same
    burn-in (schedule, clusters, updates) the run made for that seed, nothing evaluated. A prequential run's state moves
    with every query, so only its recorded snapshots exist: another seed raises ValueError.
    """
    if arm_kinds(run).get(arm, "rif") != "rif":
        return {}
    seed = paper_seed(run) if seed is None else seed
    rows = seed_rows(run, seed)
    rows = rows[rows["arm"] == arm]
    k = int(rows["cluster"].max()) + 1 if len(rows) else 1
    if seed == paper_seed(run):
        return {split: final_state(run, arm, ctx.n_entries, k, split) for split in sorted(rows["split"].unique())}
    protocol = run.summary["protocol"]
    if protocol == PAPER:
        trains = {"all": np.arange(len(ctx.pools.query_ids))}
    elif protocol == HELDOUT:
        a, b = conversation_halves(ctx, seed)  # each seed its own split (rif.protocols.run_heldout)
        trains = {"A->B": a, "B->A": b}
    else:
        raise ValueError(f"a {protocol} run's suppression changes with every query; only seed {paper_seed(run)}'s snapshots record it")
    spec = next(a for a in run.summary["arms"] if a["name"] == arm)
    rif = Arm(arm, "rif", int(spec["k"]), spec["rule"], arm_params(run), cues="entry" if arm.startswith("entry") else "query")
    burn_in = int(run.summary["burn_in"])
    out = {}
    for split, train in trains.items():
        snaps = run_frozen(ctx, [rif], seed, burn_in, train, np.empty(0, dtype=np.int64), split, snapshot_every=burn_in).snapshots
        n = max([k, *(int(s["cluster"].max()) + 1 for s in snaps if len(s["cluster"]))])
        values = np.zeros((n, ctx.n_entries))
        for s in snaps:
            values[s["cluster"], s["doc_idx"]] = s["value"]
        out[split] = values
    return out


def scored_with_final_state(run: Run) -> bool:
    """Whether each query was scored with its arm's end-of-burn-in state, the one these views read (paper, held-out); a
    prequential query saw the state of its arrival instead."""
    return run.summary["protocol"] != PREQUENTIAL


AUDIT_QUERIES = ("query_id", "split", "cluster", "displaced", "still displaced")
AUDIT_REJECTIONS = ("query_id", "split", "cluster", "doc_idx", "doc_id", "union rank", "rank after", "suppression", "displaced")


def pool_audit(ctx: ReplayContext, run: Run, arm: str, seed: int | None = None,
               states: dict[str, np.ndarray] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Where the baseline's reranker pool went wrong for each query of `arm` (grouped by the arm's clusters).

    queries: one row per query; displaced = a relevant union member sat below the baseline's pool cut, still displaced
    = one sits outside the arm's pool too. rejections: one row per (query, entry) for the entries that held a baseline
    pool slot but were neither relevant nor among the teacher's top-10 (what RIF penalises), with their 1-based union
    rank before and after the arm's final suppression, that suppression, and whether the query was displaced.
    """
    p, j = ctx.pools, ctx.judgements
    rows = seed_rows(run, seed)
    rows = rows[rows["arm"] == arm]
    states = suppression_states(ctx, run, arm, seed) if states is None else states
    params = arm_params(run)
    P = params.pool_size
    pos = {q: i for i, q in enumerate(p.query_ids)}
    ids = ctx.dataset.corpus.ids
    queries, rejections = [], []
    for qid, split, cluster in zip(rows["query_id"], rows["split"], rows["cluster"].astype(int)):
        r = p.rows(pos[qid])
        docs, relevant = p.doc_idx[r], j.grade[r] > 0
        values = states.get(split)
        s = values[cluster, docs] if values is not None else np.zeros(len(docs))
        after = np.empty(len(docs), dtype=np.int64)
        after[np.argsort(-(p.rrf[r] - params.alpha * s), kind="stable")] = np.arange(1, len(docs) + 1)
        pool = np.arange(min(P, len(docs)))
        answer = pool[teacher_order(p.read_logit[r][pool])][:ANSWER]
        displaced = bool(relevant[P:].any())
        queries.append((qid, split, cluster, displaced, bool((relevant & (after > P)).any())))
        for m in np.setdiff1d(pool[~relevant[pool]], answer):
            d = int(docs[m])
            rejections.append((qid, split, cluster, d, ids[d], int(m) + 1, int(after[m]), float(s[m]), displaced))
    return pd.DataFrame(queries, columns=list(AUDIT_QUERIES)), pd.DataFrame(rejections, columns=list(AUDIT_REJECTIONS))


def _entry_counts(rejections: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    g = rejections.groupby(keys, sort=False)
    out = g.agg(doc_id=("doc_id", "first"), rejected=("query_id", "size"), displaced=("displaced", "sum"),
                rank_before=("union rank", "mean"), rank_after=("rank after", "mean"), suppression=("suppression", "max"),
                queries=("query_id", list)).reset_index()
    out = out.rename(columns={"rank_before": "rank before", "rank_after": "rank after"})
    return out.sort_values(["displaced", "rejected", "suppression", "doc_id"], ascending=[False, False, False, True], kind="stable")


def harm_ranking(queries: pd.DataFrame, rejections: pd.DataFrame) -> pd.DataFrame:
    """Clusters ranked by the harm chronic false positives do there: the share of the cluster's queries displaced (a
    relevant turn cut from the baseline pool while rejected entries held it), then the count; with the cluster's worst
    entry (the one present in the most displaced queries), so the worst cluster and its culprit are one row."""
    cols = ["split", "cluster", "queries", "displaced", "harm", "still displaced", "worst entry", "rejected for", "displaced with it"]
    if queries.empty:
        return pd.DataFrame(columns=cols)
    out = queries.groupby(["split", "cluster"]).agg(queries=("query_id", "size"), displaced=("displaced", "sum"),
                                                    still=("still displaced", "sum")).reset_index()
    out = out.rename(columns={"still": "still displaced"}).assign(harm=lambda f: f["displaced"] / f["queries"])
    worst = _entry_counts(rejections, ["split", "cluster", "doc_idx"]).drop_duplicates(["split", "cluster"])
    worst = worst[["split", "cluster", "doc_id", "rejected", "displaced"]].rename(
        columns={"doc_id": "worst entry", "rejected": "rejected for", "displaced": "displaced with it"})
    out = out.merge(worst, on=["split", "cluster"], how="left")
    out = out.sort_values(["harm", "displaced", "split", "cluster"], ascending=[False, False, True, True], kind="stable")
    return out[cols].astype({"rejected for": "Int64", "displaced with it": "Int64"}).reset_index(drop=True)


def chronic_entries(queries: pd.DataFrame, rejections: pd.DataFrame, split: str, cluster: int, corpus=None) -> pd.DataFrame:
    """The entries rejected in one cluster, most harmful first: rejected for how many of the cluster's queries (`of`),
    displaced = how many of those queries lost a relevant turn below the pool cut, mean union rank before and after the
    arm's suppression, the suppression, the queries; with `corpus`, session, conversation and the full text."""
    n = int(((queries["split"] == split) & (queries["cluster"] == cluster)).sum())
    mine = rejections[(rejections["split"] == split) & (rejections["cluster"] == cluster)]
    out = _entry_counts(mine, ["doc_idx"]).assign(of=n)
    out = out[["doc_idx", "doc_id", "rejected", "of", "displaced", "rank before", "rank after", "suppression", "queries"]]
    if corpus is not None:
        out = out.assign(session=[corpus[int(d)].session_id for d in out["doc_idx"]],
                         conversation=[corpus[int(d)].conversation_id for d in out["doc_idx"]],
                         text=[corpus[int(d)].text for d in out["doc_idx"]])
    return out.reset_index(drop=True)


def trajectory(run: Run, arm: str, cluster: int, doc_ids: list[str], split: str | None = None) -> pd.DataFrame:
    s = run.snapshots
    s = s[(s["arm"] == arm) & (s["cluster"] == cluster) & (s["doc_id"].isin(doc_ids))]
    if not len(s):
        return s[["step", "doc_id", "value"]]
    return s[s["split"] == (split if split is not None else s["split"].iloc[0])][["step", "doc_id", "value"]]


def behaviour_table(run: Run, by: str | None = None, seed: int | None = None) -> pd.DataFrame:
    """Mean exact_episode / sibling_confusion / wrong_family (and abstain@T) per arm, optionally per `by` column."""
    pq = seed_rows(run, seed)
    cols = [*BEHAVIOURS, "abstain@0", "abstain@2", "abstain@4"]
    keys = ["arm"] + ([by] if by else [])
    return pq.groupby(keys)[cols].mean().reset_index()


def paired_deltas(run: Run, metrics, seed: int | None = None, by: str | None = None, arms: list[str] | None = None,
                  n_resamples: int = VIEW_RESAMPLES) -> pd.DataFrame:
    """Per arm (and `by` group) and metric: n queries, mean(arm - baseline) over the same queries and its 95 % bootstrap CI.

    Arms differ in their top-1 behaviour by a few points; drawn as shares on a 0-1 axis those differences vanish.
    """
    pq = seed_rows(run, seed)
    key = ["query_id", "split"]
    base = pq[pq["arm"] == "baseline"].set_index(key)
    rows = []
    for arm in arms if arms is not None else [a for a in run.arms if a != "baseline"]:
        mine = pq[pq["arm"] == arm].set_index(key)
        for metric in metrics:
            d = pd.DataFrame({"delta": mine[metric].astype(float) - base[metric].astype(float).reindex(mine.index),
                              "group": mine[by] if by else "all"}).dropna()
            for group, g in d.groupby("group", sort=True):
                ci = stats.bootstrap_ci(g["delta"].to_numpy(), n_resamples)
                rows.append({"arm": arm, **({by: group} if by else {}), "metric": metric, "n": len(g),
                             "delta": ci.mean, "lo": ci.lo, "hi": ci.hi})
    return pd.DataFrame(rows, columns=["arm", *([by] if by else []), "metric", "n", "delta", "lo", "hi"])


def abstention(run: Run, seed: int | None = None) -> tuple[pd.DataFrame, str | None]:
    """Share of queries abstained on (top-1 score below T) per arm, for the thresholds that tell the arms apart.

    A threshold at which every arm abstains on all queries, or on none, only says where the reranker's scores lie, not
    what an arm did; those are left out and named in the returned line (the whole story when none is left).
    """
    pq = seed_rows(run, seed)
    cols = [c for c in pq.columns if c.startswith("abstain@")]
    table = pq.groupby("arm", sort=False)[cols].mean().reindex(run.arms)
    flat = {c: float(table[c].iloc[0]) for c in cols if table[c].nunique() == 1 and float(table[c].iloc[0]) in (0.0, 1.0)}
    if not flat:
        return table.reset_index(), None
    scale = f"top-1 scores run from {pq['top1_logit'].min():.2f} to {pq['top1_logit'].max():.2f}"
    said = "; ".join(f"at T = {c.split('@', 1)[1]} every arm abstains on {share:.0%} of queries" for c, share in flat.items())
    kept = [c for c in cols if c not in flat]
    line = f"{said[:1].upper()}{said[1:]} ({scale})" + ("." if kept else ": abstention cannot tell the arms apart on this score scale.")
    return table[kept].reset_index(), line


def arm_kinds(run: Run) -> dict[str, str]:
    """Each arm's kind from the run summary: `baseline` (rerank the top-P), `control` (rerank the whole union), `rif`."""
    return {a["name"]: a.get("kind", "rif") for a in run.summary["arms"]}


def rif_arms(run: Run) -> list[str]:
    """The arms that are RIF (kind `rif`), in the run's order; never `baseline` or `control`."""
    return [name for name, kind in arm_kinds(run).items() if kind == "rif"]


ARM_MEANING = {"baseline": "reranker over the top-P of the union", "control": "reranker over the whole union, no RIF",
               "rif": "RIF: suppression-adjusted top-P, reranked"}


def _rank1(rank0: np.ndarray) -> pd.Series:
    """0-based ranks with -1 for "not ranked" as 1-based ranks with <NA>."""
    return pd.Series(np.asarray(rank0) + 1, dtype="Int64").where(np.asarray(rank0) >= 0)


def candidate_table(ctx: ReplayContext, run: Run, arm: str, query_id: str, seed: int | None = None,
                    states: dict[str, np.ndarray] | None = None) -> pd.DataFrame:
    """Every union member of one query under `arm` (one seed, the paper seed by default), ranks 1-based, in adjusted
    first-stage order.

    union rank: the first-stage (RRF) rank before any suppression; bm25 / dense rank: the first-stage legs (<NA>: not
    retrieved by that leg); penalty: alpha x the arm's final suppression (RIF arms; 0 otherwise); adjusted rank:
    first-stage rank after the penalty; in pool: the member went to the reranker (the top-P of the adjusted order, or
    the whole union for `control`); final rank: the position in the arm's answer, the same order the replay scored
    (`per_query.parquet`'s top10), <NA> when the member was cut from the reranker's pool. Built through the replay's own
    `retrieve`, so the kinds cannot drift apart. `states`: `suppression_states` of the arm and seed, when already at hand.
    """
    i = ctx.pools.query_ids.index(query_id)
    kind = arm_kinds(run).get(arm, "rif")
    rows = seed_rows(run, seed)
    row = rows[(rows["arm"] == arm) & (rows["query_id"] == query_id)]
    cluster = int(row["cluster"].iloc[0]) if len(row) and kind == "rif" else 0
    params = arm_params(run)
    values = None
    if kind == "rif":
        states = suppression_states(ctx, run, arm, seed) if states is None else states
        values = states.get(row["split"].iloc[0]) if len(row) else None
        values = np.zeros((cluster + 1, ctx.n_entries)) if values is None else values
    return _candidates(ctx, i, Arm(arm, kind, params=params), values, cluster)


def _candidates(ctx: ReplayContext, i: int, arm: Arm, values: np.ndarray | None, cluster: int) -> pd.DataFrame:
    """`candidate_table` of query position `i` under `arm` with the suppression `values` (clusters x entries; None: none)."""
    p, j = ctx.pools, ctx.judgements
    r = p.rows(i)
    params = replace(arm.params, eager=False)  # eager decay cannot be replayed from final values: values as stored
    state = None
    if values is not None:
        state = SuppressionState(values.shape[0], ctx.n_entries, params)
        state.values = values
    docs = p.doc_idx[r]
    penalty = params.alpha * state.values[cluster, docs] if state is not None else np.zeros(len(docs))
    adjusted = p.rrf[r] - penalty
    adj_rank = np.empty(len(docs), dtype=int)
    adj_rank[np.argsort(-adjusted, kind="stable")] = np.arange(len(docs))
    ret = retrieve(p, i, replace(arm, params=params), state, cluster, 0, ctx.mode)
    final_rank = np.full(len(docs), -1)
    final_rank[ret.order] = np.arange(len(ret.order))
    in_pool = np.zeros(len(docs), dtype=bool)
    in_pool[ret.pool] = True
    corpus = ctx.dataset.corpus
    out = pd.DataFrame({
        "doc_id": [corpus.ids[d] for d in docs], "union rank": np.arange(1, len(docs) + 1),
        "bm25 rank": _rank1(p.bm25_rank[r]), "dense rank": _rank1(p.dense_rank[r]),
        "rrf": p.rrf[r], "penalty": penalty, "adjusted rank": adj_rank + 1, "in pool": in_pool, "logit": p.read_logit[r],
        "final rank": _rank1(final_rank), "relevant": j.grade[r] > 0, "text": [corpus[d].text for d in docs],
    })
    return out.sort_values("adjusted rank").reset_index(drop=True)


def _placed(final, before=None) -> str:
    if pd.isna(final):
        return "so the reranker never saw it"
    final = int(final)
    was = "" if before is None else " (baseline: not in its pool)" if pd.isna(before) else f" (baseline: {int(before)})"
    return f"and the reranker put it at {final}{was}" + ("" if final <= ANSWER else f", outside the top {ANSWER}")


def explain(table: pd.DataFrame, kind: str, pool_size: int, cluster: int | None = None, ndcg: tuple[float, float] | None = None,
            n_relevant: int | None = None, baseline: pd.DataFrame | None = None) -> str:
    """One sentence on why an arm's answer to one query differs from the baseline's, from its `candidate_table` (and the
    baseline's, to say where the reranker had put the turn and which newcomers to the pool now outrank it).

    It follows the relevant turn whose fate decides the outcome: the best-placed one that crossed the pool cut (into or
    out of the reranker's pool), else the best-placed one, so a reader can check it against the table at a glance.
    """
    head = f"NDCG@10 {ndcg[0]:.3f} → {ndcg[1]:.3f}: " if ndcg is not None else ""
    P = pool_size
    rel = table[table["relevant"]]
    if rel.empty:
        if n_relevant == 0:
            return f"{head}the query has no relevant turn, so every arm scores 0 on it."
        return (f"{head}no relevant turn is in the first-stage union ({len(table)} candidates from BM25 and dense "
                "retrieval), so no reranker pool and no suppression can reach one.")
    where = f" in cluster {cluster}" if cluster is not None else ""
    count = f" (1 of {len(rel)} in the union)" if len(rel) > 1 else ""
    base = baseline.set_index("doc_id") if baseline is not None else None

    def fate(row) -> str:
        before = base.at[row["doc_id"], "final rank"] if base is not None else None
        said = _placed(row["final rank"], before)
        if base is None or pd.isna(row["final rank"]) or pd.isna(before) or int(row["final rank"]) <= int(before):
            return said
        new = table[table["in pool"] & ~table["doc_id"].map(base["in pool"]).fillna(False).astype(bool)]
        above = int((new["final rank"] < row["final rank"]).sum())
        return said + (f", with {above} {'entry' if above == 1 else 'entries'} new to the pool now above it" if above else "")

    if kind == "control":
        below = rel[rel["union rank"] > P]
        focus = (below if len(below) else rel).sort_values(["final rank", "union rank"]).iloc[0]
        turn, b = f"relevant turn {focus['doc_id']}{count}", int(focus["union rank"])
        if len(below):
            return (f"{head}control reranks the whole union: {turn} sits at union rank {b}, below the {P}-entry pool cut "
                    f"the baseline applies, {fate(focus)}.")
        return (f"{head}control reranks all {len(table)} union candidates instead of the top {P}, but every relevant turn already "
                f"sat inside that pool: {turn} at union rank {b}, {fate(focus)}.")
    crossed = rel[(rel["union rank"] <= P) != rel["in pool"]]
    focus = (crossed if len(crossed) else rel).sort_values("union rank").iloc[0]
    turn = f"relevant turn {focus['doc_id']}{count}"
    b, a, pen = int(focus["union rank"]), int(focus["adjusted rank"]), float(focus["penalty"])
    if a > b:
        cut = (f"below the {P}-entry pool cut" if b <= P < a else f"still inside the {P}-entry pool" if a <= P
               else f"already below the {P}-entry pool cut")
        story = f"{turn} fell from union rank {b} to {a}, {cut}, after a penalty of {pen:.2g}{where}"
    elif a < b:
        passed = int(((table["union rank"] < b) & (table["adjusted rank"] > a)).sum())
        cut = (f", into the {P}-entry pool" if a <= P < b else "" if a <= P else f", still below the {P}-entry pool cut")
        story = (f"{turn} rose from union rank {b} to {a}{cut}, as {passed} {'entry' if passed == 1 else 'entries'} "
                 f"above it were penalised{where}")
    else:
        side = "inside" if b <= P else "below"
        story = f"{turn} stayed at union rank {b}, {side} the {P}-entry pool cut ({f'penalty {pen:.2g}' if pen > 0 else 'no penalty'}{where})"
    return f"{head}{story}, {fate(focus)}."


EXAMPLE_ROWS = 12  # rows of an example question's table
EXAMPLE_TEXT = 70  # characters of a turn's text shown there


@dataclass
class Example:
    """One real question a notebook shows: its candidates before (baseline) and after the arm's suppression, one sentence."""

    query_id: str
    split: str
    cluster: int
    ndcg: tuple[float, float]  # baseline, arm
    table: pd.DataFrame
    sentence: str


def pick_example(deltas: pd.DataFrame) -> pd.Series:
    """The example among per-query rows (query_id, delta = arm − baseline NDCG@10): the largest |delta|, the larger loss
    first on a tie, then the query id, so the choice is a stated rule and the same on every build."""
    order = deltas.assign(_size=-deltas["delta"].abs()).sort_values(["_size", "delta", "query_id"], kind="stable")
    return order.iloc[0].drop("_size")


def _arrow(before, after) -> str:
    def said(v):
        return "—" if pd.isna(v) else str(int(v))
    return f"{said(before)} → {said(after)}"


def _short(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def example_table(mine: pd.DataFrame, base: pd.DataFrame, top: int = EXAMPLE_ROWS, width: int = EXAMPLE_TEXT) -> pd.DataFrame:
    """At most `top` candidates of one question from the arm's and the baseline's `candidate_table`s: the relevant turns,
    then those that crossed the pool cut, then the penalised ones that held a baseline pool slot, then the arm's answer
    and the baseline's; ordered by the arm's answer rank (cut from the pool last), each with its first-stage rank, pool
    membership and answer rank before → after, its penalty and its text shortened."""
    m, b = mine.set_index("doc_id"), base.set_index("doc_id").reindex(mine["doc_id"])
    crossed = m["in pool"].to_numpy() != b["in pool"].to_numpy()
    penalised = (m["penalty"].to_numpy() > 0) & b["in pool"].to_numpy()
    groups = [m.index[m["relevant"].to_numpy()], m.index[crossed], m[penalised].sort_values("union rank").index,
              m.sort_values("final rank", na_position="last").index, b.sort_values("final rank", na_position="last").index]
    chosen = list(dict.fromkeys(d for g in groups for d in g))[:top]
    m, b = m.loc[chosen], b.loc[chosen]
    out = pd.DataFrame({
        "turn": chosen, "relevant": np.where(m["relevant"], "yes", ""), "penalty": m["penalty"].round(4).to_numpy(),
        "first-stage rank": [_arrow(x, y) for x, y in zip(m["union rank"], m["adjusted rank"])],
        "reranker pool": [f"{'in' if x else 'out'} → {'in' if y else 'out'}" for x, y in zip(b["in pool"], m["in pool"])],
        "answer rank": [_arrow(x, y) for x, y in zip(b["final rank"], m["final rank"])],
        "text": [_short(t, width) for t in m["text"]],
        "_after": m["final rank"].to_numpy(), "_adjusted": m["adjusted rank"].to_numpy()})
    out = out.sort_values(["_after", "_adjusted"], na_position="last", kind="stable")
    return out.drop(columns=["_after", "_adjusted"]).reset_index(drop=True)


def _example(ctx: ReplayContext, arm: str, pick: pd.Series, seed: int, mine: pd.DataFrame, base: pd.DataFrame,
             cluster_values: np.ndarray | None, pool_size: int, top: int) -> Example:
    qid, cluster = str(pick["query_id"]), int(pick["cluster"])
    i = ctx.pools.query_ids.index(qid)
    ndcg = (float(pick["baseline"]), float(pick["ndcg"]))
    why = (f"the question whose NDCG@10 {arm} changed most against the baseline on seed {seed}" if pick["delta"] != 0
           else f"no question's NDCG@10 moved under {arm} on seed {seed}, so the first by id")
    said = explain(mine, "rif", pool_size, cluster, ndcg, int(ctx.judgements.n_relevant[i]), base)
    listed = np.flatnonzero(cluster_values > 0) if cluster_values is not None else np.empty(0, dtype=np.int64)
    here = mine["penalty"].to_numpy() > 0
    held = int((here & base.set_index("doc_id").reindex(mine["doc_id"])["in pool"].to_numpy()).sum())
    suppressed = (f" Its cluster's list suppresses {len(listed)} {'turn' if len(listed) == 1 else 'turns'}: "
                  f"{int(here.sum())} of this question's {len(mine)} candidates, {held} of them in the baseline's pool.")
    sentence = (f"Example ({why}): {qid} “{ctx.queries[qid].text}” (split {pick['split']}, cluster {cluster}). "
                f"{said[:1].upper()}{said[1:]}{suppressed}")
    return Example(qid, str(pick["split"]), cluster, ndcg, example_table(mine, base, top), sentence)


def replay_example(ctx: ReplayContext, arm: Arm, rows: pd.DataFrame, protocol: str, seed: int, burn_in: int,
                   top: int = EXAMPLE_ROWS) -> Example:
    """The example question of `arm` (`pick_example`) among replay rows (`rif_sweep.replay`: protocol, seed, split, arm,
    query_id, cluster, ndcg@10; a `baseline` arm beside it) of a frozen protocol (paper, held-out) and one seed.

    The arm's end-of-burn-in state is replayed for the question's split alone (the same clusters and schedule as the rows'
    replay); the NDCG@10 that state scores must be the row's, or ValueError.
    """
    r = rows[(rows["protocol"] == protocol) & (rows["seed"] == seed)]
    key = ["split", "query_id"]
    mine_rows = r[r["arm"] == arm.name].set_index(key)
    base_ndcg = r[r["arm"] == "baseline"].set_index(key)["ndcg@10"].reindex(mine_rows.index)
    deltas = pd.DataFrame({"cluster": mine_rows["cluster"], "baseline": base_ndcg, "ndcg": mine_rows["ndcg@10"]}).reset_index()
    pick = pick_example(deltas.assign(delta=deltas["ndcg"] - deltas["baseline"]))
    i = ctx.pools.query_ids.index(pick["query_id"])
    if protocol == PAPER:
        train = np.arange(len(ctx.pools.query_ids))
    elif protocol == HELDOUT:
        a, b = conversation_halves(ctx, seed)  # each seed its own split (rif.protocols.run_heldout)
        train = a if i in set(b.tolist()) else b
    else:
        raise ValueError(f"a {protocol} replay's suppression changes with every query; examples need a frozen protocol")
    res = run_frozen(ctx, [arm], seed, burn_in, train, np.array([i]), str(pick["split"]), snapshot_every=burn_in)
    scored = res.rows[0]
    if not np.isclose(scored["ndcg@10"], pick["ndcg"]) or scored["cluster"] != int(pick["cluster"]):
        raise ValueError(f"replaying {arm.name} on {pick['query_id']} gives NDCG@10 {scored['ndcg@10']:.4f} in cluster "
                         f"{scored['cluster']}, the rows {pick['ndcg']:.4f} in cluster {int(pick['cluster'])}")
    cluster = int(pick["cluster"])
    values = np.zeros((max([cluster + 1, *(int(s["cluster"].max()) + 1 for s in res.snapshots if len(s["cluster"]))]), ctx.n_entries))
    for s in res.snapshots:
        values[s["cluster"], s["doc_idx"]] = s["value"]
    mine = _candidates(ctx, i, arm, values, cluster)
    base = _candidates(ctx, i, Arm("baseline", "baseline", params=arm.params), None, 0)
    return _example(ctx, arm.name, pick, seed, mine, base, values[cluster], arm.params.pool_size, top)


def run_example(ctx: ReplayContext, run: Run, arm: str, seed: int | None = None, top: int = EXAMPLE_ROWS) -> Example:
    """`replay_example` for a results folder: the example question of `arm` on one seed (the paper seed by default),
    its `candidate_table` under the arm and under the baseline."""
    seed = paper_seed(run) if seed is None else seed
    pick = pick_example(query_deltas(run, arm, seed))
    states = suppression_states(ctx, run, arm, seed)
    mine = candidate_table(ctx, run, arm, pick["query_id"], seed, states)
    base = candidate_table(ctx, run, "baseline", pick["query_id"], seed)
    values = states.get(pick["split"])
    return _example(ctx, arm, pick, seed, mine, base, values[int(pick["cluster"])] if values is not None else None,
                    arm_params(run).pool_size, top)


def what_if(ctx: ReplayContext, alpha: float, eta: float, k: int, rule: str, protocol: str = "paper", seed: int = 42,
            burn_in: int = 5000, bootstrap: int = 200) -> dict:
    """Replay one custom arm next to the baseline from the cached pools; returns means and the paired delta."""
    from lethe_core.measures import stats

    arms = [Arm("baseline", "baseline"), Arm("what-if", "rif", k, rule, RIFParams(alpha=alpha, eta=eta))]
    if protocol == "paper":
        idx = np.arange(len(ctx.pools.query_ids))
        res = run_frozen(ctx, arms, seed, burn_in, idx, idx, "all", snapshot_every=0, buckets=True)
    elif protocol == "heldout":
        conversation_halves(ctx, seed)  # fails early with fewer than two conversations
        res = run_heldout(ctx, arms, seed, burn_in, snapshot_every=0)
    else:
        res = run_prequential(ctx, arms, seed, bootstrap, snapshot_every=0)
    df = pd.DataFrame(res.rows)
    base = df[df["arm"] == "baseline"]["ndcg@10"].to_numpy()
    mine = df[df["arm"] == "what-if"]["ndcg@10"].to_numpy()
    delta = stats.paired_delta_ci(mine, base, n_resamples=2000, seed=seed)
    return {"baseline": float(base.mean()), "what_if": float(mine.mean()), "delta": delta.as_dict(),
            "suppressed": res.suppressed.get("what-if", {}), "rows": df}
