"""A section's round loop as a decision: after each round `next_round` reads the loop's
counters (Rounds) and what the round did (Outcome) and says what comes next: stop, and
why; decode on in the same sequence (kv); or close the stream and send a new request, to
retry what was cut or to continue. Pure: section.py streams the rounds and applies it.

What it counts is tokens, not rounds, so a section cut into short rounds decides as one
cut into long ones: its budget is max_rounds x max_tokens tokens (a cut gives back what it
threw away), and a retry's stronger settings last RETRY_TOKENS tokens across rounds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from gen.pipeline.run.constraint import ITEM_RETRIES
from gen.pipeline.run.continuation import RoundMode

# a retry that kept this many words before the next loop has worked: the count starts again
RETRY_PROGRESS_WORDS = 80
# a retry samples this many tokens with its stronger settings (counted across kv rounds),
# then the section goes on with its own in a new request (a hotter, more penalised
# sampler drifts off the topic if left on)
RETRY_TOKENS = 128
# rounds cut off by max_tokens in a row that add no letter or digit end the section (in
# rounds, not tokens: the junk filter drops such text, so it has no place to count from;
# the one decision here that depends on the round size)
STALLED_ROUNDS = 2

# how a round was cut short: a list item refused, a loop (or an echo, or a sibling's title
# begun early), a reader check (junk, another script), or the end the length policy or a
# sibling's title set; or a paragraph far off topic (drift)
Cut = Literal["item", "loop", "junk", "language", "gibberish", "chatter", "drift", "end"]
Why = Literal[
    "items", "loops", "junk", "language", "gibberish", "chatter", "drift", "end", "stalled",
    "rounds", "window", "finished", "budget",
]  # fmt: skip
# a Repetition's kind as a cut (any other kind is a loop)
CUTS: dict[str, Cut] = {
    "item": "item", "junk": "junk", "language": "language", "gibberish": "gibberish",
    "chatter": "chatter", "drift": "drift", "shout": "junk", "conclusion": "end",
}  # fmt: skip
# the loop checks that judge (a refrain, a collapse of the vocabulary, one word crowding the
# rest, a restart, an echo) and drift: when the retries keep writing what one of them cuts,
# it yields, the section goes on and keeps what it writes, and the manifest says so. A loop
# no reader would keep (a span or a sentence said again, a count, a run-on word), junk,
# another script, gibberish and an assistant's talk end the section as before.
YIELDING = frozenset({"refrain", "collapse", "word", "restart", "echo", "drift"})
# the cuts retried like a loop, and what the section's end is called when they keep coming
LOOPED: dict[Cut, Why] = {
    "loop": "loops", "junk": "junk", "language": "language", "gibberish": "gibberish",
    "chatter": "chatter", "drift": "drift",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Rounds:
    """The loop's counters, from one round to the next."""

    retries: int = 0  # retries after a loop or a refused item, in all
    stuck: int = 0  # retries in a row, each looping again within RETRY_PROGRESS_WORDS
    retry_mark: int = 0  # where the text stood at the last retry
    # tokens of the budget spent: the text's as kept at the last cut, and every round's since
    spent: int = 0
    strong: int = 0  # tokens the retry still samples with its stronger settings
    avoid: frozenset[str] = frozenset()  # words the loops since the last recovery leaned on
    extend: bool = False  # the next round writes on past where the model stopped
    stalls: int = 0  # rounds in a row cut off by max_tokens that wrote no letter or digit
    sound_end: int = 0  # where the text stood after the last round that added words
    yielded: frozenset[str] = frozenset()  # the checks that yielded (YIELDING)


@dataclass(frozen=True, slots=True)
class Rules:
    """What the section's settings fix for all its rounds."""

    strategy: RoundMode  # how a round cut off by max_tokens goes on (kv, prefix, chat)
    max_rounds: int
    loop_retries: int
    max_tokens: int
    window: int
    targeted: bool = False  # the section has a target length
    shaped: bool = False  # its output is held to a shape whose end the grammar decides

    @property
    def budget(self) -> int:
        """The tokens the section's rounds may write (kept, or spent before a cut)."""
        return self.max_rounds * self.max_tokens


def _never_short(end: int) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the round just streamed did."""

    rounds: int  # rounds run so far, this one included
    end: int  # the text's length after it
    shown: int  # how much of the text was already sent (it is never cut away)
    tokens: int = 0  # the tokens it wrote (not cut): max_tokens when cut off by them
    kept: int = 0  # cut: the tokens of the text as it is kept
    progress: int = 0  # words written since the last retry's mark
    cut: Cut | None = None
    leaned: tuple[str, ...] = ()  # the words a loop leaned on
    kind: str | None = None  # the check that cut it (a Repetition's kind)
    refusals: int = 0  # a held list's refusals in a row without a new item between them
    finish: str | None = "stop"  # the round's finish_reason, when it was not cut
    used: int | None = None  # prompt + completion tokens, where the backend said them
    wrote: bool = True  # it added a letter or digit
    # it belongs to a request to write on past the model's end that added no letter or
    # digit (a kv round's request: since the last new one)
    idle: bool = False
    short: Callable[[int], bool] = _never_short  # the text up to `end` is short of its least


@dataclass(frozen=True, slots=True)
class Stop:
    """The section ends now (its stream is closed on the way out)."""

    why: Why
    truncated: bool | None = None  # the record's `truncated`; None: left as it is
    degenerate: bool = False
    ended_by: str | None = None  # a finish other than stop or length (content_filter, ...)
    keep: int | None = None  # the text is cut back to this length first


@dataclass(frozen=True, slots=True)
class Resume:
    """kv: the same sequence decodes on for up to `tokens` more (ending where the budget,
    the window or a retry's stronger settings do); it carries `carried` tokens of context,
    the next round's prompt."""

    tokens: int
    carried: int


@dataclass(frozen=True, slots=True)
class Retry:
    """The round was cut (a loop, a refused item): the stream is closed, what it still
    holds back dropped with the cut, and the text so far is sent again in `mode`, sampled
    afresh. `last`: the rounds are used up, the section ends instead."""

    mode: RoundMode
    last: bool = False
    yielded: str | None = None  # this check cut every retry: it yields from now on


@dataclass(frozen=True, slots=True)
class Continue:
    """The stream is closed, what it still holds back added to the text, and a new request
    goes on in `mode`. `last`: the rounds are used up, the section ends instead."""

    mode: RoundMode
    last: bool = False


Decision = Stop | Resume | Retry | Continue


def _yielding(done: Outcome) -> str | None:
    """The check that cut the round, where it may yield after its retries: drift only past
    text it kept (a section whose every first paragraph is off its topic has nothing on it
    to go on from)."""
    if done.kind not in YIELDING or (done.kind == "drift" and done.end == 0):
        return None
    return done.kind


def next_round(state: Rounds, done: Outcome, rules: Rules) -> tuple[Rounds, Decision]:
    """The counters after the round, and what happens next."""
    state = replace(state, extend=False)  # an extended round is only ever the next one
    weakened = False  # the retry's stronger settings ran out in this round
    if done.cut is not None and done.cut != "end":
        state = replace(state, spent=done.kept)  # what the cut threw away is given back
    else:
        weakened = 0 < state.strong <= done.tokens
        strong = max(0, state.strong - done.tokens)
        state = replace(state, spent=state.spent + done.tokens, strong=strong)
    if done.cut == "item":
        if done.refusals > 2 * ITEM_RETRIES:
            return state, Stop("items")  # stop: the list ends with the items it has
        state = replace(state, retries=state.retries + 1)
        return state, Retry(_resend(rules.strategy), last=_used_up(state, rules))
    looped = LOOPED.get(done.cut) if done.cut is not None else None
    if looped is not None:
        if done.progress >= RETRY_PROGRESS_WORDS:
            state = replace(state, stuck=0)  # the last retry went on soundly for a while
        kind = _yielding(done)
        if state.stuck >= rules.loop_retries and kind is not None:
            # the check cut every retry: it yields, and the section goes on with its own
            # settings from where it was cut (a cut never ends a section short)
            state = replace(
                state,
                stuck=0,
                avoid=frozenset(),
                retries=state.retries + 1,
                retry_mark=done.end,
                strong=0,
                yielded=state.yielded | {kind},
            )
            return state, Retry(_resend(rules.strategy), _used_up(state, rules), kind)
        if state.stuck >= rules.loop_retries:
            # stop: it loops again (or writes junk, or gibberish) after every retry
            return state, Stop(looped, degenerate=True)
        state = replace(
            state,
            stuck=state.stuck + 1,
            avoid=state.avoid | set(done.leaned),
            retries=state.retries + 1,
            retry_mark=done.end,
            strong=RETRY_TOKENS,
        )
        return state, Retry(_resend(rules.strategy), last=_used_up(state, rules))
    if done.cut == "end":
        return state, Stop("end")  # stop: the length policy or a sibling's title ended it

    stalled = done.finish == "length" and not done.wrote
    state = replace(
        state,
        stalls=state.stalls + 1 if stalled else 0,
        sound_end=state.sound_end if stalled else done.end,
    )
    if state.stalls >= STALLED_ROUNDS:
        # stop: whole rounds add no letters (symbols, broken bytes); they are cut away
        keep = max(state.sound_end, done.shown)
        return state, Stop("stalled", truncated=done.short(keep), degenerate=True, keep=keep)
    if done.finish == "length":
        if _used_up(state, rules):
            # stop: the budget is spent; a section past its target is complete
            return state, Stop("rounds", truncated=not rules.targeted or done.short(done.end))
        if weakened:
            # the retry's stronger settings are spent: back to the section's own (a new
            # request, the same text); one that wrote on soundly is no longer stuck
            if done.progress >= RETRY_PROGRESS_WORDS:
                state = replace(state, stuck=0, avoid=frozenset())
            return state, Continue(_resend(rules.strategy))
        if rules.strategy != "kv":  # go on (past the target: to a boundary)
            return state, Continue(rules.strategy)
        if done.used is None:
            raise RuntimeError("a kv round ended without usage")
        room = rules.window - done.used
        if room < 1:
            # stop: the context window cannot hold another round
            return state, Stop("window", truncated=True)
        return state, Resume(round_tokens(state, rules, room), done.used)
    if done.finish == "stop" and done.short(done.end) and not rules.shaped and not done.idle:
        # short of its target: a model that can continue its own text writes on past its
        # end after a paragraph break, its end of text held off a while; a chat server is
        # asked for more (not again once a request has added nothing)
        mode: RoundMode = "prefix" if rules.strategy in ("kv", "prefix") else "more"
        state = replace(state, extend=mode == "prefix")
        return state, Continue(mode, last=_used_up(state, rules))
    # stop: the model finished (or a remote filter ended it)
    ended_by = done.finish if done.finish not in ("stop", "length") else None
    return state, Stop("finished", ended_by=ended_by)


def round_tokens(state: Rounds, rules: Rules, room: int) -> int:
    """The next round's max_tokens: max_tokens, or less where the budget, the context
    `room` or a retry's stronger settings end first (at least 1)."""
    tokens = min(rules.max_tokens, room, rules.budget - state.spent)
    if state.strong:
        tokens = min(tokens, state.strong)
    return max(1, tokens)


def budget_stop(prompt_tokens: int | None, window: int, cut_off: bool) -> Stop | None:
    """A new request's prompt, fitted (None: the text so far no longer fits the budget):
    stop when the context cannot hold another round. `cut_off`: the last round ended at
    max_tokens (then the section is truncated)."""
    if prompt_tokens is None or window - prompt_tokens < 1:
        return Stop("budget", truncated=cut_off)  # stop: the context budget is spent
    return None


def _resend(strategy: RoundMode) -> RoundMode:
    """How a round that needs a new request (other settings, trimmed text) goes on: the
    text as an open assistant message where the backend allows it, else a chat turn."""
    return "prefix" if strategy in ("kv", "prefix") else "chat"


def _used_up(state: Rounds, rules: Rules) -> bool:
    """Is the budget spent?"""
    return state.spent >= rules.budget
