"""Dataset loaders: every one returns the same `Dataset` model."""

from __future__ import annotations

import re
from pathlib import Path

from ..paths import default_dataset_path
from .audit import AUDITED_NAME, load_locomo_audited
from .beir import load_beir
from .errors import DatasetError
from .haystack import HAYSTACK_NAME, load_locomo_haystack, parse_haystack_name
from .locomo import load_locomo
from .longmemeval import load_longmemeval
from .model import Corpus, Dataset, Query, Turn
from .synthetic import SYNTHETIC_FORM, generate_synthetic

DATASETS = ("locomo", "longmemeval", "nfcorpus", "beir", "synthetic[:N_TURNS]", "locomo-haystack[:N_TURNS]",
            "locomo-haystack-msg[:N_TURNS]")
# Label variants of a dataset above (same corpus and questions, other qrels).
VARIANTS = {AUDITED_NAME: "LoCoMo with the audit's corrected evidence"}


def load_dataset(name: str, path: str | Path | None = None, conversations: int | None = None,
                 limit_queries: int | None = None) -> Dataset:
    """Load a dataset by name: `locomo`, `locomo-audited` (LoCoMo with the audit's corrected evidence), `longmemeval`, `nfcorpus`, `beir` (needs a path), `synthetic[:N]`,
    or `locomo-haystack[:N]` / `locomo-haystack-msg[:N]` (LoCoMo in N turns of real chit-chat, docs/haystack.md; `path` is LoCoMo's file).

    `conversations` keeps the first N conversations (turns and queries), `limit_queries` the first N queries.
    """
    ds = _load(name, path)
    if conversations:
        ds = ds.restrict_conversations(ds.conversation_ids()[:conversations])
    return ds.limit_queries(limit_queries)


def _load(name: str, path: str | Path | None) -> Dataset:
    if name.startswith("synthetic"):
        m = re.fullmatch(r"synthetic(?::([0-9]+))?", name)
        if m is None:
            raise ValueError(f"dataset {name!r}: expected {SYNTHETIC_FORM}")
        return generate_synthetic(int(m.group(1)) if m.group(1) else 2000)
    if name.startswith(HAYSTACK_NAME):
        return load_locomo_haystack(load_locomo(path or default_dataset_path("locomo")), parse_haystack_name(name))
    if name == "locomo":
        return load_locomo(path or default_dataset_path("locomo"))
    if name == AUDITED_NAME:
        return load_locomo_audited(path or default_dataset_path("locomo"))
    if name == "longmemeval":
        p = Path(path or default_dataset_path("longmemeval"))
        if not p.exists():
            raise DatasetError(
                p,
                "LongMemEval file not found. Download longmemeval_s_cleaned.json (official release) and pass "
                "--path FILE or set LETHE_LONGMEMEVAL_PATH.",
            )
        return load_longmemeval(p)
    if name == "nfcorpus":
        return load_beir(path or default_dataset_path("nfcorpus"), name="nfcorpus")
    if name == "beir":
        if path is None:
            raise ValueError("dataset 'beir' needs --path FOLDER")
        return load_beir(path, name=Path(path).name or "beir")
    raise ValueError(f"unknown dataset {name!r}; choose one of {', '.join([*DATASETS, *VARIANTS])}")


__all__ = [
    "Corpus", "Dataset", "DatasetError", "Query", "Turn", "DATASETS", "VARIANTS", "generate_synthetic",
    "load_beir", "load_dataset", "load_locomo", "load_locomo_audited", "load_locomo_haystack", "load_longmemeval",
]
