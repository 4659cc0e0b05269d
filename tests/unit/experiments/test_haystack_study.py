"""Issue 14's size-curve study: an end-to-end run on two tiny haystacks, resuming, config errors, computed verdicts."""

import pandas as pd
import pytest

from lethe_core.experiments import haystack_study as hs
from lethe_core.experiments.haystack_study import GAIN_ARMS, HaystackStudyConfig, bucket_gains, results_section, saturation_of, verdicts
from lethe_core.retrieval.pipeline import PipelineConfig

TINY = dict(sizes=(7000, 8000), locomo=False, full=False, protocols=("paper", "prequential"), seeds=1, burn_in=200, ks=(30,),
            reranker="test:lexical", backend="torch", limit_queries=60, pipeline=PipelineConfig(encoder="test:hash"), progress=False)


def test_study_end_to_end_and_resume(tmp_path, monkeypatch):
    s = HaystackStudyConfig(**TINY).run(tmp_path)
    out = tmp_path / "haystack_study"
    assert [x["turns"] for x in s["sizes"]] == [7000, 8000]
    assert s["reranker"] == "test:lexical" and all(x["reranker"] == "test:lexical" for x in s["sizes"])
    for name in ("summary.json", "size_curve.md", "gains_paper.html", "gains_prequential.html", "saturation.html", "buckets.html",
                 "behaviour_locomo-haystack-8000_paper.csv", "behaviour_locomo-haystack-8000_prequential.csv"):
        assert (out / name).is_file(), name
    chart = (out / "saturation.html").read_text()
    assert 'src="plotly.min.js"' in chart and "cdn" not in chart.lower() and (out / "plotly.min.js").stat().st_size > 1_000_000
    table = (out / "size_curve.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| locomo-haystack")]
    assert [r.split(" | ")[0] for r in rows] == ["| locomo-haystack-7000", "| locomo-haystack-8000"]
    assert "test:lexical" in table
    for size in s["sizes"]:
        assert size["filler_turns"] == size["turns"] - 5882
        for p in ("paper", "prequential"):
            rec = size["protocols"][p]
            assert set(rec["gains"]) == set(GAIN_ARMS)
            assert all(0.0 <= v <= 1.0 for v in rec["saturation"].values()) and rec["saturation_seeds"] == [42]
            g = rec["gains"]["clustered30-gap"]
            assert g["ci"][0] <= g["delta"] <= g["ci"][1]
        assert set(size["protocols"]["paper"]["buckets"]) <= {"hot", "cold", "unseen"}
        assert "buckets" not in size["protocols"]["prequential"]
        assert 0.0 <= size["duplicates"]["top30"]["share"] <= 1.0 and size["duplicates"]["top30"]["lists"] == 60
    assert s["behaviour"]["dataset"] == "locomo-haystack-8000" and set(s["behaviour"]["protocols"]) == {"paper", "prequential"}
    assert {r["metric"] for r in s["behaviour"]["protocols"]["paper"]["all"]} >= {"ndcg@10", "exact_episode"}
    section = results_section(s)
    assert "Behaviour decomposition of clustered30-gap at `locomo-haystack-8000`" in section and "| exact_episode | " in section
    pools = [x for x in s["stages"] if x["stage"] == "pools"]
    assert [x["status"] for x in pools] == ["built", "built"] and all(x["pairs_scored"] > 0 for x in pools)

    # a second run reads every finished size; with one size's record gone, that size is recomputed from cached pools.
    # A plotly.js bundle cut short by a kill is replaced, not kept because it exists.
    bundle = (out / "plotly.min.js").read_text(encoding="utf-8")
    (out / "plotly.min.js").write_text(bundle[:1000], encoding="utf-8")
    s2 = HaystackStudyConfig(**TINY).run(tmp_path)
    assert (out / "plotly.min.js").read_text(encoding="utf-8") == bundle
    assert [x["status"] for x in s2["stages"]] == ["stored", "stored"]
    assert s2["sizes"] == s["sizes"] and all(x["seed_convention"] == "seed mean per query" for x in s["sizes"])
    (out / "sizes" / "locomo-haystack-8000.json").unlink()
    monkeypatch.setattr(hs.PoolBuilder, "_score", lambda *a, **k: pytest.fail("a stored pool was rescored"))
    s3 = HaystackStudyConfig(**TINY).run(tmp_path)
    assert [(x["dataset"], x["stage"], x["status"]) for x in s3["stages"]] == [
        ("locomo-haystack:7000", "size", "stored"), ("locomo-haystack:8000", "pools", "cached"), ("locomo-haystack:8000", "size", "computed")]
    assert s3["sizes"][1]["protocols"]["paper"]["gains"] == s["sizes"][1]["protocols"]["paper"]["gains"]  # deterministic
    # another study config (seeds) does not reuse a stored size
    assert HaystackStudyConfig(**{**TINY, "seeds": 2}).key() != HaystackStudyConfig(**TINY).key()


def test_ray_builds_the_pools(tmp_path, monkeypatch):
    import lethe_core.pools.distributed as distributed

    seen = []

    def fake(builder, config, progress=True):  # the Ray path itself is tested in test_distributed.py
        seen.append(config)
        return builder.build()

    monkeypatch.setattr(distributed, "build_pools_on_ray", fake)
    cfg = {**TINY, "sizes": (7000,), "protocols": ("paper",), "ray": True, "workers": 3, "ray_address": "10.0.0.1:6379"}
    s = HaystackStudyConfig(**cfg).run(tmp_path)
    assert [(c.workers, c.address) for c in seen] == [(3, "10.0.0.1:6379")] and s["sizes"][0]["turns"] == 7000


@pytest.mark.parametrize("change, message", [
    ({"seeds": 0}, "seeds must be >= 1"),
    ({"protocols": ("paper", "online")}, "protocols must be"),
    ({"sizes": (8000, 7000)}, "strictly increasing"),
    ({"granularities": ("word",)}, "granularities"),
    ({"ks": (10, 50)}, "must hold 30"),
    ({"ray_address": "127.0.0.1:6379"}, "needs ray=True"),
    ({"sizes": (), "locomo": False, "full": False}, "no size"),
])
def test_bad_config_fails_at_once(change, message):
    with pytest.raises(ValueError, match=message):
        HaystackStudyConfig(**{**TINY, **change})


@pytest.mark.parametrize("sizes, message", [((5000, 7000), "exceed LoCoMo's 5,882"), ((7000, 10**6), "not below the full locomo-haystack")])
def test_sizes_checked_before_any_pool(tmp_path, monkeypatch, sizes, message):
    monkeypatch.setattr(hs, "PoolBuilder", lambda *a, **k: pytest.fail("work started before the sizes were checked"))
    with pytest.raises(ValueError, match=message):
        HaystackStudyConfig(**{**TINY, "sizes": sizes}).run(tmp_path)


def test_datasets_of_the_curve():
    cfg = HaystackStudyConfig(**{**TINY, "locomo": True, "full": True, "granularities": ("turn", "message")})
    assert cfg.datasets() == ["locomo", "locomo-haystack:7000", "locomo-haystack:8000", "locomo-haystack",
                              "locomo-haystack-msg:7000", "locomo-haystack-msg:8000", "locomo-haystack-msg"]


def test_saturation_averages_splits_and_seeds():
    arm = lambda name, docs: {"name": name, "suppressed_entries": {"A->B": {"entries": 0, "docs": docs[0]}, "B->A": {"entries": 0, "docs": docs[1]}}}
    rif = {"seeds": [42, 43], "arms": [arm("global-gap", (60, 40)), arm("clustered30-gap", (10, 30))]}
    sat, seeds = saturation_of(rif, 100)
    assert sat == {"global-gap": 0.5, "clustered30-gap": 0.2} and seeds == [42]  # first seed only without suppressed_by_seed
    rif["suppressed_by_seed"] = {"42": {a["name"]: a["suppressed_entries"] for a in rif["arms"]},
                                 "43": {"global-gap": {"all": {"entries": 0, "docs": 70}}, "clustered30-gap": {}}}
    sat, seeds = saturation_of(rif, 100)
    assert sat == {"global-gap": pytest.approx(0.6), "clustered30-gap": pytest.approx(0.1)} and seeds == [42, 43]


def test_bucket_gains_pool_the_seeds():
    # seed 42: the arm gains 0.4 on q0 (hot); seed 43: 0.2 on q1, which that seed's burn-in left cold (hot in seed 42)
    rows = []
    for seed, gains, buckets in ((42, [0.4, 0.0, 0.0], ["hot", "hot", "cold"]), (43, [0.0, 0.2, 0.0], ["hot", "cold", "cold"])):
        for i in range(3):
            for arm, gain in (("baseline", 0.0), (GAIN_ARMS[0], gains[i])):
                rows.append({"seed": seed, "query_id": f"c0:q{i}", "split": "all", "arm": arm, "bucket": buckets[i], "ndcg@10": 0.5 + gain})
    b = bucket_gains(pd.DataFrame(rows), 42)
    assert b["hot"]["n"] == 3 and b["hot"]["queries"] == 2 and b["hot"]["delta"] == pytest.approx(0.4 / 3)  # seed 42 alone: 0.2
    assert b["cold"]["n"] == 3 and b["cold"]["queries"] == 2 and b["cold"]["delta"] == pytest.approx(0.2 / 3)  # seed 42 alone: 0
    assert "unseen" not in b and all(g["ci"][0] <= g["delta"] <= g["ci"][1] for g in b.values())


def _gain(delta, half=0.01, p=0.5, vs_control=-0.01):
    return {"delta": delta, "ci": [delta - half, delta + half], "p": p, "p_holm": p,
            "vs_control": {"mean": vs_control, "ci": [vs_control - half, vs_control + half]}}


def _summary(gains, saturations, p=0.5):
    sizes = []
    for turns, g, sat in zip((5882, 144607), gains, saturations):
        sizes.append({"dataset": f"size-{turns}", "turns": turns, "duplicates": {"top30": {"share": 0.01}},
                      "systems": {n: {"ndcg@10": 0.5, "ndcg@10_ci": [0.45, 0.55]} for n in ("rrf", "full", "control")},
                      "protocols": {"paper": {"gains": {"clustered30-gap": _gain(g, p=p), "global-gap": _gain(0.0), "control": _gain(0.01)},
                                              "saturation": {"global-gap": sat, "clustered30-gap": sat / 2}, "saturation_seeds": [42]}}})
    return {"protocols": ["paper"], "seeds": [42], "reranker": "trained:x", "sizes": sizes, "charts": {"saturation": ["saturation.html"]}}


def test_results_section_follows_the_numbers():
    weak = results_section(_summary((0.003, 0.004), (0.6, 0.05)))
    strong = results_section(_summary((0.003, 0.05), (0.6, 0.05), p=0.001))
    assert weak != strong
    assert "claim does not hold here" in weak and "claim holds here" in strong
    assert "does not support the saturation explanation" in weak and "consistent with the paper's saturation explanation" in strong
    assert "| size-144607 | 144,607 |" in strong and "[saturation](data/results/haystack_study/saturation.html)" in strong
    assert "trained:x" in strong and "seed mean per query" in strong
    flat = verdicts(_summary((0.003, 0.05), (0.05, 0.2)))[-1]
    assert "did not fall with size" in flat
    # the reading is a trend test over every size, and the control arm's share is read beside it
    assert "per tenfold of turns" in strong and "rises with size" in strong and "shows no trend" in weak
    assert "control arm" in strong and "no trend is left once the deeper union is accounted for" in strong


def test_splice_replaces_or_inserts_the_section():
    section = results_section(_summary((0.003, 0.05), (0.6, 0.05)), images={"saturation": "docs/figures/haystack/saturation.svg"})
    assert "![saturation](docs/figures/haystack/saturation.svg)" in section
    doc = "# RESULTS\n\n## Protocol: paper\n\ntable\n\n## Changes since the first release\n\nlater\n"
    once = hs.splice_section(doc, section)
    assert once.index("## Protocol: paper") < once.index(hs.SECTION_TITLE) < once.index("## Changes since")
    again = hs.splice_section(once, results_section(_summary((0.003, 0.004), (0.6, 0.05))))
    assert again.count(hs.SECTION_TITLE) == 1 and "claim does not hold here" in again and "claim holds here" not in again
    assert again.split(hs.SECTION_TITLE)[0] == once.split(hs.SECTION_TITLE)[0] and again.endswith("## Changes since the first release\n\nlater\n")
    assert hs.splice_section("# only a title\n", section).startswith("# only a title\n\n" + hs.SECTION_TITLE)


def test_publish_writes_svg_charts_and_the_section(tmp_path):
    from lethe_core.util.figures import static_export_problem

    if static_export_problem():  # kaleido draws with the Chromium of `make browser`
        pytest.skip(static_export_problem())
    results_md = tmp_path / "RESULTS.md"
    results_md.write_text("# RESULTS\n\n## Changes since the first release\n")
    hs.publish(_summary((0.003, 0.05), (0.6, 0.05)), results_md, tmp_path / "figs")
    svg = (tmp_path / "figs" / "saturation.svg").read_text()
    assert svg.lstrip().startswith("<svg") and "trained:x" in svg
    assert "![saturation](figs/saturation.svg)" in results_md.read_text()


def test_each_granularity_is_its_own_line():
    sizes = [{"dataset": d, "turns": t} for d, t in [("locomo-haystack-msg", 263994), ("locomo", 5882), ("locomo-haystack-25000", 25000),
                                                    ("locomo-haystack-msg-25000", 25000), ("locomo-haystack", 144607)]]
    lines = hs.curves(sizes)
    assert {k: [s["dataset"] for s in v] for k, v in lines.items()} == {
        "turn": ["locomo", "locomo-haystack-25000", "locomo-haystack"],
        "message": ["locomo", "locomo-haystack-msg-25000", "locomo-haystack-msg"]}
    assert list(hs.curves(sizes[1:3])) == ["turn"]
    one = _summary((0.003, 0.05), (0.6, 0.05))
    names = [t.name for t in hs.figures(one)["gains_paper"].data]
    assert names == list(GAIN_ARMS)  # one granularity: one line per arm, named by the arm alone
