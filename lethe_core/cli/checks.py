"""Checks of command-line values, run before any dataset, model or pool is touched.

A bad value must cost the user a second, not a pool build: every check here is a string or
file-system test, and each failure is one `ArgError` line naming the option, what it accepts
and what it got (the CLI prints it as `error: ...` with exit code 2).
"""

from __future__ import annotations

import math
import os
import socket
from pathlib import Path
from typing import Iterable, Sequence
from urllib.parse import urlparse

from lethe_core.inference import BACKENDS as INFERENCE_BACKENDS

BACKENDS = ("auto", *INFERENCE_BACKENDS)  # cross-encoder inference backends (`--backend`)
SWEEP_PARAMS = ("k", "alpha", "eta")
RULES = ("uniform", "gap")
SYNTHETIC_TURNS = (100, 1_000_000)  # the range `generate_synthetic` accepts
RERANKER_FORMS = "auto | hub:<name> | local:<folder> | trained:<name> | test:lexical"


class ArgError(ValueError):
    """A command-line value that cannot be used; the message is the whole user-facing line."""


def at_least(option: str, value, lo):
    """`value` (None passes: "not given") must be >= lo."""
    if value is not None and not value >= lo:
        raise ArgError(f"{option} must be >= {lo}, got {value}")
    return value


def fraction(option: str, value: float) -> float:
    if not 0 < value <= 1:
        raise ArgError(f"{option} must be a fraction in (0, 1], got {value}")
    return value


def choice(option: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ArgError(f"{option} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def numbers(option: str, raw: str, integer: bool = False, lo: float = 0) -> list[float]:
    """A comma-separated list of finite numbers >= lo (integers when `integer`)."""
    kind = f"integers >= {lo}" if integer else f"numbers >= {lo}"
    out = []
    for item in raw.split(","):
        try:
            v = int(item) if integer else float(item)
        except ValueError:
            raise ArgError(f"{option} must be comma-separated {kind}; got {item.strip()!r} in {raw!r}") from None
        if not math.isfinite(v) or v < lo:
            raise ArgError(f"{option} must be comma-separated {kind}; got {item.strip()!r} in {raw!r}")
        out.append(v)
    return out


def arm_names(raw: str | None, ks: Iterable[int]) -> list[str] | None:
    """`--arms a,b`: names of `standard_arms(ks)`, so a typo fails before the pools are built."""
    if raw is None:
        return None
    from lethe_core.rif.replay import standard_arms

    known = [a.name for a in standard_arms(tuple(ks))]
    names = [a.strip() for a in raw.split(",")]
    unknown = [a for a in names if a not in known]
    if unknown:
        raise ArgError(f"--arms: unknown arm(s) {', '.join(map(repr, unknown))}; known: {', '.join(known)}")
    return names


def dataset(spec: str, path: str | None) -> str:
    """The dataset name (the loader itself reports a missing or malformed file)."""
    from lethe_core.datasets import DATASETS, VARIANTS

    allowed = ", ".join(DATASETS)
    if spec.startswith("synthetic"):
        head, sep, n = spec.partition(":")
        lo, hi = SYNTHETIC_TURNS
        if head != "synthetic" or (sep and not (n.isdigit() and lo <= int(n) <= hi)):
            raise ArgError(f"DATASET {spec!r}: synthetic takes a number of turns, synthetic:N with N in {lo:,}..{hi:,}")
        return spec
    if spec in VARIANTS:
        return spec
    if spec.startswith("locomo-haystack"):
        from lethe_core.datasets.haystack import HAYSTACK_FORM, parse_haystack_name

        try:
            parse_haystack_name(spec)
        except ValueError:
            raise ArgError(f"DATASET {spec!r}: expected {HAYSTACK_FORM}") from None
        return spec
    if spec not in {d for d in DATASETS if not d.startswith("synthetic")}:
        variants = "; ".join(f"{k} ({v})" for k, v in VARIANTS.items())
        raise ArgError(f"DATASET must be one of {allowed}; got {spec!r}. Label variants: {variants}")
    if spec == "beir" and path is None:
        raise ArgError("DATASET beir needs --path FOLDER (corpus.jsonl, queries, qrels/)")
    return spec


def conversations(spec: str, n: int | None) -> int | None:
    """`--conversations N` within what the dataset has, where that is known without loading it (synthetic:N);
    for a file the loader reports it (`Dataset.first_conversations`), before any pool is built."""
    if n is None or not spec.startswith("synthetic"):
        return n
    from lethe_core.datasets.synthetic import synthetic_conversations

    _, _, turns = spec.partition(":")
    have = synthetic_conversations(int(turns) if turns.isdigit() else 2000)
    if n > have:
        raise ArgError(f"--conversations {n}: {spec} has {have} conversation{'' if have == 1 else 's'}; ask for 1 to {have}")
    return n


def reranker(spec: str, option: str = "--reranker") -> str:
    """One of RERANKER_FORMS, with the thing it names present (or, for the hub, reachable)."""
    kind, sep, arg = spec.partition(":")
    if spec in ("auto", "test:lexical"):
        return spec
    if kind == "hub" and sep:
        _hub_model(option, arg or "cross-encoder/ms-marco-MiniLM-L-6-v2", spec,
                   "use local:<folder>, a reranker trained here (trained:<name>) or test:lexical")
        return spec
    if kind == "local" and arg:
        if not Path(arg).expanduser().is_dir():
            raise ArgError(f"{option} {spec}: no folder {arg}")
        return spec
    if kind == "trained" and arg:
        from lethe_core.util.paths import models_dir

        root = models_dir()
        if not (root / arg / "trained.json").is_file():
            have = sorted(p.name for p in root.glob("*") if (p / "trained.json").is_file()) if root.is_dir() else []
            raise ArgError(f"{option} {spec}: no trained reranker {arg!r} under {root} (trained here: "
                           f"{', '.join(have) or 'none'}; train one with `lethe-lab reranker train locomo --name {arg}`)")
        return spec
    raise ArgError(f"{option} must be {RERANKER_FORMS}; got {spec!r}")


def encoder(spec: str) -> str:
    """`minilm` (bundled), `test:hash`, a model folder, or a hub name (cached, or the hub reachable)."""
    if spec in ("minilm", "test:hash"):
        return spec
    if Path(spec).expanduser().is_dir():
        return spec
    if ":" in spec or spec.startswith((".", "/", "~")) or not spec.strip():
        raise ArgError(f"--encoder must be minilm | test:hash | a sentence-transformers folder | a hub name; got {spec!r}")
    _hub_model("--encoder", spec, spec, "use minilm (bundled) or a local model folder")
    return spec


def _hub_model(option: str, name: str, spec: str, instead: str) -> None:
    """A hub model must be in the local cache or the hub reachable now.

    Offline, the hub clients retry for about a minute before giving up; a connection test bounded
    at 3 s fails instead, and a cached model is then loaded in offline mode (no retries).
    """
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on"):
        reachable = False
    else:
        from huggingface_hub import constants

        url = urlparse(constants.ENDPOINT)
        reachable = _reachable(url.hostname, url.port or 443)
        if not reachable:
            constants.HF_HUB_OFFLINE = True  # read at call time by huggingface_hub and transformers
            os.environ["HF_HUB_OFFLINE"] = os.environ["TRANSFORMERS_OFFLINE"] = "1"
    if reachable:
        return
    from huggingface_hub import try_to_load_from_cache

    if not isinstance(try_to_load_from_cache(name, "config.json"), str):
        raise ArgError(f"{option} {spec}: {name!r} is not in the Hugging Face cache and the hub is unreachable "
                       f"(offline); {instead}")


def _reachable(host: str, port: int, timeout: float = 3.0) -> bool:
    """A TCP connection within `timeout` seconds, name lookup included (a socket timeout does not
    bound getaddrinfo, which offline can hang for most of a minute), so it runs in a daemon thread."""
    import threading

    result: list[bool] = []

    def connect() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            result.append(True)
        except OSError:
            result.append(False)

    worker = threading.Thread(target=connect, daemon=True)
    worker.start()
    worker.join(timeout)
    return bool(result) and result[0]
