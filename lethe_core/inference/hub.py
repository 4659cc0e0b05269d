"""Hugging Face hub names, resolved to a local folder without waiting on a dead network.

huggingface_hub retries an unreachable endpoint for about a minute before failing; a single TCP
connect with a short timeout tells in two seconds whether downloading is possible at all.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse


class HubUnreachable(RuntimeError):
    pass


def local_snapshot(name: str) -> Path | None:
    """The folder of `name` if it is one, else its snapshot in the local HF cache (config cached), else None."""
    if Path(name).expanduser().is_dir():
        return Path(name).expanduser()
    from huggingface_hub import try_to_load_from_cache

    try:
        hit = try_to_load_from_cache(repo_id=name, filename="config.json")
    except Exception:  # not a valid repo id: certainly not cached
        return None
    return Path(hit).parent if isinstance(hit, str) else None


def offline_reason(timeout: float = 2.0) -> str | None:
    """Why the hub cannot be reached (HF_HUB_OFFLINE set, or one connect failed), or None if it can."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return "HF_HUB_OFFLINE is set"
    url = urlparse(constants.ENDPOINT)
    host, port = url.hostname or "", url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        return f"{host}:{port} is unreachable ({type(exc).__name__}: {exc})"
    return None
