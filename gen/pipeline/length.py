"""A section's length plan: the rounds its target needs, from the target, the model's tokens
per word for the script it is written in and `max_tokens`, bounded by the context window;
and, where the target cannot be reached, why, with the numbers.

Arithmetic over counts: a run measures tokens per word with the backend's own tokenizer
(`measure_rate`); `gen validate`, which has no tokenizer, takes a conservative figure per
script (`conservative_rate`)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from gen.pipeline.spec import GenerationSettings
from gen.text.words import CJK_CHAR, count_words

DEFAULT_ROUNDS = 4  # a section without a target, and the least a target gets
# the rounds a target gets cover this many times its tokens: the text the checks cut (a
# loop, an echo, a seam), rounds the model ends early and that are extended, the way on
# past the target to a paragraph break, and output that costs more than the sample
MARGIN = 1.5
# a prompt with this many words is measured too; its rate wins where it is higher (a
# Latin-script language other than English costs an English-trained tokenizer more)
PROMPT_WORDS = 20

Script = Literal["latin", "cyrillic", "cjk", "other"]

# calibration samples: plain expository prose with a heading, about a hundred words each
SAMPLES: dict[Script, str] = {
    "latin": (
        "## How towns grow\n\n"
        "Most towns grew up beside a river or a road, and their shape still shows it. The "
        "oldest streets follow the water or the track that carried goods to market, while "
        "newer districts were laid out in straight lines by planners who worked from maps "
        "rather than from habit. Walking from the centre to the edge, a visitor can read the "
        "history of the place in its buildings: stone houses give way to brick terraces, "
        "then to concrete blocks and finally to low houses with gardens. Each change marks "
        "a new way of working, travelling and living together.\n"
    ),
    "cyrillic": (
        "## Как растут города\n\n"
        "Большинство городов выросло у реки или дороги, и их форма до сих пор это "
        "показывает. Самые старые улицы идут вдоль воды или пути, по которому везли товары "
        "на рынок, а новые кварталы проложены прямыми линиями по картам. Проходя от центра "
        "к окраине, можно прочитать историю места по его зданиям: каменные дома сменяются "
        "кирпичными, затем бетонными, и наконец низкими домами с садами. Каждая перемена "
        "отмечает новый способ работать, ездить и жить вместе.\n"
    ),
    "cjk": (
        "## 城镇是怎样长大的\n\n"
        "大多数城镇都是沿着河流或道路发展起来的，它们的形状至今仍能看出这一点。最古老的街道"
        "顺着河水或运送货物的小路延伸，而较新的街区则由规划者按照地图划成整齐的直线。从市中心"
        "走到城市边缘，游客可以从建筑中读出这个地方的历史：石头房子之后是砖砌的联排住宅，再往"
        "外是混凝土楼房，最后是带花园的低矮住宅。每一次变化都标志着人们工作、出行和共同生活"
        "方式的改变。\n"
    ),
}
# tokens per word without a tokenizer: above what the samples cost the bundled model
# (latin 1.1, cjk 1.9, cyrillic 4.7) and o200k (1.1, 1.4, 3.0), and what the bundled
# model's own English and Chinese cost as it writes them (1.2 to 1.3, 2.4 to 2.7); other
# Latin-script languages can cost more (French: 1.9); "other" scripts cost a byte-level
# tokenizer up to a token a byte
CONSERVATIVE: dict[Script, float] = {"latin": 1.5, "cyrillic": 5.0, "cjk": 3.0, "other": 6.0}


def _family(ch: str) -> Script:
    if CJK_CHAR.fullmatch(ch):  # a word each, as gen.text.words counts them
        return "cjk"
    code = ord(ch)
    if code < 0x0250 or 0x1E00 <= code < 0x1F00:
        return "latin"
    if 0x0400 <= code < 0x0530:
        return "cyrillic"
    return "other"


def script_of(text: str) -> Script:
    """The script most of `text`'s words are written in (a CJK character is a word, as
    count_words counts them); "latin" for text without letters."""
    words: Counter[Script] = Counter()
    for token in text.split():
        letters = Counter(_family(ch) for ch in token if ch.isalpha())
        if "cjk" in letters:  # each of its characters is a word
            words["cjk"] += letters.pop("cjk")
        if letters:
            words[letters.most_common(1)[0][0]] += 1
    return words.most_common(1)[0][0] if words else "latin"


@dataclass(frozen=True, slots=True)
class Rate:
    """Tokens per word of the script a section is written in."""

    script: Script
    tokens_per_word: float
    measured: bool  # with the model's tokenizer; False: the conservative figure

    def describe(self) -> str:
        how = "measured with the model's tokenizer"
        if not self.measured:
            how = "a conservative figure; a run measures the model's tokenizer"
        return f"{self.tokens_per_word:.2f} tokens a word ({self.script} script, {how})"


def measure_rate(prompt: str, count_text: Callable[[str], int]) -> Rate:
    """Tokens per word for the script of `prompt`, with the backend's `count_text`: its
    family's calibration sample (SAMPLES), or the prompt itself where it has PROMPT_WORDS
    words and costs more; a script without a sample is measured on the prompt alone."""
    script = script_of(prompt)
    rates = []
    if script in SAMPLES:
        sample = SAMPLES[script]
        rates.append(count_text(sample) / count_words(sample))
    words = count_words(prompt)
    if words >= PROMPT_WORDS or (not rates and words):
        rates.append(count_text(prompt) / words)
    if not rates:
        return conservative_rate(prompt)
    return Rate(script, round(max(rates), 3), measured=True)


def conservative_rate(prompt: str) -> Rate:
    script = script_of(prompt)
    return Rate(script, CONSERVATIVE[script], measured=False)


@dataclass(frozen=True, slots=True)
class Window:
    """The context window a section's text has: `room` tokens beside its first prompt."""

    size: int
    prompt: int
    room: int


def text_room(size: int, prompt: int, strategy: str, reserve: int, max_tokens: int) -> Window:
    """The room `kv` keeps prompt and text in one sequence of `size` tokens; `prefix` and
    `chat` send the text again with the prompt, which must fit `size - reserve`, and one
    more round of up to `max_tokens` follows the last that fits."""
    if strategy == "kv":
        return Window(size, prompt, size - prompt)
    return Window(size, prompt, min(size, size - reserve + max_tokens) - prompt)


@dataclass(frozen=True, slots=True)
class LengthPlan:
    """The rounds a section may use (retries aside), and whether its target is reachable.
    `rounds_from`: "target" (planned), "max_rounds" (set explicitly) or "default" (no
    target). `words`: the length aimed at (target_words, else min_words); `tokens`: what
    they take at the rate; `room`: what the window leaves the text; `why`: None when the
    target is reachable."""

    rounds: int
    rounds_from: Literal["target", "max_rounds", "default"]
    words: int | None = None
    rate: Rate | None = None
    tokens: int | None = None
    room: int | None = None
    why: str | None = None

    @property
    def reachable(self) -> bool:
        return self.why is None

    def to_json(self) -> dict[str, Any]:
        return {
            "rounds": self.rounds,
            "rounds_from": self.rounds_from,
            "words": self.words,
            "script": None if self.rate is None else self.rate.script,
            "tokens_per_word": None if self.rate is None else self.rate.tokens_per_word,
            "tokens": self.tokens,
            "room": self.room,
            "reachable": self.reachable,
            "why": self.why,
        }

    def warning(self, field: str) -> str | None:
        """`field` (the section, as `sections.<id>`) and why its target is out of reach."""
        if self.why is None:
            return None
        can = "cannot" if self.rate is None or self.rate.measured else "may not"
        return f"{field}: a target of {self.words} words {can} be reached: {self.why}"


def plan_length(
    lengths: tuple[int | None, int | None, int | None],
    rate: Rate | None,
    *,
    max_rounds: int | None,
    max_tokens: int,
    window: Window | None,
) -> LengthPlan:
    """The plan for (target_words, min_words, max_words): `max_rounds` when it is set,
    else DEFAULT_ROUNDS without a target, else the rounds of `max_tokens` that hold the
    target's tokens MARGIN times over (at least DEFAULT_ROUNDS), no more than the window
    can take. `rate` is needed with a target; `window` None: unknown (a remote model)."""
    target, least, most = lengths
    words = target if target is not None else least
    if words is None or rate is None:
        return LengthPlan(max_rounds or DEFAULT_ROUNDS, "max_rounds" if max_rounds else "default")
    tokens = math.ceil(words * rate.tokens_per_word)
    planned = max(DEFAULT_ROUNDS, math.ceil(tokens * MARGIN / max_tokens))
    if window is not None:  # rounds past what the window holds would only be refused
        planned = min(planned, max(DEFAULT_ROUNDS, math.ceil(window.room * MARGIN / max_tokens)))
    why: list[str] = []
    if most is not None and most < words:
        name = "target_words" if target is not None else "min_words"
        why.append(f"max_words ({most}) is below {name} ({words}): the section ends by then")
    if window is not None and tokens > window.room:
        why.append(
            f"{words} words take about {tokens} tokens at {rate.describe()}, more than the "
            f"{max(window.room, 0)} the {window.size}-token context window leaves the text "
            f"beside the {window.prompt}-token prompt"
        )
    if max_rounds is not None and max_rounds * max_tokens < tokens:
        held = max_rounds * max_tokens
        why.append(
            f"max_rounds {max_rounds} x max_tokens {max_tokens} = {held} tokens hold about "
            f"{held / rate.tokens_per_word:.0f} words at {rate.describe()}, and {words} words "
            f"take about {tokens}; leave max_rounds unset to plan {planned} rounds"
        )
    room = None if window is None else window.room
    reason = "; ".join(why) or None
    if max_rounds is not None:
        return LengthPlan(max_rounds, "max_rounds", words, rate, tokens, room, reason)
    return LengthPlan(planned, "target", words, rate, tokens, room, reason)


def after_run(
    plan: LengthPlan, words: int, truncated: bool, rounds: int, tokens: int
) -> LengthPlan:
    """The plan as it turned out: a section cut off short of its words (`truncated`) after
    `rounds` rounds (retries aside) that wrote `tokens` tokens says why."""
    if plan.words is None or plan.rate is None or plan.why or not truncated or words >= plan.words:
        return plan
    cause = f"its {plan.rounds} rounds ran out" if rounds >= plan.rounds else "the window filled"
    why = (
        f"it stopped at {words} words when {cause}: its rounds wrote {tokens} tokens, "
        f"{tokens / max(words, 1):.2f} a word kept, against the "
        f"{plan.rate.tokens_per_word:.2f} planned"
    )
    return replace(plan, why=why)


def plan_section(
    settings: GenerationSettings,
    lengths: tuple[int | None, int | None, int | None],
    prompt: str,
    rate: Callable[[str], Rate],
    window: Window | None,
) -> LengthPlan:
    """plan_length for a section's settings and (target, min, max) words; `rate` gives
    the tokens per word of the prompt's script (asked only where there is a target)."""
    targeted = lengths[0] is not None or lengths[1] is not None
    return plan_length(
        lengths,
        rate(prompt) if targeted else None,
        max_rounds=settings.max_rounds,
        max_tokens=settings.max_tokens,
        window=window,
    )
