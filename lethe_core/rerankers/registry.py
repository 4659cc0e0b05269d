"""Rerankers by name (`--reranker`), and what `auto` means.

- `hub:<name>`     a CrossEncoder from the Hugging Face hub or its local cache (default: the paper's MS MARCO MiniLM);
- `local:<path>`   any CrossEncoder folder on disk;
- `trained:<name>` a fold-routed cross-encoder trained here (`lethe-lab reranker train`);
- `test:lexical`   a tiny deterministic lexical scorer for fast tests (never reported as a model);
- `auto`           the first available entry of `AUTO`, an explicit ordered fallback list (as ir_measures'
                   providers): each entry loads its reranker or says why it is unavailable.

Every pool and results file records the reranker's name and `.identity` (name | backend | weights digest).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lethe_core.rerankers.base import DEFAULT_HUB_MODEL, LexicalReranker, Reranker, RerankerUnavailable
from lethe_core.rerankers.cross_encoder import CrossEncoderReranker
from lethe_core.rerankers.folded import FoldedReranker
from lethe_core.rerankers.recipes import FULL_RECIPE, first_run_config
from lethe_core.util.paths import models_dir


def load_reranker(spec: str, backend: str = "auto") -> Reranker:
    """A reranker by name; `backend` (torch, onnx, onnx-int8, auto) applies to cross-encoders."""
    kind, _, arg = spec.partition(":")
    if spec == "test:lexical":
        return LexicalReranker()
    if kind == "hub":
        name = arg or DEFAULT_HUB_MODEL
        return CrossEncoderReranker(name, f"hub:{name}", backend=backend)
    if kind == "local":
        path = Path(arg).expanduser()
        if not path.is_dir():
            raise RerankerUnavailable(f"local reranker folder not found: {path}")
        return CrossEncoderReranker(str(path), f"local:{path.resolve()}", local_files_only=True, backend=backend)
    if kind == "trained":
        return FoldedReranker(arg, backend=backend)
    raise ValueError(f"unknown reranker {spec!r}: use hub:<name>, local:<path>, trained:<name> or test:lexical")


@dataclass(frozen=True)
class AutoEntry:
    """One candidate of `--reranker auto`: its spec and a check that returns why it is unavailable (None: available)."""

    spec: str
    unavailable: Callable[[], str | None]
    remedy: str

    def load(self, backend: str) -> Reranker:
        return load_reranker(self.spec, backend)


def _trained_missing(name: str) -> str | None:
    manifest = models_dir() / name / "trained.json"
    return None if manifest.exists() else f"not trained ({manifest} is missing)"


def auto_entries() -> list[AutoEntry]:
    """`auto`, in order: the paper's MS MARCO cross-encoder (HF cache, or downloaded when the hub is reachable;
    offline that fails in seconds), the full fold recipe (`make reranker`), the first-run recipe (`make run`
    trains it). Never the lexical test reranker. The first-run name depends on this CPU's precision."""
    first = first_run_config().name
    return [
        AutoEntry(f"hub:{DEFAULT_HUB_MODEL}", lambda: None, "online, it is downloaded on first use"),
        AutoEntry(f"trained:{FULL_RECIPE}", lambda: _trained_missing(FULL_RECIPE), "`make reranker`"),
        AutoEntry(f"trained:{first}", lambda: _trained_missing(first), "`lethe-lab reranker ensure`"),
    ]


def trained_on(spec: str) -> str | None:
    """The dataset a `trained:<name>` reranker was trained on (its manifest), else None: what tells a fold teacher
    (scoring its own dataset, each query by the fold that never saw it) from a cross-dataset one."""
    kind, _, name = spec.partition(":")
    manifest = models_dir() / name / "trained.json"
    if kind != "trained" or not manifest.exists():
        return None
    m = json.loads(manifest.read_text())
    return m.get("dataset") or m.get("config", {}).get("dataset")


def auto_candidates() -> list[str]:
    """The trained models `auto` falls back to, in order, when the hub model is not available."""
    return [e.spec.partition(":")[2] for e in auto_entries() if e.spec.startswith("trained:")]


def resolve_reranker(spec: str, backend: str = "auto") -> Reranker:
    """`spec` loaded as named, or for `auto` the first entry of `auto_entries()` that loads; when none does,
    one error listing every entry with why it is unavailable and what provides it."""
    if spec != "auto":
        return load_reranker(spec, backend)
    reasons = []
    for entry in auto_entries():
        why = entry.unavailable()
        if why is None:
            try:
                return entry.load(backend)
            except RerankerUnavailable as exc:
                why = str(exc).splitlines()[0]
        reasons.append(f"  {entry.spec}: {why} (provided by {entry.remedy})")
    raise RerankerUnavailable("no reranker for --reranker auto; tried in order:\n" + "\n".join(reasons)
                              + "\nRun `lethe-lab reranker ensure` (trains the first-run recipe), or name another with --reranker.")
