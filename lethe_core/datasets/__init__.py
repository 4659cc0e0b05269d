"""Dataset loaders: every one returns the same `Dataset` model."""

from __future__ import annotations

import re
from pathlib import Path

from lethe_core.util.paths import default_dataset_path
from lethe_core.datasets.audit import AUDITED_NAME, load_locomo_audited
from lethe_core.datasets.beir import load_beir
from lethe_core.datasets.errors import DatasetError
from lethe_core.datasets.haystack import HAYSTACK_NAME, load_locomo_haystack, parse_haystack_name
from lethe_core.datasets.locomo import load_locomo
from lethe_core.datasets.longmemeval import load_longmemeval
from lethe_core.datasets.model import Corpus, Dataset, Query, Turn
from lethe_core.datasets.realtalk import load_realtalk
from lethe_core.datasets.synthetic import SYNTHETIC_FORM, generate_synthetic

DATASETS = ("locomo", "realtalk", "longmemeval", "nfcorpus", "beir", "synthetic[:N_TURNS]", "locomo-haystack[:N_TURNS]",
            "locomo-haystack-msg[:N_TURNS]")
# Label variants of a dataset above (same corpus and questions, other qrels).
VARIANTS = {AUDITED_NAME: "LoCoMo with the audit's corrected evidence"}


def load_dataset(name: str, path: str | Path | None = None, conversations: int | None = None,
                 limit_queries: int | None = None) -> Dataset:
    """Load a dataset by name: `locomo`, `locomo-audited` (LoCoMo with the audit's corrected evidence), `realtalk` (a folder of
    Chat_*.json files or one of them, docs/realtalk.md), `longmemeval`, `nfcorpus`, `beir` (needs a path), `synthetic[:N]`,
    or `locomo-haystack[:N]` / `locomo-haystack-msg[:N]` (LoCoMo in N turns of real chit-chat, docs/haystack.md; `path` is LoCoMo's file).

    `conversations` keeps the first N conversations (turns and queries; N above the number the dataset has is a
    DatasetError naming that number), `limit_queries` the first N queries. Either makes a subset whose `dropped()`
    counts the subset's problems (`dropped(whole_file=True)` the file's).
    """
    ds = _load(name, path)
    if conversations is not None:
        ds = ds.first_conversations(conversations)
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
    if name == "realtalk":
        return load_realtalk(path or default_dataset_path("realtalk"))
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
    "load_realtalk",
]
