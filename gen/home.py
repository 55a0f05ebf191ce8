"""Where gen keeps what it builds and converts: $GEN_HOME, by default ~/.cache/gen. Torch-free."""

from __future__ import annotations

import os
from pathlib import Path


def gen_home() -> Path:
    return Path(os.environ.get("GEN_HOME") or Path.home() / ".cache" / "gen")
