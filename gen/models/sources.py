"""A model file's sha256, hashed once per version of the file: remembered against its path,
size, modification time and inode in $GEN_HOME/models/sources/, so a warm load of a
GGUF file (hundreds of megabytes) reads a small record instead of the whole file."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from gen.home import gen_home


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _stat_key(path: Path) -> dict[str, int | str]:
    st = path.stat()
    return {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}


def source_sha256(path: Path) -> str:
    """The file's sha256, hashed once and remembered against its path, size, modification
    time and inode in $GEN_HOME/models/sources/: while those hold, a load reads the small
    record instead of the whole file."""
    name = hashlib.sha256(str(path).encode()).hexdigest()[:16]
    record = gen_home() / "models" / "sources" / f"{name}.json"
    key = _stat_key(path)
    try:
        saved = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        saved = None  # not hashed yet, or a torn record: hashed again
    if (
        isinstance(saved, dict)
        and saved.get("stat") == key
        and isinstance(saved.get("sha256"), str)
    ):
        return saved["sha256"]
    digest = file_sha256(path)
    if _stat_key(path) == key:  # not changed while it was read
        record.parent.mkdir(parents=True, exist_ok=True)
        tmp = record.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"stat": key, "sha256": digest}) + "\n", encoding="utf-8")
        os.replace(tmp, record)
    return digest
