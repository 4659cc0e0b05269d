"""The bi-encoder backends against the shared data's check figure: NFCorpus dense NDCG@10 = 0.3165 (323 test queries).

The `vector` system of `lethe-lab systems nfcorpus` is the dense leg's top-10; the lexical test reranker only
fills the pools' logit column and does not touch that system. Measured (2026-12-02, TorchScript export): torch
0.3165, onnx 0.3165, onnx-int8 0.3153 (the earlier dynamo export's int8: 0.3138). Torch is the figure the shared
data ships; this test pins the ONNX export to it (one NFCorpus embedding, a few minutes on 2 cores: outside `make test`, run by `make parity-heavy`).
"""

import pytest

from lethe_core.experiments.setup import DataSpec
from lethe_core.experiments.systems import SystemsExperiment
from lethe_core.retrieval.pipeline import PipelineConfig
from tests.conftest import NFCORPUS

pytestmark = [pytest.mark.slow, pytest.mark.heavy]  # embeds all of NFCorpus: `make parity-heavy`
CHECK_FIGURE = 0.3165


@pytest.mark.parametrize("backend", ["onnx"])
def test_nfcorpus_dense_ndcg_matches_the_check_figure(backend):
    if not (NFCORPUS / "corpus.jsonl").exists():
        pytest.fail(f"shared data missing: {NFCORPUS}")
    summary = SystemsExperiment(DataSpec(dataset="nfcorpus", reranker="test:lexical", progress=False,
                                         pipeline=PipelineConfig(encoder_backend=backend))).run()
    vector = next(s for s in summary["systems"] if s["name"] == "vector")
    assert summary["n_queries"] == 323
    assert abs(vector["ndcg@10"] - CHECK_FIGURE) <= 0.002, vector["ndcg@10"]
