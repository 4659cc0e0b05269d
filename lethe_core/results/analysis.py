"""Views over results and cached pools, shared by the dashboard and the notebooks.

Everything here reads a results folder (`lethe_core.results.runs.Run`) and, where a view needs the
candidates themselves, the cached pools (`ReplayContext`); nothing runs a model.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lethe_core.results.runs import Run
from lethe_core.rif.protocols import ReplayContext, conversation_halves, run_frozen, run_heldout, run_prequential
from lethe_core.rif.replay import Arm, retrieve
from lethe_core.rif.state import RIFParams, SuppressionState
from lethe_core.retrieval.second_stage import teacher_order

BEHAVIOURS = ("exact_episode", "sibling_confusion", "wrong_family")


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


def first_seed(run: Run) -> pd.DataFrame:
    pq = run.per_query
    return pq[pq["seed"] == run.summary["seeds"][0]]


def cluster_table(run: Run, arm: str) -> pd.DataFrame:
    """Per cluster of `arm`: queries, baseline and arm NDCG@10, delta."""
    pq = first_seed(run)
    mine = pq[pq["arm"] == arm].set_index(["query_id", "split"])
    base = pq[pq["arm"] == "baseline"].set_index(["query_id", "split"])["ndcg@10"].reindex(mine.index)
    df = mine.assign(baseline=base.to_numpy()).reset_index()
    out = df.groupby("cluster").agg(queries=("query_id", "size"), baseline=("baseline", "mean"), ndcg=("ndcg@10", "mean"))
    return out.assign(delta=out["ndcg"] - out["baseline"]).reset_index()


def snapshot_steps(run: Run, arm: str) -> list[int]:
    s = run.snapshots
    return sorted(s.loc[s["arm"] == arm, "step"].unique().tolist())


def suppression_matrix(run: Run, arm: str, step: int, top: int = 25, clusters: list[int] | None = None) -> pd.DataFrame:
    """Clusters x the `top` most suppressed entries (summed over clusters) at one snapshot step."""
    s = run.snapshots
    s = s[(s["arm"] == arm) & (s["step"] == step)]
    if clusters:
        s = s[s["cluster"].isin(clusters)]
    if s.empty:
        return pd.DataFrame()
    first_split = s["split"].iloc[0]
    s = s[s["split"] == first_split]
    best = s.groupby("doc_id")["value"].sum().nlargest(top).index
    return s[s["doc_id"].isin(best)].pivot_table(index="cluster", columns="doc_id", values="value", fill_value=0.0)[list(best)]


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


def chronic_false_positives(ctx: ReplayContext, run: Run, arm: str, cluster: int, top: int = 15) -> pd.DataFrame:
    """Entries that most often entered the baseline reranker pool of this cluster's queries and were rejected.

    rejected = in the top-P pool, not in the teacher's top-10 (what RIF reads) and not relevant; displaced = queries where
    the entry held a pool slot while a relevant turn sat below the cut; rank before/after = the entry's
    mean first-stage rank in the union without and with the arm's final suppression.
    """
    p, j = ctx.pools, ctx.judgements
    pq = first_seed(run)
    rows = pq[(pq["arm"] == arm) & (pq["cluster"] == cluster)]
    # Held-out runs fit clusters per direction: cluster ids only mean something within one split.
    split = rows["split"].iloc[0] if len(rows) else None
    rows = rows[rows["split"] == split]
    state = final_state(run, arm, ctx.n_entries, cluster + 1, split)
    alpha = run.config.get("alpha", 0.3)
    P = run.config["pipeline"]["pool_size"]
    pos = {q: i for i, q in enumerate(p.query_ids)}
    stats: dict[int, dict] = {}
    for qid in rows["query_id"].unique():
        i = pos[qid]
        r = p.rows(i)
        docs, grade = p.doc_idx[r], j.grade[r]
        pool = np.arange(min(P, len(docs)))
        answer = set(pool[teacher_order(p.calibrated[r][pool])][:10].tolist())
        adjusted = p.rrf[r] - alpha * state[cluster, docs]
        rank_after = np.empty(len(docs), dtype=int)
        rank_after[np.argsort(-adjusted, kind="stable")] = np.arange(len(docs))
        relevant_below = bool((grade[P:] > 0).any())
        for pos_in_union in pool:
            if grade[pos_in_union] > 0 or pos_in_union in answer:
                continue
            d = int(docs[pos_in_union])
            e = stats.setdefault(d, {"rejected": 0, "displaced": 0, "rank_before": [], "rank_after": [], "queries": []})
            e["rejected"] += 1
            e["displaced"] += int(relevant_below)
            e["rank_before"].append(int(pos_in_union))
            e["rank_after"].append(int(rank_after[pos_in_union]))
            e["queries"].append(qid)
    corpus = ctx.dataset.corpus
    out = [{"doc_id": corpus.ids[d], "rejected": e["rejected"], "displaced": e["displaced"],
            "rank before": float(np.mean(e["rank_before"])), "rank after": float(np.mean(e["rank_after"])),
            "suppression": float(state[cluster, d]), "session": corpus[d].session_id, "conversation": corpus[d].conversation_id,
            "text": corpus[d].text, "queries": e["queries"]} for d, e in stats.items()]
    if not out:
        return pd.DataFrame(columns=["doc_id", "rejected", "displaced", "rank before", "rank after", "suppression", "session", "conversation", "text", "queries"])
    return pd.DataFrame(out).sort_values(["rejected", "suppression"], ascending=False).head(top).reset_index(drop=True)


def trajectory(run: Run, arm: str, cluster: int, doc_ids: list[str]) -> pd.DataFrame:
    s = run.snapshots
    s = s[(s["arm"] == arm) & (s["cluster"] == cluster) & (s["doc_id"].isin(doc_ids))]
    return s[s["split"] == s["split"].iloc[0]][["step", "doc_id", "value"]] if len(s) else s[["step", "doc_id", "value"]]


def behaviour_table(run: Run, by: str | None = None) -> pd.DataFrame:
    """Mean exact_episode / sibling_confusion / wrong_family (and abstain@T) per arm, optionally per `by` column."""
    pq = first_seed(run)
    cols = [*BEHAVIOURS, "abstain@0", "abstain@2", "abstain@4"]
    keys = ["arm"] + ([by] if by else [])
    return pq.groupby(keys)[cols].mean().reset_index()


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


def candidate_table(ctx: ReplayContext, run: Run, arm: str, query_id: str) -> pd.DataFrame:
    """Every union member of one query under `arm`, ranks 1-based, in adjusted first-stage order.

    bm25 / dense rank: the first-stage legs (<NA>: not retrieved by that leg); penalty: alpha x the arm's final
    suppression (RIF arms; 0 otherwise); adjusted rank: first-stage (RRF) rank after the penalty; in pool: the member
    went to the reranker (the top-P of the adjusted order, or the whole union for `control`); final rank: the
    position in the arm's answer, the same order the replay scored (`per_query.parquet`'s top10), <NA> when the
    member was cut from the reranker's pool. Built through the replay's own `retrieve`, so the kinds cannot drift apart.
    """
    p, j = ctx.pools, ctx.judgements
    i = p.query_ids.index(query_id)
    r = p.rows(i)
    kind = arm_kinds(run).get(arm, "rif")
    pq = first_seed(run)
    row = pq[(pq["arm"] == arm) & (pq["query_id"] == query_id)]
    cluster = int(row["cluster"].iloc[0]) if len(row) and kind == "rif" else 0
    alpha = run.config.get("alpha", 0.3)
    P = run.config["pipeline"]["pool_size"]
    params = RIFParams(alpha=alpha, pool_size=P)  # eager decay cannot be replayed from snapshots: values as stored
    state = None
    if kind == "rif":
        state = SuppressionState(cluster + 1, ctx.n_entries, params)
        state.values = final_state(run, arm, ctx.n_entries, cluster + 1, row["split"].iloc[0] if len(row) else None)
    docs = p.doc_idx[r]
    penalty = alpha * state.values[cluster, docs] if state is not None else np.zeros(len(docs))
    adjusted = p.rrf[r] - penalty
    adj_rank = np.empty(len(docs), dtype=int)
    adj_rank[np.argsort(-adjusted, kind="stable")] = np.arange(len(docs))
    ret = retrieve(p, i, Arm(arm, kind, params=params), state, cluster, 0, ctx.mode)
    final_rank = np.full(len(docs), -1)
    final_rank[ret.order] = np.arange(len(ret.order))
    in_pool = np.zeros(len(docs), dtype=bool)
    in_pool[ret.pool] = True
    corpus = ctx.dataset.corpus
    out = pd.DataFrame({
        "doc_id": [corpus.ids[d] for d in docs], "bm25 rank": _rank1(p.bm25_rank[r]), "dense rank": _rank1(p.dense_rank[r]),
        "rrf": p.rrf[r], "penalty": penalty, "adjusted rank": adj_rank + 1, "in pool": in_pool, "logit": p.calibrated[r],
        "final rank": _rank1(final_rank), "relevant": j.grade[r] > 0, "text": [corpus[d].text for d in docs],
    })
    return out.sort_values("adjusted rank").reset_index(drop=True)


def what_if(ctx: ReplayContext, alpha: float, eta: float, k: int, rule: str, protocol: str = "paper", seed: int = 42,
            burn_in: int = 5000, bootstrap: int = 200) -> dict:
    """Replay one custom arm next to the baseline from the cached pools; returns means and the paired delta."""
    from lethe_core.measures import stats

    arms = [Arm("baseline", "baseline"), Arm("what-if", "rif", k, rule, RIFParams(alpha=alpha, eta=eta))]
    if protocol == "paper":
        idx = np.arange(len(ctx.pools.query_ids))
        res = run_frozen(ctx, arms, seed, burn_in, idx, idx, "all", snapshot_every=0, buckets=True)
    elif protocol == "heldout":
        conversation_halves(ctx)
        res = run_heldout(ctx, arms, seed, burn_in, snapshot_every=0)
    else:
        res = run_prequential(ctx, arms, seed, bootstrap, snapshot_every=0)
    df = pd.DataFrame(res.rows)
    base = df[df["arm"] == "baseline"]["ndcg@10"].to_numpy()
    mine = df[df["arm"] == "what-if"]["ndcg@10"].to_numpy()
    delta = stats.paired_delta_ci(mine, base, n_resamples=2000, seed=seed)
    return {"baseline": float(base.mean()), "what_if": float(mine.mean()), "delta": delta.as_dict(),
            "suppressed": res.suppressed.get("what-if", {}), "rows": df}
