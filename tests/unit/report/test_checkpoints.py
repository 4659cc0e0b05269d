import json

import pytest

import numpy as np

from lethe_core.report.checkpoints import MIME, VERDICTS, Claim, Finding, json_safe, judge, read_finding
from lethe_core.report.notebooks import discover, index_forest, polarity, scaled, stamp, write_index


REF = 0.02  # a reference effect of +0.02: the default margin is half of it, 0.01


def effect(delta, ci, **kw):
    return judge(Claim("Δ", delta, ci, reference=kw.pop("reference", REF), **kw))


@pytest.mark.parametrize("ci, outcome, words", [
    ((0.012, 0.03), "holds", "the CI clears it"),
    ((0.01, 0.03), "holds", "the CI clears it"),  # the margin itself is reached
    ((0.002, 0.03), "smaller than claimed", "a size beyond it is not excluded"),
    ((0.002, 0.008), "smaller than claimed", "upper end stays below it too"),
    ((-0.004, 0.02), "inconclusive", "compatible with both the margin and zero"),
    ((0.0, 0.012), "inconclusive", "compatible with both"),  # touching zero does not clear it
    ((-0.004, 0.006), "does not hold", "within ±0.0100 of zero"),
    ((-0.03, -0.012), "does not hold", "opposite side of zero"),
    ((-0.03, 0.004), "does not hold", "cannot tell no effect from a reversal"),
])
def test_effect_claims_read_the_ci_against_the_margin_and_zero(ci, outcome, words):
    j = effect(sum(ci) / 2, ci)
    assert (j.outcome, j.verdict) == (outcome, outcome) and words in j.reason
    assert "95 % CI over queries" in j.reason and "+0.0200" in j.reason


def test_a_claimed_drop_is_the_mirror_image():
    assert effect(-0.02, (-0.03, -0.012), direction=-1, reference=-0.02).outcome == "holds"
    assert effect(0.02, (0.012, 0.03), direction=-1, reference=-0.02).outcome == "does not hold"
    assert effect(-0.005, (-0.008, -0.002), direction=-1, reference=-0.02).outcome == "smaller than claimed"


def test_the_point_estimates_sign_does_not_decide():
    """The same CI gives the same outcome whatever side of zero the point estimate falls on."""
    assert effect(0.001, (-0.004, 0.006)).outcome == effect(-0.001, (-0.004, 0.006)).outcome == "does not hold"
    assert judge(Claim("Δ", 0.003, (-0.01, 0.012), kind="direction")).outcome == "inconclusive"
    assert judge(Claim("Δ", -0.003, (-0.012, 0.01), kind="direction")).outcome == "inconclusive"


def test_the_share_sets_the_margin():
    assert effect(0.008, (0.005, 0.011), share=0.25).outcome == "holds"  # margin 0.005
    assert effect(0.008, (0.005, 0.011), share=1.0).outcome == "smaller than claimed"  # margin 0.02


@pytest.mark.parametrize("ci, outcome", [
    ((-0.004, 0.004), "holds"),
    ((-0.012, 0.004), "inconclusive"),
    ((0.002, 0.03), "inconclusive"),
    ((0.006, 0.03), "does not hold"),
    ((-0.03, -0.005), "does not hold"),
    ((0.0, 0.0), "holds"),  # an exact null is inside any margin
])
def test_null_claims_are_equivalence_tests_on_the_90_percent_ci(ci, outcome):
    j = judge(Claim("Δ", sum(ci) / 2, ci, kind="null", margin=0.005))
    assert j.outcome == outcome and "90 % CI over queries" in j.reason and "TOST" in j.reason


def test_direction_only_claims_say_so():
    j = judge(Claim("Δ", 0.02, (0.01, 0.03), kind="direction"))
    assert j.outcome == "holds" and "direction only" in j.reason
    assert judge(Claim("Δ", -0.02, (-0.03, -0.01), kind="direction")).outcome == "does not hold"
    assert judge(Claim("Δ", -0.02, (-0.03, -0.01), kind="direction", direction=-1)).outcome == "holds"


def test_an_exact_zero_is_a_null_never_an_opposite_sign():
    for kind, extra in (("effect", {"reference": REF}), ("direction", {})):
        j = judge(Claim("Δ", 0.0, (0.0, 0.0), kind=kind, direction=-1 if kind == "direction" else 1, **extra))
        assert j.outcome == "untestable" and "nothing changed" in j.reason and "not an opposite sign" in j.reason


def test_untestable_says_why():
    j = effect(0.0, (-0.001, 0.001), untestable="no relevant turn was merged")
    assert j.verdict == "untestable" and "no relevant turn was merged" in j.reason
    assert judge(Claim("Δ", float("nan"), (float("nan"), float("nan")), kind="direction")).outcome == "untestable"


def test_fragile_when_only_the_query_level_ci_excludes_zero():
    j = effect(0.02, (0.012, 0.03), conversation_ci=(-0.002, 0.04))
    assert j.verdict == "holds (fragile)" and "conversation-level 95 % CI [−0.0020, +0.0400]" in j.reason
    assert "conversation-level CI alone reads: inconclusive" in j.reason
    assert effect(0.02, (0.012, 0.03), conversation_ci=(0.011, 0.035)).verdict == "holds"
    assert effect(0.005, (0.002, 0.008), conversation_ci=(-0.01, 0.02)).verdict == "smaller than claimed (fragile)"
    assert effect(0.0, (-0.004, 0.006), conversation_ci=(-0.02, 0.02)).verdict == "does not hold"  # never excluded zero
    j = judge(Claim("Δ", 0.003, (0.001, 0.004), kind="null", margin=0.005, conversation_ci=(-0.001, 0.006)))
    assert j.verdict == "holds (fragile)" and "90 % CI" in j.reason


def test_claims_refuse_what_they_cannot_read():
    with pytest.raises(ValueError, match="claimed side"):
        Claim("Δ", 0.01, (0.0, 0.02), reference=-0.02)  # the reference's effect has the other sign
    with pytest.raises(ValueError, match="margin"):
        Claim("Δ", 0.01, (0.0, 0.02), kind="null")
    with pytest.raises(ValueError, match="lo, hi"):
        Claim("Δ", 0.01, (0.02, 0.0), kind="direction")
    with pytest.raises(ValueError, match="kind"):
        Claim("Δ", 0.01, (0.0, 0.02), kind="partly")


def test_the_primary_claim_decides_and_secondary_ones_are_listed():
    worse = Claim("clustered − baseline", -0.009, (-0.015, -0.003), reference=0.0172)
    better = Claim("clustered − global", 0.0106, (0.004, 0.0171), kind="direction")
    f = Finding.from_claims(worse, [better], checkpoint=12, title="t", claim="c", reference="r", ours="o")
    assert f.verdict == "does not hold" and f.why.startswith("clustered − baseline")
    assert [(c["role"], c["verdict"]) for c in f.claims] == [("primary", "does not hold"), ("secondary", "holds")]
    assert "**Secondary claims**" in f.markdown() and "- **holds** (direction)" in f.markdown()
    for row in f.claims:  # each listed claim re-judges to its own outcome from the inputs it records
        fields = {k: row[k] for k in Claim.__dataclass_fields__}
        assert judge(Claim(**fields)).verdict == row["verdict"]


def test_finding_round_trips_through_notebook_outputs(tmp_path):
    f = Finding.from_claims(Claim("Δ", 0.02, (0.012, 0.03), reference=REF), [Claim("Δ2", 0.0, (-0.01, 0.01), kind="direction")],
                            checkpoint=12, title="t", claim="c", reference="r", ours="o", numbers={"x": 1.5})
    bundle = f._repr_mimebundle_()
    assert "holds" in bundle["text/markdown"]
    nb = {"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data", "data": bundle}]}]}
    path = tmp_path / "x.ipynb"
    path.write_text(json.dumps(nb))
    assert read_finding(path) == f
    for word in ("maybe", "partly", "untestable (fragile)"):
        with pytest.raises(ValueError):
            Finding(checkpoint=1, title="t", claim="c", reference="r", ours="o", verdict=word, why="")
    assert "smaller than claimed (fragile)" in VERDICTS


def test_the_index_reads_a_recorded_finding_by_the_current_rule(tmp_path):
    """A notebook run under an older rule or wording (here: an ASCII minus and a stale verdict) is read back re-judged
    from the inputs it recorded; an undefined interval (NaN, written as null) stays untestable."""
    f = Finding.from_claims(Claim("Δ", 0.004, (-0.00003, 0.012), reference=REF),
                            [Claim("Δ2", float("nan"), (float("nan"), float("nan")), kind="direction")],
                            checkpoint=7, title="t", claim="c", reference="r", ours="o")
    stale = json_safe(f._repr_mimebundle_()[MIME]) | {"verdict": "holds", "why": "Δ is -0.0040 [-0.0000, +0.0090]"}
    stale["claims"][0] |= {"verdict": "holds", "reason": "old"}
    path = tmp_path / "x.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data", "data": {MIME: stale}}]}]}))
    back = read_finding(path)
    assert back.verdict == f.verdict == "inconclusive" and back.why == f.why and "[−0.00003, +0.0120]" in back.why
    assert back.claims[0]["reason"] == f.claims[0]["reason"] and back.claims[1]["verdict"] == "untestable"


def test_stamp_changes_with_source_and_parameters(tmp_path):
    nb = tmp_path / "99_x.py"
    nb.write_text("# %%\nx = 1\n")
    a = stamp(nb, {})
    assert stamp(nb, {}) == a
    assert stamp(nb, {"seeds": 1}) != a
    nb.write_text("# %%\nx = 2\n")
    assert stamp(nb, {}) != a


def test_discover_filters_and_names_unknown_notebooks():
    assert discover(["03"])[0].stem.startswith("03_")
    with pytest.raises(ValueError, match="no notebook"):
        discover(["77"])


def _executed(folder, checkpoint: int, finding: Finding):
    src = discover([f"{checkpoint:02d}"])[0]
    (folder / f"{src.stem}.ipynb").write_text(json.dumps(
        {"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data", "data": {MIME: finding._repr_mimebundle_()[MIME]}}]}]}))
    return src


def _finding(checkpoint=3, what="a | b", delta=-0.02, ci=(-0.025, -0.016), reranker="trained:x", backend="onnx", **claim):
    fields = dict(reference=-0.03, direction=-1) | claim
    return Finding.from_claims(Claim(what, delta, ci, **fields), checkpoint=checkpoint, title="t", claim="c", reference="r -0.5",
                               ours="o", parameters={"reranker": reranker, "backend": backend})


def test_index_lists_every_checkpoint_with_its_headline_and_identity(tmp_path):
    src = _executed(tmp_path, 3, _finding())
    text = write_index(tmp_path, {src.stem: {"seconds": 12.0}}, tmp_path / "README.md",
                       parameters={"reranker": "trained:x", "backend": "onnx"}).read_text()
    assert all(f"| {n:02d} |" in text for n in range(1, 19))
    row = next(line for line in text.splitlines() if line.startswith("| 03 |"))
    assert "a \\| b" in row and "−0.0200 [−0.0250, −0.0160] (95 %, queries)" in row and "r −0.5" in row
    assert "**holds** · negative result replicated" in row and "`trained:x` · `onnx`" in row and "⚠" not in row
    assert "Every row was computed with one teacher and backend" in text


def test_index_marks_a_row_of_another_identity(tmp_path):
    src = _executed(tmp_path, 3, _finding(backend="onnx-int8"))
    text = write_index(tmp_path, {src.stem: {"seconds": 1.0}}, tmp_path / "README.md",
                       parameters={"reranker": "trained:x", "backend": "onnx"}).read_text()
    assert "⚠ `trained:x` · `onnx-int8` (not this build's `trained:x` · `onnx`)" in text and "Rows 03 were computed with another" in text


def test_polarity_and_scale_of_each_claim_kind():
    effect = _finding().claims[0]
    assert polarity(effect) == "negative result replicated"
    assert scaled(effect) == pytest.approx((2 / 3, 0.016 / 0.03, 0.025 / 0.03))  # signed so the claimed side is positive; 1 = the reference
    null = _finding(kind="null", reference=None, direction=1, margin=0.01, delta=0.002, ci=(-0.004, 0.008)).claims[0]
    assert polarity(null) == "negative result replicated" and scaled(null) == pytest.approx((0.2, -0.4, 0.8))
    gain = _finding(reference=0.02, direction=1, delta=0.004, ci=(0.001, 0.007)).claims[0]
    assert polarity(gain) == "gain claimed" and scaled(gain) == pytest.approx((0.2, 0.05, 0.35))
    assert scaled(_finding(kind="direction", reference=None, direction=1, delta=0.1, ci=(0.05, 0.2)).claims[0]) is None


def test_index_forest_draws_scaled_rows_and_leaves_out_direction_claims():
    fig = index_forest({3: _finding(), 7: _finding(7, kind="direction", reference=None, direction=1, delta=0.1, ci=(0.05, 0.2))})
    assert [list(t.y) for t in fig.data] == [["03 t"]] and list(fig.data[0].x) == pytest.approx([2 / 3])


def test_library_closure_follows_imports_transitively_and_skips_the_rest():
    from lethe_core.report.notebooks import library_closure
    from lethe_core.util.paths import REPO_ROOT

    files = {str(p.relative_to(REPO_ROOT)) for p in library_closure("from lethe_core.experiments.systems import SystemsExperiment")}
    assert {"lethe_core/__init__.py", "lethe_core/experiments/__init__.py", "lethe_core/experiments/systems.py",
            "lethe_core/measures/stats.py", "lethe_core/pools/cache.py"} <= files  # systems imports pools and stats (relative imports)
    assert "lethe_core/cli/main.py" not in files and "lethe_core/rerankers/training.py" not in files
    lazy = {str(p.relative_to(REPO_ROOT)) for p in library_closure("def f():\n    from lethe_core.rerankers.training import train_folds\n")}
    assert "lethe_core/rerankers/training.py" in lazy  # a function-level import counts too
    assert library_closure("import numpy") == []


def test_json_safe_replaces_non_finite_floats():
    out = json_safe({"a": float("nan"), "b": [np.float64(1.5), np.inf], "c": {"d": np.int64(3), "e": "x"}})
    assert out == {"a": None, "b": [1.5, None], "c": {"d": 3, "e": "x"}}


def test_a_findings_numbers_are_strict_json():
    f = Finding(checkpoint=18, title="t", claim="c", reference="r", ours="o", verdict="inconclusive", why="w",
                numbers={"p": np.float64("nan"), "ci": np.array([0.1, 0.2])})
    json.dumps(f._repr_mimebundle_()[MIME], allow_nan=False)  # raises on NaN
    assert f._repr_mimebundle_()[MIME]["numbers"] == {"p": None, "ci": [0.1, 0.2]}


def test_index_keeps_rows_of_notebooks_not_in_this_build_only_with_its_identity(tmp_path):
    src = _executed(tmp_path, 3, _finding(what="new claim"))
    target = tmp_path / "README.md"
    ours = "`trained:x` · `onnx`"
    old_05 = f"| 05 | Recall analysis | old claim | r | o | **holds** · gain replicated | w | {ours} | [05_recall_analysis.py](05_recall_analysis.py) · 36 s |"
    old_06 = "| 06 | Adaptive depth + rescue cache | old | r | o | **holds** · gain replicated | w | `trained:y` · `onnx-int8` | x · 5 s |"
    target.write_text(f"{old_05}\n| 03 | x | stale | r | o | **holds** | w | {ours} | x · 9 s |\n{old_06}\n")
    text = write_index(tmp_path, {src.stem: {"seconds": 12.0}}, target, parameters={"reranker": "trained:x", "backend": "onnx"}).read_text()
    assert old_05 in text  # not executed here, same identity: kept, with its run time in the total
    assert "new claim" in text and "stale" not in text  # executed here: replaced
    assert old_06 not in text and "| 06 | Adaptive depth + rescue cache | — | — | — | not built yet |" in text  # another identity: dropped
    assert "0.8 min" in text and "Rows 05 are kept" in text  # 12 s + 36 s


def test_export_figures_draws_each_figure_and_drops_stale_copies(tmp_path):
    from lethe_core.report.notebooks import export_figures
    from lethe_core.util.figures import PLOTLY_MIME, static_export_problem

    if static_export_problem():
        pytest.skip(static_export_problem())
    fig = {"data": [{"type": "bar", "x": [1, 2], "y": [3, 4]}], "layout": {"title": {"text": "bars"}}}
    nb = tmp_path / "nb" / "12_x.ipynb"
    nb.parent.mkdir()
    nb.write_text(json.dumps({"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data", "data": {PLOTLY_MIME: fig}}]}]}))
    dest = tmp_path / "figs"
    dest.mkdir()
    (dest / "12_x-7.svg").write_text("stale")
    (dest / "13_y-1.svg").write_text("another notebook's")
    written = export_figures(nb, dest)
    assert [p.name for p in written] == ["12_x-1.svg"] and "<svg" in written[0].read_text() and "bars" in written[0].read_text()
    assert sorted(p.name for p in dest.iterdir()) == ["12_x-1.svg", "13_y-1.svg"]
    first = written[0].read_bytes()
    assert export_figures(nb, dest)[0].read_bytes() == first  # drawn again, the same bytes: a rebuild commits no noise


def test_index_asks_to_rebuild_a_notebook_judged_under_the_old_verdict_words(tmp_path):
    src = discover(["03"])[0]
    old = {"checkpoint": 3, "title": "t", "claim": "c", "reference": "r", "ours": "o", "verdict": "partly", "why": "w"}
    (tmp_path / f"{src.stem}.ipynb").write_text(json.dumps(
        {"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data", "data": {MIME: old}}]}]}))
    text = write_index(tmp_path, {}, tmp_path / "README.md").read_text()
    assert "| 03 | Cross-encoder rerank of dense top-30 | — | — | — | not built yet (rebuild:" in text


def test_headline_prints_a_family_wise_level_and_no_signed_zero():
    """Notebook 18 judges at the Bonferroni level 1 − 0.05 / 11: the index printed it as "100 %"; and a bound that
    rounds to zero read −0.0000, hiding the side of zero it lies on."""
    from lethe_core.report.checkpoints import percent, signed
    from lethe_core.report.notebooks import headline

    row = {"delta": 0.0037, "ci": [-0.00003, 0.0114], "level": 1 - 0.05 / 11, "unit": "queries", "conversation_ci": None}
    assert headline(row) == "+0.0037 [−0.00003, +0.0114] (99.55 %, queries)"
    assert percent(0.95) == "95 %" and percent(0.9) == "90 %"
    assert signed(-0.00004) == "−0.00004" and signed(0.0) == "0.0000" and signed(-0.0014) == "−0.0014" and signed(0.0058) == "+0.0058"
