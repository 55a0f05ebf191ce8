"""The one "did you mean" of every message that names an unknown key, id or variable."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(name: str, choices: Iterable[str]) -> str | None:
    """The choice `name` was most likely meant to be, if any is close."""
    close = difflib.get_close_matches(name, list(choices), n=1)
    return close[0] if close else None


def did_you_mean(name: str, choices: Iterable[str], otherwise: str = "") -> str:
    """'; did you mean X?' for the closest of `choices`, else `otherwise`."""
    meant = closest(name, choices)
    return f"; did you mean {meant!r}?" if meant else otherwise
