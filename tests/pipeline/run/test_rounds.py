"""The round loop's decision as a table: the loop's counters and what a round did in, the
counters after it and what happens next out. No backend: next_round is a pure function."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from gen.pipeline.run.rounds import (
    RETRY_TOKENS,
    Continue,
    Decision,
    Outcome,
    Resume,
    Retry,
    Rounds,
    Rules,
    Stop,
    budget_stop,
    next_round,
)

KV = Rules(strategy="kv", max_rounds=4, loop_retries=2, max_tokens=500, window=4000)
PREFIX, CHAT = replace(KV, strategy="prefix"), replace(KV, strategy="chat")
TARGETED = replace(KV, targeted=True)
START = Rounds()


def short_below(least: int) -> Callable[[int], bool]:
    """A text is short of its least while it has fewer than `least` characters."""
    return lambda end: end < least


def done(**fields: object) -> Outcome:
    """A round 1 that wrote 400 characters, none of them shown yet, and stopped; `tokens`
    the tokens it wrote, `kept` those of the text a cut kept (KV's budget: 4 x 500)."""
    base = Outcome(rounds=1, end=400, shown=0)
    return replace(base, **fields)  # type: ignore[arg-type]


# fmt: off
ROWS: list[tuple[str, Rounds, Outcome, Rules, Rounds, Decision]] = [
    # -- a list item refused
    (
        "item refused: sampled again, the text sent as an open assistant message",
        START, done(cut="item", refusals=1, kept=100), KV,
        Rounds(retries=1, spent=100), Retry("prefix"),
    ),
    (
        "item refused on a chat strategy: a chat turn",
        START, done(cut="item", refusals=3, kept=100), CHAT,
        Rounds(retries=1, spent=100), Retry("chat"),
    ),
    (
        "item refused more than 2 x ITEM_RETRIES times in a row: the list ends",
        Rounds(retries=8), done(cut="item", refusals=9, kept=100), KV,
        Rounds(retries=8, spent=100), Stop("items"),
    ),
    (
        "item refused with the text kept filling the budget: the section ends",
        START, done(cut="item", refusals=1, kept=500), replace(KV, max_rounds=1),
        Rounds(retries=1, spent=500), Retry("prefix", last=True),
    ),
    # -- a loop
    (
        "loop: retried from the trimmed text, its words avoided, the retry marked, the "
        "budget spent back to the text kept, RETRY_TOKENS of stronger sampling",
        Rounds(spent=1500), done(cut="loop", leaned=("signal",), end=120, kept=30), KV,
        Rounds(retries=1, stuck=1, retry_mark=120, avoid=frozenset({"signal"}), spent=30,
               strong=RETRY_TOKENS),
        Retry("prefix"),
    ),
    (
        "loop on a chat strategy: retried as a chat turn",
        START, done(cut="loop", end=120, kept=30), CHAT,
        Rounds(retries=1, stuck=1, retry_mark=120, spent=30, strong=RETRY_TOKENS),
        Retry("chat"),
    ),
    (
        "loop again right after each of loop_retries retries: degenerate",
        Rounds(retries=2, stuck=2), done(cut="loop", progress=79), KV,
        Rounds(retries=2, stuck=2), Stop("loops", degenerate=True),
    ),
    (
        "loop after a retry that wrote RETRY_PROGRESS_WORDS soundly: the count starts again",
        Rounds(retries=2, stuck=2, avoid=frozenset({"a"})),
        done(cut="loop", progress=80, leaned=("b",), end=900, kept=200), KV,
        Rounds(retries=3, stuck=1, retry_mark=900, avoid=frozenset({"a", "b"}), spent=200,
               strong=RETRY_TOKENS),
        Retry("prefix"),
    ),
    (
        "no loop retries allowed: the first loop is the end",
        START, done(cut="loop"), replace(KV, loop_retries=0),
        START, Stop("loops", degenerate=True),
    ),
    # -- a reader check: junk, or another script
    (
        "a row of junk: retried like a loop, the junk's first character avoided",
        START, done(cut="junk", leaned=("👩",), end=0), KV,
        Rounds(retries=1, stuck=1, avoid=frozenset({"👩"}), strong=RETRY_TOKENS),
        Retry("prefix"),
    ),
    (
        "another script: retried like a loop (a new seed)",
        START, done(cut="language", end=40, kept=10), CHAT,
        Rounds(retries=1, stuck=1, retry_mark=40, spent=10, strong=RETRY_TOKENS),
        Retry("chat"),
    ),
    (
        "junk again after each of loop_retries retries: degenerate, for junk",
        Rounds(retries=2, stuck=2), done(cut="junk"), KV,
        Rounds(retries=2, stuck=2), Stop("junk", degenerate=True),
    ),
    (
        "another script again after each retry: degenerate, for the language",
        Rounds(retries=2, stuck=2), done(cut="language"), KV,
        Rounds(retries=2, stuck=2), Stop("language", degenerate=True),
    ),
    # -- the length policy or a sibling's title
    (
        "target reached (or a sibling's title begun): the section ends at that boundary",
        START, done(cut="end", finish="length"), TARGETED,
        START, Stop("end"),
    ),
    # -- cut off by max_tokens
    (
        "cut off on kv: the same sequence decodes on",
        START, done(finish="length", tokens=500, used=1000), KV,
        Rounds(sound_end=400, spent=500), Resume(500, 1000),
    ),
    (
        "cut off on kv with less room than max_tokens: only what the window holds",
        START, done(finish="length", tokens=500, used=3800), KV,
        Rounds(sound_end=400, spent=500), Resume(200, 3800),
    ),
    (
        "cut off on kv with less budget than max_tokens: only what the budget holds",
        Rounds(spent=1200), done(finish="length", tokens=500, used=1000), KV,
        Rounds(sound_end=400, spent=1700), Resume(300, 1000),
    ),
    (
        "cut off on kv while retrying: the stronger sampling's tokens left at most",
        Rounds(stuck=1, retries=1, strong=RETRY_TOKENS, spent=100),
        done(finish="length", tokens=50, used=1000, progress=10), KV,
        Rounds(stuck=1, retries=1, strong=RETRY_TOKENS - 50, spent=150, sound_end=400),
        Resume(RETRY_TOKENS - 50, 1000),
    ),
    (
        "cut off on kv with the window full: truncated",
        START, done(finish="length", tokens=500, used=4000), KV,
        Rounds(sound_end=400, spent=500), Stop("window", truncated=True),
    ),
    (
        "cut off on prefix: the text so far goes out as an open assistant message",
        START, done(finish="length", tokens=500), PREFIX,
        Rounds(sound_end=400, spent=500), Continue("prefix"),
    ),
    (
        "cut off on chat: a turn asking to continue",
        START, done(finish="length", tokens=500), CHAT,
        Rounds(sound_end=400, spent=500), Continue("chat"),
    ),
    (
        "cut off with the budget (max_rounds x max_tokens) spent, no target: truncated",
        Rounds(spent=1500), done(finish="length", tokens=500), KV,
        Rounds(sound_end=400, spent=2000), Stop("rounds", truncated=True),
    ),
    (
        "cut off with the budget spent past the target: complete",
        Rounds(spent=1500), done(finish="length", tokens=500, short=short_below(400)),
        TARGETED,
        Rounds(sound_end=400, spent=2000), Stop("rounds", truncated=False),
    ),
    (
        "cut off with the budget spent short of the target: truncated",
        Rounds(spent=1500), done(finish="length", tokens=500, short=short_below(401)),
        TARGETED,
        Rounds(sound_end=400, spent=2000), Stop("rounds", truncated=True),
    ),
    (
        "the stronger sampling's tokens spent: back to the section's own (a new request), "
        "still stuck after fewer than RETRY_PROGRESS_WORDS",
        Rounds(retries=1, stuck=1, strong=28, avoid=frozenset({"signal"})),
        done(finish="length", tokens=28, progress=79), KV,
        Rounds(retries=1, stuck=1, spent=28, sound_end=400, avoid=frozenset({"signal"})),
        Continue("prefix"),
    ),
    (
        "... after RETRY_PROGRESS_WORDS soundly: no longer stuck",
        Rounds(retries=1, stuck=1, strong=28, avoid=frozenset({"signal"})),
        done(finish="length", tokens=28, progress=80), KV,
        Rounds(retries=1, spent=28, sound_end=400), Continue("prefix"),
    ),
    (
        "... on chat: a chat turn",
        Rounds(retries=1, stuck=1, strong=28),
        done(finish="length", tokens=28, progress=80), CHAT,
        Rounds(retries=1, spent=28, sound_end=400), Continue("chat"),
    ),
    (
        "... with the budget spent: the section ends",
        Rounds(retries=1, stuck=1, strong=28, spent=1990),
        done(finish="length", tokens=28, progress=80), KV,
        Rounds(retries=1, stuck=1, spent=2018, sound_end=400),
        Stop("rounds", truncated=True),
    ),
    # -- rounds that write no letter or digit
    (
        "one stalled round: counted, the sound end kept where it was",
        Rounds(sound_end=300), done(finish="length", tokens=500, wrote=False, used=1000), KV,
        Rounds(stalls=1, sound_end=300, spent=500), Resume(500, 1000),
    ),
    (
        "STALLED_ROUNDS in a row: cut back to the sound end, degenerate, still short",
        Rounds(stalls=1, sound_end=300),
        done(finish="length", wrote=False, shown=100, short=short_below(350)), KV,
        Rounds(stalls=2, sound_end=300),
        Stop("stalled", truncated=True, degenerate=True, keep=300),
    ),
    (
        "STALLED_ROUNDS in a row: never cut into what was shown",
        Rounds(stalls=1, sound_end=300),
        done(finish="length", wrote=False, shown=360, short=short_below(350)), KV,
        Rounds(stalls=2, sound_end=300),
        Stop("stalled", truncated=False, degenerate=True, keep=360),
    ),
    (
        "a round that writes words again: the stall count starts again",
        Rounds(stalls=1, sound_end=300), done(finish="length", tokens=500, used=1000), KV,
        Rounds(sound_end=400, spent=500), Resume(500, 1000),
    ),
    (
        "a stalled round that stopped is no stall",
        Rounds(stalls=1, sound_end=300), done(wrote=False), KV,
        Rounds(sound_end=400), Stop("finished"),
    ),
    # -- the model stopped
    (
        "stopped: the section is done",
        START, done(tokens=300), KV,
        Rounds(sound_end=400, spent=300), Stop("finished"),
    ),
    (
        "stopped short of the target on kv: writes on past its end",
        START, done(tokens=300, short=short_below(401)), TARGETED,
        Rounds(sound_end=400, spent=300, extend=True), Continue("prefix"),
    ),
    (
        "stopped short on prefix: writes on past its end",
        START, done(short=short_below(401)), replace(PREFIX, targeted=True),
        Rounds(sound_end=400, extend=True), Continue("prefix"),
    ),
    (
        "stopped short on chat: asked for more",
        START, done(short=short_below(401)), replace(CHAT, targeted=True),
        Rounds(sound_end=400), Continue("more"),
    ),
    (
        "stopped short with the budget spent: the stream closes and the section ends",
        Rounds(spent=1900), done(tokens=100, short=short_below(401)), TARGETED,
        Rounds(sound_end=400, spent=2000, extend=True), Continue("prefix", last=True),
    ),
    (
        "stopped short after a request to write on that added nothing: not asked again",
        START, done(short=short_below(401), idle=True), TARGETED,
        Rounds(sound_end=400), Stop("finished"),
    ),
    (
        "stopped short in a shape the grammar ends (a list, a schema): done",
        START, done(short=short_below(401)), replace(TARGETED, shaped=True),
        Rounds(sound_end=400), Stop("finished"),
    ),
    (
        "an extended round is only the next one",
        Rounds(extend=True), done(finish="length", tokens=500), PREFIX,
        Rounds(sound_end=400, spent=500), Continue("prefix"),
    ),
    (
        "ended by a remote filter: said in the record",
        START, done(finish="content_filter"), KV,
        Rounds(sound_end=400), Stop("finished", ended_by="content_filter"),
    ),
]
# fmt: on


@pytest.mark.parametrize(
    ("state", "outcome", "rules", "after", "decision"),
    [pytest.param(*row[1:], id=row[0]) for row in ROWS],
)
def test_next_round(
    state: Rounds, outcome: Outcome, rules: Rules, after: Rounds, decision: Decision
) -> None:
    assert next_round(state, outcome, rules) == (after, decision)


def test_a_kv_round_without_usage_cannot_go_on() -> None:
    with pytest.raises(RuntimeError, match="without usage"):
        next_round(START, done(finish="length"), KV)


@pytest.mark.parametrize(
    ("prompt_tokens", "cut_off", "decision"),
    [
        pytest.param(3999, True, None, id="room for one token: the round goes"),
        pytest.param(4000, True, Stop("budget", truncated=True), id="no room, cut off"),
        pytest.param(4000, False, Stop("budget", truncated=False), id="no room, it stopped"),
        pytest.param(None, True, Stop("budget", truncated=True), id="overflow, cut off"),
        pytest.param(None, False, Stop("budget", truncated=False), id="overflow, it stopped"),
    ],
)
def test_budget_stop(prompt_tokens: int | None, cut_off: bool, decision: Stop | None) -> None:
    assert budget_stop(prompt_tokens, 4000, cut_off) == decision


@pytest.mark.parametrize("kind", ["collapse", "refrain", "word", "restart", "echo", "drift"])
def test_a_judging_check_that_cuts_every_retry_yields(kind: str) -> None:
    """A plan whose labels repeat, cut as a collapse after every retry: the check yields,
    and the section goes on with its own settings from where it was cut."""
    stuck = Rounds(retries=2, stuck=2, strong=RETRY_TOKENS, avoid=frozenset({"swift"}))
    cut = Outcome(rounds=3, end=900, shown=400, kept=300, progress=10, cut="loop", kind=kind)
    state, decision = next_round(stuck, cut, KV)
    assert decision == Retry("prefix", yielded=kind)
    assert state.yielded == {kind} and state.stuck == 0 and state.strong == 0
    assert state.avoid == frozenset()


@pytest.mark.parametrize(
    ("cut", "kind", "why"),
    [("loop", "span", "loops"), ("loop", "sentence", "loops"), ("junk", "junk", "junk"),
     ("chatter", "chatter", "chatter"), ("gibberish", "gibberish", "gibberish")],
)  # fmt: skip
def test_a_loop_no_reader_keeps_still_ends_the_section(cut: str, kind: str, why: str) -> None:
    stuck = Rounds(retries=2, stuck=2)
    done = Outcome(rounds=3, end=900, shown=400, kept=300, cut=cut, kind=kind)  # type: ignore[arg-type]
    _, decision = next_round(stuck, done, KV)
    assert decision == Stop(why, degenerate=True)  # type: ignore[arg-type]


def test_drift_does_not_yield_on_a_section_with_nothing_kept() -> None:
    """Every first paragraph off the topic: there is nothing on it to go on from."""
    stuck = Rounds(retries=2, stuck=2)
    done = Outcome(rounds=3, end=0, shown=0, cut="drift", kind="drift")
    _, decision = next_round(stuck, done, KV)
    assert decision == Stop("drift", degenerate=True)
