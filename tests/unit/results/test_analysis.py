"""The dashboard's analysis views on constructed inputs: the inspector's explanation sentence, the harm ranking of
clusters, per-cluster and per-behaviour paired deltas with their CIs, abstention on a degenerate score scale."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lethe_core.results import analysis
from lethe_core.results.runs import Run

POOL = 30


def candidates(penalty: dict[int, float] | None = None, relevant=(), final: dict[int, int] | None = None, n: int = 60,
               control: bool = False, ids: dict[int, str] | None = None) -> pd.DataFrame:
    """A consistent candidate table of `n` union members, keyed by union rank: RRF scores 1 / (60 + rank) minus `penalty`
    give the adjusted ranks; the top POOL of those (every member for `control`) are in the pool, where the final rank is
    the adjusted rank unless `final` says otherwise."""
    union = np.arange(1, n + 1)
    pen = np.zeros(n)
    for r, p in (penalty or {}).items():
        pen[r - 1] = p
    adjusted = np.empty(n, dtype=int)
    adjusted[np.argsort(-(1.0 / (60 + union) - pen), kind="stable")] = union
    in_pool = np.ones(n, dtype=bool) if control else adjusted <= POOL
    final_rank = pd.array(np.where(in_pool, adjusted, 0), dtype="Int64")
    final_rank[~in_pool] = pd.NA
    for r, f in (final or {}).items():
        final_rank[r - 1] = f
    return pd.DataFrame({"doc_id": [(ids or {}).get(r, f"c:D1:{r}") for r in union], "union rank": union, "penalty": pen,
                         "adjusted rank": adjusted, "in pool": in_pool, "final rank": final_rank, "relevant": np.isin(union, relevant)})


def test_explain_a_relevant_turn_pushed_below_the_pool_cut():
    t = candidates({12: 0.0044}, relevant=[12], ids={12: "conv-48:D3:5"})
    s = analysis.explain(t, "rif", POOL, cluster=7, ndcg=(0.5, 0.0), n_relevant=1)
    assert s == ("NDCG@10 0.500 → 0.000: relevant turn conv-48:D3:5 fell from union rank 12 to 45, below the 30-entry pool cut, "
                 "after a penalty of 0.0044 in cluster 7, so the reranker never saw it.")


def test_explain_a_relevant_turn_lifted_into_the_pool():
    t = candidates({r: 0.1 for r in range(1, 16)}, relevant=[40], final={40: 3})
    s = analysis.explain(t, "rif", POOL, cluster=2)
    assert s == ("relevant turn c:D1:40 rose from union rank 40 to 25, into the 30-entry pool, as 15 entries above it "
                 "were penalised in cluster 2, and the reranker put it at 3.")


def test_explain_an_unchanged_turn_and_the_newcomers_above_it():
    t = candidates({30: 0.1}, relevant=[5], final={5: 12, 31: 4})
    base = candidates(relevant=[5], final={5: 8})
    s = analysis.explain(t, "rif", POOL, cluster=0, baseline=base)
    assert s == ("relevant turn c:D1:5 stayed at union rank 5, inside the 30-entry pool cut (no penalty in cluster 0), and the "
                 "reranker put it at 12 (baseline: 8), outside the top 10, with 1 entry new to the pool now above it.")


def test_explain_follows_the_relevant_turn_that_crossed_the_cut():
    t = candidates({25: 0.1}, relevant=[3, 25])
    s = analysis.explain(t, "rif", POOL, cluster=1, baseline=candidates(relevant=[3, 25]))
    assert "relevant turn c:D1:25 (1 of 2 in the union) fell from union rank 25 to 60, below the 30-entry pool cut" in s
    assert s.endswith("so the reranker never saw it.")


def test_explain_without_a_relevant_turn_in_the_union():
    t = candidates()
    assert "no relevant turn is in the first-stage union (60 candidates" in analysis.explain(t, "rif", POOL, 3, (0.0, 0.0), 2)
    assert "the query has no relevant turn" in analysis.explain(t, "rif", POOL, 3, (0.0, 0.0), 0)


def test_explain_control_reranks_the_whole_union():
    t = candidates(relevant=[45], final={45: 2}, control=True)
    s = analysis.explain(t, "control", POOL, ndcg=(0.0, 0.63), baseline=candidates(relevant=[45]))
    assert s == ("NDCG@10 0.000 → 0.630: control reranks the whole union: relevant turn c:D1:45 sits at union rank 45, below the "
                 "30-entry pool cut the baseline applies, and the reranker put it at 2 (baseline: not in its pool).")


AUDIT_Q = ["query_id", "split", "cluster", "displaced", "still displaced"]


def audit() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Cluster 0: 4 queries, 1 displaced; cluster 1: 2 queries, both displaced; entry `greet` held every pool of cluster 1."""
    queries = pd.DataFrame([("a", "all", 0, True, False), ("b", "all", 0, False, False), ("c", "all", 0, False, False),
                            ("d", "all", 0, False, False), ("e", "all", 1, True, True), ("f", "all", 1, True, False)], columns=AUDIT_Q)
    rej = [("a", 0, 1, "x", 3, 40, 0.2, True), ("b", 0, 1, "x", 5, 41, 0.2, False), ("c", 0, 2, "y", 7, 7, 0.0, False),
           ("e", 1, 3, "greet", 2, 2, 0.0, True), ("f", 1, 3, "greet", 4, 4, 0.0, True), ("f", 1, 2, "y", 6, 6, 0.0, True)]
    rejections = pd.DataFrame([(q, "all", c, d, i, b, a, s, disp) for q, c, d, i, b, a, s, disp in rej],
                              columns=list(analysis.AUDIT_REJECTIONS))
    return queries, rejections


def test_harm_ranking_normalises_by_the_clusters_queries():
    h = analysis.harm_ranking(*audit())
    assert h["cluster"].tolist() == [1, 0]  # 2 of 2 displaced before 1 of 4
    top = h.iloc[0]
    assert (top["queries"], top["displaced"], top["harm"], top["still displaced"]) == (2, 2, 1.0, 1)
    assert (top["worst entry"], top["rejected for"], top["displaced with it"]) == ("greet", 2, 2)
    assert h.iloc[1]["worst entry"] == "x" and h.iloc[1]["harm"] == 0.25


def test_chronic_entries_count_against_the_clusters_queries():
    queries, rejections = audit()
    e = analysis.chronic_entries(queries, rejections, "all", 0)
    assert e["doc_id"].tolist() == ["x", "y"]  # x displaced a query, y none
    x = e.iloc[0]
    assert (x["rejected"], x["of"], x["displaced"], x["rank before"], x["rank after"]) == (2, 4, 1, 4.0, 40.5)
    assert x["queries"] == ["a", "b"]


def test_harm_ranking_of_nothing_is_an_empty_table():
    queries, rejections = audit()
    assert analysis.harm_ranking(queries.iloc[0:0], rejections.iloc[0:0]).empty


def fake_run(per_query: pd.DataFrame, arms: list[str], **summary) -> Run:
    s = {"seeds": sorted(per_query["seed"].unique().tolist()), "protocol": "paper",
         "arms": [{"name": a, "kind": "baseline" if a == "baseline" else "rif", "k": 2, "rule": "gap"} for a in arms], **summary}
    return Run(Path("fake"), {"pipeline": {"pool_size": POOL}}, s, {"per_query.parquet": per_query})


def per_query(deltas: dict[int, list[float]], seed: int = 42, split: str = "all") -> pd.DataFrame:
    rows = []
    for cluster, ds in deltas.items():
        for k, d in enumerate(ds):
            q = f"c{cluster}:q{k}"
            base = 0.5
            rows.append({"query_id": q, "split": split, "seed": seed, "arm": "baseline", "cluster": 0, "qtype": "t", "ndcg@10": base})
            rows.append({"query_id": q, "split": split, "seed": seed, "arm": "rif", "cluster": cluster, "qtype": "t", "ndcg@10": base + d})
    return pd.DataFrame(rows)


def test_cluster_table_gives_each_cluster_its_delta_ci_and_n():
    pq = per_query({0: [0.1] * 5, 1: [-0.2, 0.0, 0.2, -0.4]})
    t = analysis.cluster_table(fake_run(pq, ["baseline", "rif"]), "rif").set_index("cluster")
    assert t.loc[0, "queries"] == 5 and t.loc[1, "queries"] == 4
    assert t.loc[0, ["delta", "delta lo", "delta hi"]].tolist() == pytest.approx([0.1, 0.1, 0.1])  # constant: a zero-width CI
    assert t.loc[1, "delta"] == pytest.approx(-0.1)
    assert t.loc[1, "delta lo"] < -0.1 < t.loc[1, "delta hi"]


def test_cluster_table_and_query_deltas_read_the_chosen_seed():
    pq = pd.concat([per_query({0: [0.1, 0.1]}, seed=42), per_query({0: [-0.3, 0.0]}, seed=43)])
    run = fake_run(pq, ["baseline", "rif"])
    assert analysis.cluster_table(run, "rif")["delta"].iloc[0] == pytest.approx(0.1)  # the paper seed by default
    assert analysis.cluster_table(run, "rif", seed=43)["delta"].iloc[0] == pytest.approx(-0.15)
    d = analysis.query_deltas(run, "rif", seed=43)
    assert d["query_id"].tolist() == ["c0:q0", "c0:q1"] and d["delta"].iloc[0] == pytest.approx(-0.3)  # worst first


def test_cluster_table_keeps_held_out_splits_apart():
    pq = pd.concat([per_query({0: [0.1, 0.1]}, split="A->B"), per_query({0: [-0.1]}, split="B->A")])
    t = analysis.cluster_table(fake_run(pq, ["baseline", "rif"]), "rif")
    assert t[["split", "cluster", "queries"]].values.tolist() == [["A->B", 0, 2], ["B->A", 0, 1]]


def behaviour_rows(arm_exact: list[int], base_exact: list[int], abstain: tuple[float, float] = (1.0, 1.0)) -> pd.DataFrame:
    rows = []
    for k, (a, b) in enumerate(zip(arm_exact, base_exact)):
        for arm, exact, ab in (("baseline", b, abstain[0]), ("rif", a, abstain[1])):
            rows.append({"query_id": f"q{k}", "split": "all", "seed": 42, "arm": arm, "cluster": 0, "qtype": "t" if k % 2 else "u",
                         "exact_episode": bool(exact), "abstain@0": ab, "abstain@2": 1.0, "top1_logit": -3.0 + k})
    return pd.DataFrame(rows)


def test_paired_deltas_are_differences_over_the_same_queries():
    run = fake_run(behaviour_rows([1, 1, 1, 0], [0, 1, 1, 0]), ["baseline", "rif"])
    d = analysis.paired_deltas(run, ["exact_episode"])
    assert d[["arm", "metric", "n"]].values.tolist() == [["rif", "exact_episode", 4]]
    assert d["delta"].iloc[0] == pytest.approx(0.25) and d["lo"].iloc[0] <= 0.25 <= d["hi"].iloc[0]
    by = analysis.paired_deltas(run, ["exact_episode"], by="qtype").set_index("qtype")
    assert by.loc["u", "delta"] == pytest.approx(0.5) and by.loc["t", "delta"] == pytest.approx(0.0) and by["n"].tolist() == [2, 2]


def test_abstention_everywhere_is_one_line_not_a_chart():
    table, line = analysis.abstention(fake_run(behaviour_rows([1, 0], [1, 0]), ["baseline", "rif"]))
    assert [c for c in table.columns if c.startswith("abstain@")] == []
    assert line.startswith("At T = 0 every arm abstains on 100% of queries; at T = 2 every arm abstains on 100% of queries")
    assert "top-1 scores run from -3.00 to -2.00" in line and "cannot tell the arms apart" in line


def test_abstention_keeps_the_thresholds_that_tell_arms_apart():
    table, line = analysis.abstention(fake_run(behaviour_rows([1, 0], [1, 0], abstain=(1.0, 0.0)), ["baseline", "rif"]))
    assert [c for c in table.columns if c.startswith("abstain@")] == ["abstain@0"]
    assert table.set_index("arm")["abstain@0"].to_dict() == {"baseline": 1.0, "rif": 0.0}
    assert line.startswith("At T = 2 every arm abstains on 100%") and line.endswith(").")


def test_state_matrix_keeps_entries_of_different_conversations_apart():
    ids = ["conv-1:D3:5", "conv-2:D3:5", "conv-3:D1:1"]
    values = np.array([[0.5, 0.4, 0.0], [0.0, 0.3, 0.0]])
    m = analysis.state_matrix(values, ids, top=5)
    assert list(m.columns) == ["conv-2:D3:5", "conv-1:D3:5"]  # summed over clusters: 0.7, then 0.5; the unsuppressed one left out
    assert m.loc[0, "conv-1:D3:5"] == 0.5 and m.loc[1, "conv-1:D3:5"] == 0.0
    assert analysis.state_matrix(values, ids, top=5, clusters=[1]).columns.tolist() == ["conv-2:D3:5"]


def test_pick_example_takes_the_largest_change_the_loss_first_on_a_tie():
    d = pd.DataFrame({"query_id": ["q1", "q2", "q3", "q4"], "delta": [0.2, -0.3, 0.3, 0.0]})
    assert analysis.pick_example(d)["query_id"] == "q2"
    assert analysis.pick_example(d.assign(delta=0.0))["query_id"] == "q1"  # nothing moved: the first by id


def test_example_table_follows_the_relevant_turn_and_the_turns_crossing_the_cut():
    for_text = {"text": [f"turn {r} " + "word " * 30 for r in range(1, 61)]}
    mine = candidates({12: 0.1}, relevant=[12]).assign(**for_text)
    base = candidates(relevant=[12]).assign(**for_text)
    t = analysis.example_table(mine, base, top=5, width=20)
    assert len(t) == 5 and t["turn"].iloc[-1] == "c:D1:12"  # cut from the pool: listed last
    rel = t.set_index("turn").loc["c:D1:12"]
    assert (rel["relevant"], rel["first-stage rank"], rel["reranker pool"], rel["answer rank"]) == ("yes", "12 → 60", "in → out", "12 → —")
    assert "c:D1:31" in set(t["turn"])  # the turn that moved into the pool in its place
    assert t["text"].str.len().max() == 20 and t["text"].iloc[0].endswith("…")


def test_replay_example_reproduces_the_rows_and_says_where_the_relevant_turn_went():
    from tests.unit.rif.test_rif import tiny_context

    from lethe_core.experiments import rif_sweep as rs
    from lethe_core.rif.replay import Arm
    from lethe_core.rif.state import RIFParams

    ctx = tiny_context()
    arm = Arm("clustered2-gap", "rif", 2, "gap", RIFParams(alpha=1.0))
    rows = rs.replay(ctx, [arm], ("paper", "heldout"), [42], 200).rows
    for protocol in ("paper", "heldout"):
        ex = analysis.replay_example(ctx, arm, rows, protocol, 42, 200)
        row = rows[(rows["protocol"] == protocol) & (rows["arm"] == arm.name) & (rows["query_id"] == ex.query_id)]
        assert ex.ndcg[1] == pytest.approx(row["ndcg@10"].iloc[0]) and ex.cluster == row["cluster"].iloc[0]
        assert 0 < len(ex.table) <= analysis.EXAMPLE_ROWS and "yes" in set(ex.table["relevant"])
        assert ex.sentence.startswith("Example (") and "relevant turn" in ex.sentence and "cluster's list suppresses" in ex.sentence
    with pytest.raises(ValueError):
        analysis.replay_example(ctx, arm, rows.assign(**{"ndcg@10": rows["ndcg@10"] + 0.5}), "paper", 42, 200)
