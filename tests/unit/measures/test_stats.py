import json

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from lethe_core.measures import stats
from lethe_core.datasets import DatasetError


def test_bootstrap_is_seeded_and_brackets_the_mean():
    x = np.random.default_rng(0).normal(0.3, 0.2, 400)
    a, b = stats.bootstrap_ci(x, seed=7), stats.bootstrap_ci(x, seed=7)
    assert a == b and a.lo < a.mean < a.hi
    se = x.std(ddof=1) / np.sqrt(x.size)
    assert a.hi - a.lo == pytest.approx(2 * 1.96 * se, rel=0.1)


def test_permutation_test_null_and_strong_effect():
    rng = np.random.default_rng(1)
    base = rng.uniform(size=300)
    assert stats.paired_permutation_test(base, base) == 1.0
    assert stats.paired_permutation_test(base + 0.05 + rng.normal(0, 0.01, 300), base) == pytest.approx(1 / 10_001)


def test_permutation_p_agrees_with_scipy():
    from scipy.stats import permutation_test

    rng = np.random.default_rng(2)
    base = rng.uniform(size=200)
    treat = base + rng.normal(0.01, 0.08, 200)
    ours = stats.paired_permutation_test(treat, base, seed=3)
    ref = permutation_test((treat, base), lambda a, b: np.mean(a - b), permutation_type="samples",
                           n_resamples=10_000, random_state=4).pvalue
    assert 0.01 < ref < 0.5  # a borderline effect, where the comparison means something
    assert ours == pytest.approx(ref, abs=0.02)


def test_corrections_match_statsmodels():
    p = [0.01, 0.04, 0.03, 0.5]
    assert np.allclose(stats.adjust(p, "holm"), multipletests(p, method="holm")[1])
    assert np.allclose(stats.adjust(p, "bonferroni"), np.minimum(np.array(p) * 4, 1))


def test_paired_arrays_must_match():
    with pytest.raises(ValueError):
        stats.paired_delta_ci([1, 2], [1, 2, 3])


def _per_query(tmp_path, configs, raw=None):
    path = tmp_path / "per_query.json"
    path.write_text(raw if raw is not None else json.dumps({"configs": configs}))
    return path


def _ok():
    return [{"name": "baseline", "ndcg": [0.1, 0.5, 0.9], "recall": [0.0, 1.0, 0.5]},
            {"name": "rif", "ndcg": [0.2, 0.6, 1.0], "recall": [0.5, 1.0, 1]}]


@pytest.mark.parametrize(
    "mutate, record, field, problem",
    [
        (lambda c: c[1]["ndcg"].__setitem__(1, True), "configs[1] (rif)", "ndcg", r"value \[1\] is bool"),
        (lambda c: c[1]["ndcg"].__setitem__(0, 7.5), "configs[1] (rif)", "ndcg", r"value \[0\] = 7.5 is outside \[0, 1\]"),
        (lambda c: c[0]["recall"].__setitem__(2, -0.1), "configs[0] (baseline)", "recall", "outside"),
        (lambda c: c[1]["ndcg"].__setitem__(2, float("nan")), "configs[1] (rif)", "ndcg", r"value \[2\] is nan; .* finite"),
        (lambda c: c[1]["recall"].__setitem__(2, float("inf")), "configs[1] (rif)", "recall", "finite"),
        (lambda c: c[1]["recall"].__setitem__(2, 10 ** 400), "configs[1] (rif)", "recall", "outside"),
        (lambda c: c[1].__setitem__("name", "baseline"), "configs[1] (baseline)", "name", r"duplicate config name: configs\[0\] \(baseline\)"),
        (lambda c: c[1]["ndcg"].pop(), "configs[1] (rif)", "ndcg", "has 2 values, 3 in configs\\[0\\]"),
        (lambda c: c[0].__setitem__("ndcg", []), "configs[0] (baseline)", "ndcg", "is empty"),
        (lambda c: c[1].pop("recall"), "configs[1] (rif)", "recall", "missing"),
        (lambda c: c[1].__setitem__("name", 3), "configs[1]", "name", "not a string"),
    ],
)
def test_bad_per_query_values_are_errors_naming_file_record_and_field(tmp_path, mutate, record, field, problem):
    configs = _ok()
    mutate(configs)
    path = _per_query(tmp_path, configs)
    with pytest.raises(DatasetError, match=problem) as err:
        stats.load_per_query_file(path)
    assert (err.value.file, err.value.record, err.value.field) == (str(path), record, field)


def test_bare_nan_in_the_file_is_rejected_not_tested(tmp_path):
    raw = json.dumps({"configs": _ok()}).replace("0.6", "NaN")
    with pytest.raises(DatasetError, match=r"configs\[1\] \(rif\), field 'ndcg': value \[1\] is nan"):
        stats.load_per_query_file(_per_query(tmp_path, None, raw))


@pytest.mark.parametrize("raw, match", [(b"\x89PNG\r\n\x1a\n\x00\x00", "not UTF-8"), (b"[]", "non-empty 'configs' list"),
                                        (b'{"configs": [', "invalid JSON")])
def test_unusable_files_name_themselves(tmp_path, raw, match):
    path = tmp_path / "per_query.json"
    path.write_bytes(raw)
    with pytest.raises(DatasetError, match=f"per_query.json.*{match}"):
        stats.load_per_query_file(path)
    with pytest.raises(DatasetError, match="is a directory"):
        stats.load_per_query_file(tmp_path)


def test_a_valid_file_loads_and_compares(tmp_path):
    configs = stats.load_per_query_file(_per_query(tmp_path, _ok()))
    assert list(configs) == ["baseline", "rif"] and configs["rif"]["recall"].tolist() == [0.5, 1.0, 1.0]
    table = stats.compare_configs(configs, "baseline", seed=0)
    assert table["n_queries"] == 3 and table["configs"][1]["delta_ndcg"]["mean"] == pytest.approx(0.1)


def test_compare_configs_validates_arrays_it_is_given():
    base = {"ndcg": np.array([0.1, 0.2]), "recall": np.array([0.1, 0.2])}
    with pytest.raises(ValueError, match=r"config 'x', metric 'ndcg': value \[0\] is nan"):
        stats.compare_configs({"baseline": base, "x": {"ndcg": np.array([np.nan, 0.2]), "recall": base["recall"]}}, "baseline")
    with pytest.raises(ValueError, match=r"config 'x', metric 'recall': has 1 values, the baseline 2"):
        stats.compare_configs({"baseline": base, "x": {"ndcg": base["ndcg"], "recall": np.array([0.3])}}, "baseline")


def test_cli_json_is_strict_and_errors_exit_2(tmp_path):
    from typer.testing import CliRunner

    from lethe_core.cli.main import app

    ok = _per_query(tmp_path, _ok())
    res = CliRunner().invoke(app, ["stats", str(ok), "--json"])
    assert res.exit_code == 0, res.output
    json.loads(res.stdout, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    configs = _ok()
    configs[1]["ndcg"][0] = float("nan")
    res = CliRunner().invoke(app, ["stats", str(_per_query(tmp_path, configs)), "--json"])
    assert res.exit_code == 2 and "record configs[1] (rif), field 'ndcg'" in res.output and "p_ndcg" not in res.stdout


def test_long_runs_show_progress_on_stderr_and_quick_ones_print_nothing(capsys, monkeypatch):
    """Issue 24, finding 8: a valid 200 MB file ran about an hour with no output at all."""
    rng = np.random.default_rng(0)
    configs = {name: {"ndcg": rng.random(50), "recall": rng.random(50)} for name in ("baseline", "a", "b")}
    quiet = stats.compare_configs(configs, "baseline", seed=0)
    assert capsys.readouterr().err == ""  # a quick table: no bar
    shown = stats.compare_configs(configs, "baseline", seed=0, progress=True)
    err = capsys.readouterr().err
    assert "stats (50 queries x 3 configs)" in err and "100%" in err and "140k/140k" in err  # 10,000 x (2*3 + 4*2)
    assert shown == quiet  # the bar changes no number
    monkeypatch.setattr(stats, "PROGRESS_DELAY", 0.0)  # a run past the delay shows the bar by itself
    stats.compare_configs(configs, "baseline", seed=0)
    assert "stats (50 queries x 3 configs)" in capsys.readouterr().err
    stats.compare_configs(configs, "baseline", seed=0, progress=False)
    assert capsys.readouterr().err == ""
