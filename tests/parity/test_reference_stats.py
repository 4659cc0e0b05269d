"""`lethe-lab stats` reproduces the reference's own table (docs/protocols.md, "Statistics") within Monte-Carlo error."""

import json

import pytest
from typer.testing import CliRunner

from lethe_core.cli.main import app
from tests.conftest import REFERENCE

# name: (mean, ci_lo, ci_hi, delta, d_lo, d_hi, p) for NDCG@10, from the paper's Table 1.
NDCG = {
    "baseline": (0.2960, 0.2647, 0.3281, None, None, None, None),
    "global-original": (0.2992, 0.2671, 0.3311, 0.0032, -0.0097, 0.0161, 0.6217),
    "global-gap": (0.3038, 0.2713, 0.3364, 0.0079, -0.0034, 0.0192, 0.1747),
    "clustered30-original": (0.3132, 0.2814, 0.3453, 0.0173, 0.0063, 0.0285, 0.0017),
    "clustered30-gap": (0.3152, 0.2836, 0.3473, 0.0192, 0.0102, 0.0292, 0.0001),
}
RECALL_DELTA = {"clustered30-gap": (0.0391, 0.0001), "clustered30-original": (0.0278, 0.0009), "global-gap": (0.0155, 0.133)}


def check_p(ours, ref):
    if ref <= 0.0001:
        assert ours < 0.001
    else:
        assert ours == pytest.approx(ref, abs=0.02)


def test_reference_table_is_reproduced():
    res = CliRunner().invoke(app, ["stats", str(REFERENCE), "--baseline", "baseline", "--json"])
    assert res.exit_code == 0, res.output
    table = json.loads(res.stdout)
    assert table["baseline"] == "baseline" and table["n_queries"] == 500
    by = {c["name"]: c for c in table["configs"]}
    for name, (m, lo, hi, d, dlo, dhi, p) in NDCG.items():
        c = by[name]
        assert c["ndcg"]["mean"] == pytest.approx(m, abs=1e-4)
        assert c["ndcg"]["ci"] == pytest.approx([lo, hi], abs=0.002)
        if d is None:
            assert c["delta_ndcg"] is None and c["p_ndcg"] is None
            continue
        assert c["delta_ndcg"]["mean"] == pytest.approx(d, abs=1e-4)
        assert c["delta_ndcg"]["ci"] == pytest.approx([dlo, dhi], abs=0.002)
        check_p(c["p_ndcg"], p)
        assert c["p_ndcg_holm"] >= c["p_ndcg"]
    for name, (d, p) in RECALL_DELTA.items():
        assert by[name]["delta_recall"]["mean"] == pytest.approx(d, abs=1e-4)
        check_p(by[name]["p_recall"], p)
    # Bonferroni over the four comparisons leaves the clustered results significant (paper, section 5.1).
    assert by["clustered30-gap"]["p_ndcg_bonferroni"] < 0.01 and by["clustered30-original"]["p_ndcg_bonferroni"] < 0.01


def test_malformed_per_query_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"configs": [{"name": "baseline", "ndcg": [0.1, 0.2], "recall": [0.1, "x"]}]}))
    res = CliRunner().invoke(app, ["stats", str(bad)])
    assert res.exit_code == 2 and "bad.json, record configs[0] (baseline), field 'recall'" in res.output
