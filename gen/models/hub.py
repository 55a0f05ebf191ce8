"""`hf:ORG/REPO/FILE.gguf` model specs: one GGUF file of a Hugging Face repository, found in
the local Hugging Face cache (huggingface_hub; HF_HUB_CACHE names another), and downloaded
into it only where that is allowed: HF_HUB_OFFLINE unset and the hub reachable."""

from __future__ import annotations

import os
from pathlib import Path

from gen.errors import ModelError

PREFIX = "hf:"
_TRUE = ("1", "ON", "YES", "TRUE")


def hub_file(spec: str) -> Path:
    """The local path of the file `spec` names (its snapshot's path, whose name is the
    file's); ModelError when the spec is malformed, or the file is not cached and cannot be
    downloaded."""
    repo, filename = _parts(spec)
    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    cache = os.environ.get("HF_HUB_CACHE") or None  # (the library read it at its import)
    found = try_to_load_from_cache(repo, filename, cache_dir=cache)
    if isinstance(found, str):
        return Path(found)
    where = cache or "the default Hugging Face cache"
    if os.environ.get("HF_HUB_OFFLINE", "").upper() in _TRUE:
        raise ModelError(
            f"{spec}: not in the local Hugging Face cache ({where}) and HF_HUB_OFFLINE is set; "
            f"fetch it once online (`hf download {repo} {filename}`) or unset HF_HUB_OFFLINE"
        )
    try:
        return Path(hf_hub_download(repo, filename, cache_dir=cache))
    except Exception as exc:  # no network, no such repository or file, no access
        raise ModelError(
            f"{spec}: not in the local Hugging Face cache ({where}) and the download failed: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _parts(spec: str) -> tuple[str, str]:
    """(ORG/REPO, FILE) of `hf:ORG/REPO/FILE.gguf`; FILE may lie in folders."""
    parts = spec.removeprefix(PREFIX).split("/")
    if len(parts) < 3 or not all(parts):
        raise ModelError(f"{spec}: a Hugging Face file is named hf:ORG/REPO/FILE.gguf")
    if not parts[-1].lower().endswith(".gguf"):
        raise ModelError(f"{spec}: gen runs .gguf files from the Hugging Face cache")
    return "/".join(parts[:2]), "/".join(parts[2:])
