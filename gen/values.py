"""How an error message shows a value it got (`must be an integer, got 'lots'`), in the words
of the format the value came in: YAML (a pipeline) or JSON (a request body)."""

from __future__ import annotations

from typing import Any

SHOWN = 40  # characters of a value shown; past them it is cut with "..."


def described(value: Any, *, json: bool = False) -> str:
    """A mapping, a list or null by its kind (in JSON: an object, an array, null); any other
    value as itself, cut at SHOWN characters, or in JSON by its kind too (a string, a
    number, true, false): a request body's text is not worth repeating to its sender."""
    if isinstance(value, dict):
        return "an object" if json else "a mapping"
    if isinstance(value, list):
        return "an array" if json else "a list"
    if value is None:
        return "null" if json else "nothing (null)"
    if json:
        if isinstance(value, bool):
            return "true" if value else "false"
        return "a string" if isinstance(value, str) else "a number"
    text = repr(value)
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."
