"""`gen run`, `gen validate` (and later `gen batch`): the pipeline commands of the CLI."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {}


def add_commands(sub: Any) -> None:
    """Register the pipeline sub-commands on the CLI's sub-parser set."""
