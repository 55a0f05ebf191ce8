"""The context budget: fit a section's prompt into `window - reserve` tokens by trimming
the context it was given, lowest priority first, and report what was cut.

Priority, highest first: the instructions and the section's own text (never trimmed),
the outline, the tail of the previous section, older sections (cut oldest first), and
first of all the source passages (chosen to fit beforehand; cut from their end only when a
later round's prompt has grown past the budget).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gen.backends.base import Message
from gen.errors import ContextOverflowError

# (variable, keep its tail?) in the order they are trimmed
TRIM_ORDER: tuple[tuple[str, bool], ...] = (
    ("sources", False),
    ("earlier", True),
    ("previous", True),
    ("outline", False),
)

Build = Callable[[dict[str, Any]], list[Message]]
Count = Callable[[list[Message]], int]


@dataclass(slots=True)
class Fitted:
    messages: list[Message]
    prompt_tokens: int
    trimmed_tokens: int = 0
    trimmed: dict[str, int] = field(default_factory=dict)  # variable -> characters cut
    variables: dict[str, Any] = field(default_factory=dict)


def fit_prompt(
    build: Build, variables: dict[str, Any], count: Count, limit: int, what: str
) -> Fitted:
    """Messages from `build(variables)` within `limit` tokens, trimming context variables."""
    messages = build(variables)
    full = count(messages)
    if full <= limit:
        return Fitted(messages, full, variables=variables)
    bare = {**variables, **{name: "" for name, _ in TRIM_ORDER if name in variables}}
    base = count(build(bare))
    if base > limit:
        raise ContextOverflowError(
            f"{what}: the instructions alone take {base} tokens, but the prompt may use only "
            f"{limit} (window minus reserve); shorten the prompt or raise context.window",
            prompt_tokens=base,
            limit=limit,
        )
    current = dict(variables)
    cut: dict[str, int] = {}
    for name, keep_tail in TRIM_ORDER:
        text = current.get(name)
        if not isinstance(text, str) or not text:
            continue
        without = {**current, name: ""}
        if count(build(without)) > limit:  # dropping it all is not enough: drop, go on
            current, cut[name] = without, len(text)
            continue
        lo, hi = 0, len(text)  # keeping lo characters fits, keeping hi does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            trial = {**current, name: _keep(text, mid, keep_tail)}
            if count(build(trial)) <= limit:
                lo = mid
            else:
                hi = mid
        current[name], cut[name] = _keep(text, lo, keep_tail), len(text) - lo
        break
    messages = build(current)
    tokens = count(messages)
    return Fitted(messages, tokens, full - tokens, cut, current)


def _keep(text: str, n: int, tail: bool) -> str:
    if n <= 0:
        return ""
    return text[-n:] if tail else text[:n]
