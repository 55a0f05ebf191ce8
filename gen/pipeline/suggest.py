"""The one "did you mean" of every message that names an unknown key, id or variable."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, choices: Iterable[str], otherwise: str = "") -> str:
    """'; did you mean X?' for the closest of `choices`, else `otherwise`."""
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else otherwise
