"""One section's rounds: render and fit the prompt, stream a round, continue while the
round was cut off (kv / prefix / chat) or the text is short of its target, and stop a
round that loops, trim it back to its last sound sentence and try again.

Works against the Backend protocol; the orchestrator decides what runs when.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from gen.backends.base import Backend, Delta, Message, Stream
from gen.engine.detokenizer import REPLACEMENT
from gen.errors import ContextOverflowError
from gen.pipeline.run.budget import Fitted, fit_prompt
from gen.pipeline.run.continuation import (
    CONTINUE_PROMPT,
    MORE_PROMPT,
    LengthPolicy,
    RoundMode,
    remove_overlap,
)
from gen.pipeline.run.events import EventLog
from gen.pipeline.run.headings import HeadingFilter
from gen.pipeline.run.manifest import RoundRecord, SectionRecord
from gen.pipeline.run.outline import ItemGuard, Refusal, json_list_schema, list_grammar, tidy_title
from gen.pipeline.run.prose import PROSE_REGEX
from gen.pipeline.run.repetition import ECHO_N, LoopDetector, Repetition
from gen.pipeline.spec import GenerationSettings, Pipeline, Section
from gen.pipeline.templates.render import document_title, render_count, render_prompt, render_system
from gen.sampling import Constraint, SamplingParams, build_sampling_params
from gen.text.function_words import DETERMINERS, FUNCTION_WORDS
from gen.text.listparse import item_title, parse_json_items, parse_list, title_key
from gen.text.quality import measure, ngrams, tokens
from gen.text.words import count_words, length_score

# text is shown once its sentence is complete (a loop found later can still be cut away)
_RELEASE = re.compile(r"(?<!\d)[.!?…][\"'”’)\]]*(?=\s)|[。！？]|\n")
# a line that may still become a heading, a list item or a sibling part's title: held whole
_MARKER = re.compile(r"[ \t]*(?:#|\d+[.)]|[-*+•]|\*\*|__|(?:part|chapter|section)\b)", re.I)
# what may open a heading line before a title: "## ", "2. ", "**", "Part 2: "
_LINE_MARKER = re.compile(
    r"[ \t]*(?:#{1,6}[ \t]*|\d+[.)][ \t]*|[-*+•][ \t]+|\*\*|__|"
    r"(?:part|chapter|section)[ \t]*\d*[ \t]*[:.)-]?[ \t]*)+",
    re.I,
)
HELD_SENTENCES = 5  # the last sentences are held back: a loop (a refrain takes 5) is cut unseen
# a retry that kept this many words before the next loop has worked: the count starts again
RETRY_PROGRESS_WORDS = 80
# a retry samples this many tokens with its stronger settings, then the section goes on
# with its own (a hotter, more penalised sampler drifts off the topic if left on)
RETRY_TOKENS = 128
# and with the word a refrain leans on made this much less likely (a logit bias)
RETRY_BIAS = -6.0
# a section that stopped short writes on past its end for at least this many tokens
EXTEND_MIN_TOKENS = 64
# rounds cut off by max_tokens in a row that add no letter or digit end the section
STALLED_ROUNDS = 2
MAX_HELD = 1500  # characters held back without a sentence end before they are shown anyway
# a sentence cut for saying an earlier section again is named in the next rounds' prompt
COVERED_NOTE = "Already covered earlier in the document, so do not repeat it:"
COVERED_SHOWN, COVERED_CHARS = 3, 300
# a list item refused this many times in a row is then only refused as a repeat (or as a
# title the pipeline writes itself); twice as many end the list with the items it has
ITEM_RETRIES = 4
# a refused item is sampled again at least this warm, warmer with each refusal up to a cap
ITEM_TEMPERATURE, ITEM_WARMING, ITEM_HOTTEST = 0.5, 0.1, 0.7
# the most items a list without `max_items` is held to
MAX_LIST_ITEMS = 30


@dataclass(slots=True)
class RunContext:
    pipeline: Pipeline
    backend: Backend
    events: EventLog
    window: int
    reserve: int

    @property
    def limit(self) -> int:
        return self.window - self.reserve


def sampling(
    settings: GenerationSettings,
    max_tokens: int,
    *,
    seed: int | None = None,
    stop: tuple[str, ...] = (),
    retry: int = 0,
    strength: int = 0,
    bias: tuple[tuple[int, float], ...] = (),
    least: int = 0,
    constraint: Constraint | None = None,
    warm: float = 0.0,
) -> SamplingParams:
    """The round's SamplingParams; the n-th retry after a loop samples with seed + n, and
    with DRY 1.5**strength times stronger (strength: retries in a row without progress);
    `warm`: the least temperature (a refused list item is sampled again)."""
    dry, temperature = settings.dry_multiplier, max(settings.temperature, warm)
    if retry:
        seed = None if seed is None else seed + retry
    if strength:  # (a frequency penalty would soon ban "." and "the" from a long text)
        dry = max(dry, 0.8) * 1.5**strength
        if temperature:
            temperature = max(temperature, min(1.0, temperature + 0.15 * strength))
    return build_sampling_params(
        settings,
        max_tokens=max_tokens,
        temperature=temperature,
        dry_multiplier=dry,
        logit_bias=bias,
        seed=seed,
        stop=(*settings.stop, *stop),
        min_tokens=min(max(settings.min_tokens, least), max_tokens),
        constraint=constraint,
    )


def sibling_key(title: str) -> str:
    """A title as a part's line is compared with its siblings': as words, a leading "the"
    or "a" aside ("2. Construction of bridges" is "The construction of bridges")."""
    words = title_key(title).split()
    while words[:1] and words[0] in DETERMINERS:
        words = words[1:]
    return " ".join(words)


def strategy_for(settings: GenerationSettings, backend: Backend) -> RoundMode:
    """The configured continuation; `kv` needs a backend that keeps state, else `chat`."""
    if settings.continuation == "kv" and not backend.supports_kv:
        return "chat"
    return settings.continuation


class SectionRun:
    def __init__(
        self,
        ctx: RunContext,
        section: Section,
        record: SectionRecord,
        variables: dict[str, Any],
        *,
        seed: int | None = None,
        siblings: tuple[str, ...] = (),
        lengths: tuple[int | None, int | None, int | None] | None = None,
        earlier: Sequence[str] = (),
    ) -> None:
        """`siblings`: the other items' titles of a fan-out (a line that is one of them, or
        a marker and one of them, ends the part there); `lengths`: the instance's (target,
        min, max) words when the section's are templates; `earlier`: the text of the
        sections before it in the document (a sentence that says theirs again is cut)."""
        self.ctx = ctx
        self.section = section
        self.rec = record
        self.variables = variables
        self.settings = ctx.pipeline.settings_for(section)
        self.strategy = strategy_for(self.settings, ctx.backend)
        self.seed = seed
        self.siblings = {sibling_key(t): t for t in siblings if sibling_key(t)}
        self._line_scan = 0  # where the next line to check for a sibling's title starts
        target, least, most = lengths or (None, None, None)
        self.target = target
        self.policy = LengthPolicy(target, least, most)
        self.system = render_system(ctx.pipeline, section, variables)
        self.headings = HeadingFilter(section.headings, record.title)
        self.text = ""
        self.shown = 0  # characters of self.text already sent as deltas
        self.retries = 0  # retries after a loop, in all
        self._stuck = 0  # retries in a row, each looping again within RETRY_PROGRESS_WORDS
        self._retry_mark = 0  # where the text stood at the last retry
        self._extra_rounds = 0  # rounds that do not count against max_rounds (retries)
        self._params = SamplingParams()  # what the current round samples with
        self._avoid: set[str] = set()  # words the loops since the last recovery leaned on
        self._extend = False  # this round writes on past where the model stopped
        self._stalls = 0  # rounds in a row cut off by max_tokens that wrote no letter or digit
        self._sound_end = 0  # where the text stood after the last round that added words
        self.requests: list[dict[str, Any]] = []  # per round what was sent: prompts/<key>.json
        self._round_start = 0  # where the current round's text begins in self.text
        self._round_starts: list[tuple[int, int]] = []  # (where, round): who wrote the text
        self._detector = LoopDetector()
        self._earlier = frozenset(ngrams(tokens("\n\n".join(earlier)), ECHO_N))
        self._covered: list[str] = []  # sentences cut for saying an earlier section again
        self._items = self._item_range()  # (min, max) items of a list or JSON outline
        self._guard: ItemGuard | None = None  # a held list's check of each item
        self._refused: list[str] = []  # items refused so far (the grammar bans them)
        self._item_tries = 0  # refusals in a row without a new item between them
        self._items_seen = 0  # items the guard had accepted at the last refusal

    # -- constraints ----------------------------------------------------------------

    def _item_range(self) -> tuple[int, int] | None:
        section = self.section
        if section.parse == "text":
            return None
        most = render_count(self.ctx.pipeline, section, "max_items", self.variables)
        least = render_count(self.ctx.pipeline, section, "min_items", self.variables)
        most = most or max(least or 1, MAX_LIST_ITEMS)
        least = min(least or most, most)
        return least, most

    @property
    def constrained(self) -> bool:
        """Held to a schema, regex or grammar: a `format:`, or a list or JSON outline on a
        backend that can hold it."""
        fmt = self.section.format
        if fmt == "none":
            return False
        if fmt == "prose":  # a guard, not a contract: not asked of a remote server
            return self.ctx.backend.supports_grammar
        return fmt is not None or (self._items is not None and self.ctx.backend.supports_grammar)

    @property
    def shaped(self) -> bool:
        """Is the output held to a shape whose end the grammar decides (a list, JSON, a
        schema)? Prose is held too, but may be written on past its end."""
        return self.constrained and self.section.format != "prose"

    def _constraint(self) -> Constraint | None:
        """What this round's output is held to; it reads the text already written first."""
        if not self.constrained:
            return None
        fmt = self.section.format
        if fmt == "prose":
            return Constraint("regex", PROSE_REGEX, self.text)
        if fmt is not None and fmt != "none":
            kind, text = fmt.kind_and_text()
            return Constraint(kind, text, self.text)
        least, most = self._items or (1, MAX_LIST_ITEMS)
        if self.section.parse == "json":
            return Constraint("json_schema", json_list_schema(least, most), self.text)
        if self._guard is None:
            user = render_prompt(self.ctx.pipeline, self.section, self.variables)
            self._guard = ItemGuard(user, self.exclude, title=document_title(self.ctx.pipeline))
        grammar = list_grammar(
            least,
            most,
            exclude=self.exclude,
            refused=self._refused,
            fresh_from=len(self._guard.items) + 1,
        )
        return Constraint("lark", grammar, self.text)

    def describe_constraint(self) -> dict[str, Any] | None:
        """What the output is held to, for the resume hash."""
        if not self.constrained:
            return None
        fmt = self.section.format
        if fmt == "prose":
            return {"format": "prose"}
        if fmt is not None and fmt != "none":
            return fmt.model_dump(mode="json", exclude_none=True)
        return {"parse": self.section.parse, "items": self._items, "exclude": self.exclude}

    def items(self) -> list[Any]:
        """A list or JSON section's items (at most `max_items`), repeats and the titles the
        pipeline writes itself left out."""
        most = self._items[1] if self._items else None
        if self.section.parse == "json":
            items = parse_json_items(self.text, self.exclude)
        else:
            items = parse_list(self.text, self.exclude)
        title = title_key(document_title(self.ctx.pipeline))
        items = [tidy_title(i) if isinstance(i, str) else i for i in items]
        return [i for i in items if title_key(item_title(i)) != title][:most]

    @property
    def exclude(self) -> list[str]:
        return list(self.section.exclude)

    def _item_warmth(self) -> float:
        """The least temperature a refused list item is sampled again with."""
        if not self._item_tries:
            return 0.0
        return min(ITEM_HOTTEST, ITEM_TEMPERATURE + ITEM_WARMING * (self._item_tries - 1))

    def _refuse(self, refusal: Refusal) -> Repetition:
        """A list item repeats an earlier one (or is one the pipeline writes itself): it is
        cut away and sampled again, the grammar banning it from now on."""
        accepted = len(self._guard.items) if self._guard else 0
        if accepted > self._items_seen:
            self._item_tries = 0  # items were accepted since the last refusal
        self._items_seen = accepted
        self._item_tries += 1
        if self._guard is not None:
            self._guard.lenient = self._item_tries >= ITEM_RETRIES
        self._refused.append(refusal.title)
        self.text = self.text[: max(len(self.text[: refusal.start].rstrip()), self.shown)]
        detail = f"item {refusal.title!r} refused: {refusal.reason}"
        return Repetition("item", refusal.start, len(self.text), detail)

    # -- prompt ---------------------------------------------------------------------

    def build(self, variables: dict[str, Any], mode: RoundMode = "initial") -> list[Message]:
        messages: list[Message] = []
        if self.system:
            messages.append({"role": "system", "content": self.system})
        user = render_prompt(self.ctx.pipeline, self.section, variables)
        if self._covered:  # after an echo was cut: name what the document already says
            said = "\n".join(f"- {c}" for c in self._covered[-COVERED_SHOWN:])
            user += f"\n\n{COVERED_NOTE}\n{said}"
        messages.append({"role": "user", "content": user})
        if mode == "prefix":
            messages.append({"role": "assistant", "content": self.text})
        elif mode in ("chat", "more"):
            messages.append({"role": "assistant", "content": self.text})
            messages.append(
                {"role": "user", "content": CONTINUE_PROMPT if mode == "chat" else MORE_PROMPT}
            )
        return messages

    def fit(self, mode: RoundMode = "initial") -> Fitted:
        return fit_prompt(
            lambda v: self.build(v, mode),
            self.variables,
            self.ctx.backend.count_tokens,
            self.ctx.limit,
            f"section {self.rec.key!r}",
        )

    def first_prompt(self) -> Fitted:
        """The fitted first-round prompt (also what the resume hash is computed from)."""
        return self.fit()

    # -- rounds ---------------------------------------------------------------------

    async def run(self, first: Fitted) -> None:
        max_rounds = self.settings.max_rounds
        fitted = first
        mode: RoundMode = "initial"
        stream = await self._open(fitted, mode)
        try:
            while True:
                started = time.monotonic()
                final, cut = await self._consume(stream, mode)
                self.rec.rounds.append(self._round(final, fitted, mode, started, cut))
                if isinstance(cut, Repetition) and cut.kind == "item":
                    await stream.close()
                    if self._item_tries > 2 * ITEM_RETRIES:
                        break  # stop: the list ends with the items it has
                    self.retries += 1
                    self._extra_rounds += 1
                    mode = self._resend()
                elif isinstance(cut, Repetition):
                    await stream.close()  # what it still holds is part of the loop
                    if count_words(self.text[self._retry_mark :]) >= RETRY_PROGRESS_WORDS:
                        self._stuck = 0  # the last retry went on soundly for a while
                    if self._stuck >= self.settings.loop_retries:
                        self.rec.degenerate = True
                        break  # stop: it loops again right after every retry
                    self._stuck += 1
                    self._avoid.update(cut.words)
                    self.retries += 1
                    self._extra_rounds += 1
                    self._retry_mark = len(self.text)
                    mode = self._resend()
                elif cut is not None:
                    break  # stop: the length policy ended the section at a boundary
                else:
                    finish = final.finish_reason if final else "stop"
                    added = self.text[self._round_start :]
                    stalled = finish == "length" and not any(c.isalnum() for c in added)
                    self._stalls = self._stalls + 1 if stalled else 0
                    if not stalled:
                        self._sound_end = len(self.text)
                    if self._stalls >= STALLED_ROUNDS:
                        self.text = self.text[: max(self._sound_end, self.shown)]
                        self.rec.degenerate = True
                        self.rec.truncated = self.policy.short(self.text)
                        break  # stop: whole rounds add no letters (symbols, broken bytes)
                    if finish == "length" and self._recovered():
                        # back to the section's own settings: a new request, same text
                        self._stuck = 0
                        self._avoid.clear()
                        self._extra_rounds += 1
                        mode = self._resend()
                    elif finish == "length":
                        if len(self.rec.rounds) >= max_rounds + self._extra_rounds:
                            # stop: rounds used up; a section past its target is complete
                            self.rec.truncated = self.policy.target is None or self.policy.short(
                                self.text
                            )
                            break
                        mode = self.strategy  # go on (past the target: to a boundary)
                    elif finish == "stop" and self.policy.short(self.text) and not self.shaped:
                        # short of its target: a model that can continue its own text
                        # writes on past its end after a paragraph break, its end of text
                        # held off a while; a chat server is asked for more
                        mode = "prefix" if self.strategy in ("kv", "prefix") else "more"
                        self._extend = mode == "prefix"
                    else:
                        if finish not in ("stop", "length"):  # content_filter, tool_calls
                            self.rec.ended_by = finish
                        break  # stop: the model finished (or a remote filter ended it)
                    if mode == "kv":
                        if final is None:
                            raise RuntimeError("a kv round ended without usage")
                        used = final.prompt_tokens + final.completion_tokens
                        room = self.ctx.window - used
                        if room < 1:
                            self.rec.truncated = True
                            break  # stop: the context window cannot hold another round
                        fitted = Fitted([], used, 0)
                        if self._stuck:
                            room = min(room, RETRY_TOKENS)
                        tokens = min(self.settings.max_tokens, room)
                        self._params = replace(self._params, max_tokens=tokens)
                        await stream.resume(tokens)
                        continue
                    self._append(await stream.close())
                if len(self.rec.rounds) >= max_rounds + self._extra_rounds:
                    break  # stop: rounds used up (after a finished or a trimmed round)
                cut_off = self.rec.rounds[-1].finish_reason == "length"
                if self._extend and self.text and not self.text.endswith("\n"):
                    self._append("\n\n")
                try:
                    fitted = self.fit(mode)
                except ContextOverflowError:  # the text so far no longer fits the budget
                    self.rec.truncated = cut_off
                    break  # stop: the context budget cannot hold another round
                if self.ctx.window - fitted.prompt_tokens < 1:
                    self.rec.truncated = cut_off
                    break  # stop: the context budget cannot hold another round
                if mode == "more" and self.text and not self.text.endswith("\n"):
                    self._append("\n\n")
                stream = await self._open(fitted, mode)
        finally:
            tail = await stream.close()
            last = self.rec.rounds[-1] if self.rec.rounds else None
            ended = ("target_words", "repetition", *self.siblings.values())
            if last is not None and last.stop_reason in ended:
                tail = ""  # text the engine held back lies past where the section was cut
            if last is not None and last.finish_reason == "length":
                tail = tail.rstrip(REPLACEMENT)  # half a character at the cut is not text
            self.text += self.headings.feed(tail) + self.headings.flush()
            self._finish_text()
        self.rec.text = self.text
        self.rec.words = count_words(self.text)
        self.rec.target_words = self.target
        if self.target:
            self.rec.length_score = length_score(self.target, max(self.rec.words, 1))
        quality = measure(self.text)
        self.rec.distinct_4 = quality.distinct_4
        self.rec.repeated_sentences = quality.repeated_share

    def _request(self, record: RoundRecord, fitted: Fitted, mode: RoundMode) -> dict[str, Any]:
        """What one round sent: the messages (a kv round sends none: it decodes on in the
        same sequence), the sampling settings with the seed, and the tokens."""
        sampling_json = asdict(self._params)
        for name in ("stop", "stop_token_ids", "dry_sequence_breakers"):
            sampling_json[name] = list(sampling_json[name])
        entry: dict[str, Any] = {
            "round": len(self.rec.rounds) + 1,
            "strategy": mode,
            "messages": fitted.messages if mode != "kv" else None,
            "continue_final_message": mode == "prefix",
            "sampling": sampling_json,
            "prompt_tokens": record.prompt_tokens,
            "cached_prompt_tokens": record.cached_prompt_tokens,
            "completion_tokens": record.completion_tokens,
            "trimmed_tokens": record.trimmed_tokens,
            "trimmed_characters": dict(fitted.trimmed),
            "finish_reason": record.finish_reason,
            "stop_reason": record.stop_reason,
        }
        return entry

    def _bias(self) -> tuple[tuple[int, float], ...]:
        """A retry makes the words its loops leaned on less likely (while it is stuck)."""
        if not self._stuck:
            return ()
        ids = {i for word in self._avoid for i in self.ctx.backend.word_ids(word)}
        return tuple((i, RETRY_BIAS) for i in sorted(ids))

    def _at_sibling(self, start: int, title: str, round_no: int) -> str | Repetition:
        """The part has begun a sibling's title at `start`: it ends there (the title is the
        round's stop reason); before half its target it has gone astray (writing the plan,
        or the next part) and is retried from there like a loop."""
        target = self.policy.target
        early = bool(target) and count_words(self.text[:start]) < (target or 0) / 2
        if early:  # the list lines just before it were the plan too: they go with it
            while start > 0:
                line = self.text.rfind("\n", 0, start - 1) + 1
                marker = _LINE_MARKER.match(self.text, line, start)
                if not (marker and marker.group().strip()) and self.text[line:start].strip():
                    break
                start = line
        self.text = self.text[: max(start, self.shown)]
        if early:
            words = tuple(w for w in title_key(title).split() if w not in FUNCTION_WORDS)
            detail = f"began another part's title early: {title}"
            return Repetition("sibling", len(self.text), len(self.text), detail, words[:1])
        self._release(final=True, round_no=round_no)
        return title

    def _sibling_line(self, final: bool = False) -> tuple[int, str] | None:
        """(where its line starts, the title) for the first line since the last call that
        is a sibling's heading: the title alone, or after a marker ("## ", "2. ", "Part 2:")
        with anything after it; with `final`, the unfinished last line too."""
        if not self.siblings:
            return None
        text = self.text
        if self._line_scan > len(text):  # the text was cut back: start at its last line
            self._line_scan = text.rfind("\n") + 1
        while True:
            end = text.find("\n", self._line_scan)
            if end < 0:
                if not final or self._line_scan >= len(text):
                    return None
                end = len(text)
            start, self._line_scan = self._line_scan, end + 1
            line = text[start:end]
            marker = _LINE_MARKER.match(line)
            rest = sibling_key(line[marker.end() :] if marker else line)
            if rest in self.siblings:
                return start, self.siblings[rest]
            if marker and marker.group().strip():
                title = next((t for t in self.siblings if rest.startswith(t + " ")), None)
                if title is not None:
                    return start, self.siblings[title]

    def _resend(self) -> RoundMode:
        """How a round that needs a new request (other settings, trimmed text) goes on: the
        text as an open assistant message where the backend allows it, else a chat turn."""
        return "prefix" if self.strategy in ("kv", "prefix") else "chat"

    def _recovered(self) -> bool:
        """A retry has written RETRY_PROGRESS_WORDS without a loop: the stronger sampling
        can end."""
        progress = count_words(self.text[self._retry_mark :])
        return self._stuck > 0 and progress >= RETRY_PROGRESS_WORDS

    def _finish_text(self) -> None:
        """The end of the section: a last line that is a sibling's title is dropped, and
        everything still held back is shown."""
        found = self._sibling_line(final=True)
        if found is not None:
            self.text = self.text[: max(found[0], self.shown)]
        self.text = self.text[: max(self.shown, len(self.text.rstrip()))]
        self._release(final=True)

    async def _open(self, fitted: Fitted, mode: RoundMode) -> Stream:
        room = self.ctx.window - fitted.prompt_tokens
        if self._stuck:
            room = min(room, RETRY_TOKENS)
        params = sampling(
            self.settings,
            max(1, min(self.settings.max_tokens, room)),
            seed=self.seed,
            retry=self.retries,
            strength=self._stuck,
            bias=self._bias(),
            least=EXTEND_MIN_TOKENS if self._extend else 0,
            constraint=self._constraint(),
            warm=self._item_warmth(),
        )
        self._params = params
        return await self.ctx.backend.chat(
            fitted.messages,
            params,
            hold=self.strategy == "kv",
            continue_final=mode == "prefix",
        )

    async def _consume(
        self, stream: Stream, mode: RoundMode
    ) -> tuple[Delta | None, str | Repetition | None]:
        """Stream one round into the text; returns its final delta and why it was cut
        ("words", or the Repetition found)."""
        round_no = len(self.rec.rounds) + 1
        self._round_start = len(self.text)
        while self._round_starts and self._round_starts[-1][0] >= self._round_start:
            self._round_starts.pop()  # a round whose text was all cut away
        self._round_starts.append((self._round_start, round_no))
        self._detector = LoopDetector(
            self.text,
            floor=self.shown,
            restart=(mode in ("chat", "more") or self._extend) and bool(self.text),
            earlier=self._earlier,
        )
        self._extend = False
        dedupe = mode in ("chat", "more")
        base = self.text
        pending = ""  # chat rounds: text held until it can no longer be a repeat of `base`
        final: Delta | None = None
        async for d in stream.deltas():
            piece = d.text
            if dedupe and piece:
                pending += piece
                if pending.lstrip() and pending.lstrip() in base and d.finish_reason is None:
                    continue  # still possibly repeating what was written: wait
                piece, pending, dedupe = remove_overlap(base, pending), "", False
            if d.finish_reason is not None:
                final = d
            cut = self._take(piece, round_no)
            if cut is not None:
                return (d if d.finish_reason else None), cut
        if pending:
            cut = self._take(remove_overlap(base, pending), round_no)
            if cut is not None:
                return final, cut
        self.text += self.headings.flush()  # the round's end: its text is all there
        sibling = self._sibling_line(final=True)  # the last line may be a sibling's title
        if sibling is not None:
            return final, self._at_sibling(*sibling, round_no)
        self._release(round_no=round_no)  # the last sentences stay held into the next round
        return final, None

    def _take(self, piece: str, round_no: int) -> str | Repetition | None:
        """Add a piece of the round's text; a loop or the length policy may end the round."""
        piece = self.headings.feed(piece)
        if not piece:
            return None
        self.text += piece
        if self._guard is not None:  # a held list: its guard, not the loop detector
            refusal = self._guard.feed(self.text)
            if refusal is not None:
                return self._refuse(refusal)
        found = self._detector.feed(piece) if self._guard is None else None
        if found is not None:
            if found.kind == "echo":
                self._covered.append(self.text[found.start :].strip()[:COVERED_CHARS])
            self.text = self.text[: max(len(self.text[: found.keep].rstrip()), self.shown)]
            return found  # what is still held may be cut by the retry's own loop
        sibling = self._sibling_line()
        if sibling is not None:
            return self._at_sibling(*sibling, round_no)
        end = self.policy.end(self.text, self.shown)
        if end is not None:
            self.text = self.text[:end]
            self._release(final=True, round_no=round_no)
            return "words"
        self._release(round_no=round_no)
        return None

    def _append(self, piece: str, round_no: int | None = None) -> None:
        """Text added between rounds (a seam, a held-back tail)."""
        if piece:
            self.text += piece
        self._release(round_no=round_no)

    def _release(self, final: bool = False, round_no: int | None = None) -> None:
        """Send as a delta the text that can no longer be cut away: everything when
        `final`; else all but the last HELD_SENTENCES sentences (across rounds: a retry may
        still cut them), and not into a line that may still become a heading or a marker."""
        end = len(self.text)
        if not final:
            ends = [m.end() for m in _RELEASE.finditer(self.text, self.shown)]
            end = ends[-HELD_SENTENCES - 1] if len(ends) > HELD_SENTENCES else self.shown
            line = self.text.rfind("\n", 0, end) + 1
            if end < len(self.text) and line < end and _MARKER.match(self.text, line):
                end = max(self.shown, line)  # that line may still become a marker
            if len(self.text) - end > MAX_HELD:
                end = len(self.text)
        end = len(self.text[:end].rstrip())  # whitespace goes out with what follows it
        if end <= self.shown:
            return
        # one delta per round whose text it holds (held sentences go out a round later)
        cuts = [(at, n) for at, n in self._round_starts if self.shown < at < end]
        first = [n for at, n in self._round_starts if at <= self.shown]
        begin, number = self.shown, first[-1] if first else round_no or 1
        for at, n in [*cuts, (end, 0)]:
            at = max(begin, len(self.text[:at].rstrip()))  # whitespace goes with what follows
            if at > begin:
                self.ctx.events.emit(
                    "delta", section=self.rec.key, round=number, text=self.text[begin:at]
                )
            begin, number = at, n
        self.shown = end

    def _round(
        self,
        final: Delta | None,
        fitted: Fitted,
        mode: RoundMode,
        started: float,
        cut: str | Repetition | None,
    ) -> RoundRecord:
        seconds = time.monotonic() - started
        reason: int | str | None = None
        if isinstance(cut, Repetition):
            reason = "repetition"
        elif cut is not None:
            reason = "target_words" if cut == "words" else cut  # (else a sibling's title)
        if final is not None:
            record = RoundRecord(
                finish_reason="stop" if cut is not None else final.finish_reason or "stop",
                prompt_tokens=final.prompt_tokens or fitted.prompt_tokens,
                cached_prompt_tokens=final.cached_prompt_tokens,
                completion_tokens=final.completion_tokens,
                trimmed_tokens=fitted.trimmed_tokens,
                seconds=seconds,
                strategy=mode,
                stop_reason=reason if cut is not None else final.stop_reason,
                retry=self.retries,
                server_retries=final.retries,
                replica=final.replica or None,
            )
        else:  # cut before the backend reported usage
            record = RoundRecord(
                finish_reason="stop",
                prompt_tokens=fitted.prompt_tokens,
                cached_prompt_tokens=fitted.prompt_tokens if mode == "kv" else 0,
                # usage never arrived: count the round's text with the model's tokenizer
                completion_tokens=self.ctx.backend.count_text(self.text[self._round_start :]),
                trimmed_tokens=fitted.trimmed_tokens,
                seconds=seconds,
                strategy=mode,
                retry=self.retries,
                stop_reason=reason,
            )
        if isinstance(cut, Repetition):
            record.repetition = {"kind": cut.kind, "detail": cut.detail}
        self.requests.append(self._request(record, fitted, mode))
        self.ctx.events.emit(
            "round_finished",
            section=self.rec.key,
            round=len(self.rec.rounds) + 1,
            finish_reason=record.finish_reason,
            stop_reason=record.stop_reason,
            strategy=mode,
            prompt_tokens=record.prompt_tokens,
            cached_prompt_tokens=record.cached_prompt_tokens,
            completion_tokens=record.completion_tokens,
            trimmed_tokens=record.trimmed_tokens,
            words=count_words(self.text),
            retry=self.retries,
            repetition=record.repetition,
            server_retries=record.server_retries,
            seconds=round(seconds, 3),
            tokens_per_second=round(record.completion_tokens / seconds, 2) if seconds > 0 else 0.0,
        )
        return record
