"""Run ids and recorded configs are what the studies wrote before their data fields moved into `DataSpec`.

Every literal below was printed by the code before that change (flat data fields on every study), for the same
offline inputs: synthetic:600, the lexical test reranker, the hashing encoder. A study whose id changes here would
leave every existing results folder behind (never reused, and a second folder beside it on a rerun).
"""

from dataclasses import replace

import pytest

from lethe_core.experiments.adaptive_depth_study import AdaptiveDepthExperiment
from lethe_core.experiments.dedup_study import DedupExperiment
from lethe_core.experiments.haystack_study import HaystackStudyConfig
from lethe_core.experiments.mlp_adapter_study import MLPAdapterStudy
from lethe_core.experiments.mutation_study import MutationStudy
from lethe_core.experiments.recall import RecallExperiment
from lethe_core.experiments.rescue_study import RescueStudy
from lethe_core.experiments.rif import RIFExperiment
from lethe_core.experiments.routing_study import RoutingStudy
from lethe_core.experiments.scope import expected_config
from lethe_core.experiments.sdm_study import SDMExperiment
from lethe_core.experiments.setup import DataSpec
from lethe_core.experiments.systems import SystemsExperiment
from lethe_core.experiments.tokenizers import TokenizerExperiment
from lethe_core.retrieval.pipeline import PipelineConfig

P = PipelineConfig(encoder="test:hash")
DATA = DataSpec(dataset="synthetic:600", reranker="test:lexical", backend="torch", conversations=3, limit_queries=16, pipeline=P,
                second_stage="fused", calibration=False, progress=False)
NO_CAL = DATA  # the usage-stream and recall studies do not read calibration (it must stay at its default, the raw reading)
PIPELINE = {"k_leg": 30, "rrf_k": 60, "pool_size": 30, "encoder": "test:hash", "encoder_backend": "torch",
            "bm25": {"k1": 1.5, "b": 0.75, "epsilon": 0.25}, "tokenizer": "regex", "scope": "global"}
FLAT = {"dataset": "synthetic:600", "path": None, "reranker": "test:lexical", "backend": "torch", "conversations": 3,
        "limit_queries": 16, "pipeline": PIPELINE, "second_stage": "fused", "calibration": False}

# (name, study, run id before the change)
RUN_IDS = [
    ("systems", SystemsExperiment(DATA, seed=1), "systems-synthetic-600-test_lexical-fused-raw-45495b77c88b1269"),
    ("rif", RIFExperiment(DATA, protocol="heldout", arms=["global-gap", "clustered5-gap"], ks=(5, 30), seeds=1, burn_in=60, alpha=0.5,
                          snapshot_every=20, map=False), "rif-synthetic-600-heldout-test_lexical-673a5cb640"),
    # the calibrated reading, the default before the raw one (`--calibration`): the id it had then
    ("rif, calibrated ablation", RIFExperiment(replace(DATA, calibration=True), protocol="heldout", arms=["global-gap", "clustered5-gap"],
                                               ks=(5, 30), seeds=1, burn_in=60, alpha=0.5, snapshot_every=20, map=False),
     "rif-synthetic-600-heldout-test_lexical-7390c32c0a"),
    ("rif, cap changed", RIFExperiment(DATA, protocol="paper", arms=["global-gap"], seeds=1, burn_in=40, cap=2.0, map=False),
     "rif-synthetic-600-paper-test_lexical-0a32a3de9f"),
    ("adaptive depth", AdaptiveDepthExperiment(DATA, protocols=("paper",), deep_depths=(40,), steps=40, seeds=1),
     "adaptive-depth-synthetic-600-test_lexical-e9fdda4192"),
    # its held-out protocol was renamed heldout -> heldout-within (it splits within conversations): a new id by design
    # (before: adaptive-depth-synthetic-600-test_lexical-b63d39f548 with protocols ("paper", "heldout"))
    ("adaptive depth, heldout-within", AdaptiveDepthExperiment(DATA, protocols=("paper", "heldout-within"), deep_depths=(40,),
                                                               trigger_share=0.5, sweep_shares=(0.0, 0.5, 1.0), steps=40, seeds=1, seed=2),
     "adaptive-depth-synthetic-600-test_lexical-946655807e"),
    ("dedup", DedupExperiment(DATA, threshold=0.9, scope="conversation", sweep=(0.9, 1.0), seed=1),
     "dedup-synthetic-600-90-test_lexical-2e92cb65ccc8"),
    ("mlp adapter", MLPAdapterStudy(NO_CAL, arms=("mlp",), steps=20, eval_every=10, seeds=1, k=20),
     "mlp-adapter-synthetic-600-test_lexical-c00c0d9e9a"),
    ("mutation", MutationStudy(NO_CAL, mechanism="adapter", steps=20, eval_every=10, seeds=1),
     "mutation-adapter-synthetic-600-test_lexical-750d95e352"),
    ("recall", RecallExperiment(NO_CAL, depths=(30, 100), oracle_depths=(30, 60), k_fetch=(30, 40), batch=8, seed=1),
     "recall-synthetic-600-test_lexical-f6b7b4c8c5"),
    ("recall, first stage only", RecallExperiment(replace(NO_CAL, reranker=None), depths=(30, 100), oracle_depths=(30, 60)), "recall-synthetic-600-first-stage-1d4017d1ee"),
    ("rescue", RescueStudy(replace(DATA, pipeline=PipelineConfig(encoder="test:hash", k_leg=80)),
                           protocols=("sample100", "paper", "heldout"), variants=("every5", "top3"), seeds=1, burn_in=40, sample_size=8,
                           sample_burn_in=20, k=5, curve_points=1, n_resamples=200), "rescue-synthetic-600-test_lexical-5b127ae397"),
    ("routing", RoutingStudy(DATA, seeds=1, burn_in=40, curve_points=1, n_resamples=200), "routing-synthetic-600-test_lexical-3e605151ac"),
    ("tokenizers", TokenizerExperiment(DATA, tokenizers=("regex", "split"), timing_repeats=1, seed=1),
     "tokenizers-synthetic-600-test_lexical-fused-b35f51db04"),
]
# The keys each hashed config held before (config.json, or summary.json's "config").
CONFIG_KEYS = {
    "rif": {*FLAT, "schema_version", "alpha", "arms", "bootstrap", "burn_in", "calibrated", "cap", "dataset_fingerprint", "decay", "eager_decay", "eta",
            "ks", "map", "pool_key", "progress", "protocol", "reinforce", "reranker_resolved", "second_stage_resolved", "seeds",
            "snapshot_every"},
    "adaptive depth": {*FLAT, "accept", "dataset_fingerprint", "deep_depths", "deep_pool_keys", "pool_key", "progress", "protocols",
                       "reranker_identity", "reranker_resolved", "rescue", "seed", "seeds", "steps", "sweep_shares", "trigger_share"},
    "mlp adapter": {*FLAT, "arms", "dataset_fingerprint", "eval_every", "k", "n_queries", "params", "protocols", "reranker_identity",
                    "reranker_resolved", "seeds", "steps", "update_mode"} - {"calibration"},
    "mutation": {*FLAT, "arms", "dataset_fingerprint", "eval_every", "k", "mechanism", "n_queries", "protocols", "reranker_identity",
                 "reranker_resolved", "seeds", "steps"} - {"calibration"},
    "recall": {*FLAT, "batch", "dataset_fingerprint", "depth", "depths", "k_fetch", "oracle_depths", "progress", "reranker_identity",
               "reranker_resolved", "seed"} - {"calibration"},
    "rescue": {*FLAT, "burn_in", "curve_arms", "curve_points", "dataset_fingerprint", "k", "n_resamples", "pool_key", "protocols",
               "reranker_resolved", "rif", "sample_burn_in", "sample_size", "scale", "seed_list", "seeds", "variant_params", "variants"},
    "routing": {*FLAT, "burn_in", "curve_points", "dataset_fingerprint", "explore", "n_resamples", "params", "pool_key", "protocols",
                "reranker_resolved", "scale", "seed_list", "seeds"},
}


@pytest.mark.parametrize("name, study, expected", RUN_IDS, ids=[r[0] for r in RUN_IDS])
def test_run_id_is_the_one_written_before(name, study, expected, tmp_path):
    loaded = study.data.load(tmp_path)
    assert study.run_id(loaded) == expected
    if name in CONFIG_KEYS:
        assert set(study.config(loaded)) == CONFIG_KEYS[name]


def test_flat_configs_are_the_ones_recorded_before():
    """summary.json's "config" of the studies whose run id is not a config digest (systems, dedup, tokenizers)."""
    assert SystemsExperiment(DATA, seed=1).flat_config() == {**FLAT, "seed": 1, "progress": False}
    assert DedupExperiment(DATA, threshold=0.9, scope="conversation", sweep=(0.9, 1.0), seed=1).flat_config() == {
        **FLAT, "threshold": 0.9, "scope": "conversation", "sweep": (0.9, 1.0), "seed": 1, "progress": False}
    assert TokenizerExperiment(DATA, tokenizers=("regex", "split"), timing_repeats=1, seed=1).flat_config() == {
        **FLAT, "tokenizers": ("regex", "split"), "timing_repeats": 1, "seed": 1, "progress": False}


def test_studies_outside_data_spec_keep_their_ids():
    sdm = SDMExperiment(seeds=1, n_families=4, n_locations=200, pipeline=P, n_resamples=100, progress=False)
    assert sdm.run_id() == "sdm-1seeds-85478294a4e5"
    haystack = HaystackStudyConfig(sizes=(7000, 8000), locomo=False, full=False, protocols=("paper",), seeds=1, burn_in=200, ks=(30,),
                                   reranker="test:lexical", backend="torch", limit_queries=60, pipeline=P, progress=False)
    assert haystack.key() == "d60395302e68"


def test_scope_matches_runs_on_the_fields_it_compared_before():
    exp = RIFExperiment(DATA, protocol="heldout", arms=["global-gap"], seeds=2, burn_in=60, cap=2.0)
    assert expected_config(exp) == {
        "alpha": 0.3, "bootstrap": 200, "burn_in": 60, "calibration": False, "cap": 2.0, "conversations": 3, "dataset": "synthetic:600",
        "dataset_fingerprint": "5324e7f3215e5f61", "decay": 0.005, "eager_decay": False, "eta": 0.1, "ks": [10, 30, 50, 100],
        "limit_queries": 16, "path": None, "pool_key": "45495b77c88b1269", "protocol": "heldout", "reinforce": 0.05,
        "second_stage": "fused", "seeds": [42, 43], "snapshot_every": 500}


def test_a_study_refuses_a_data_field_it_does_not_read():
    with pytest.raises(ValueError, match="does not read calibration"):
        MutationStudy(replace(DATA, calibration=True))
    with pytest.raises(ValueError, match="needs a reranker"):
        SystemsExperiment(DataSpec(reranker=None))


@pytest.mark.parametrize("change, message", [({"second_stage": "magic"}, "second stage must be one of"),
                                             ({"conversations": 0}, "conversations must be >= 1"),
                                             ({"limit_queries": 0}, "limit_queries must be >= 1"),
                                             ({"backend": "gpu"}, "backend must be one of")])
def test_data_spec_checks_once(change, message):
    with pytest.raises(ValueError, match=message):
        DataSpec(**change)
