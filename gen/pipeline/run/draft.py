"""A section's text as it streams in. Each piece passes the heading filter and the junk
filter and is checked: by a held list's guard, else the loop detector and the language
check, then for a sibling part's title and against the length policy; the text is cut
back where one of them ends the round. What can no longer be cut goes out as `delta`
events. Knows nothing of backends or requests."""

from __future__ import annotations

from collections.abc import Sequence

from gen.pipeline.run.constraint import ListItems
from gen.pipeline.run.continuation import LengthPolicy
from gen.pipeline.run.events import EventLog
from gen.pipeline.run.headings import HeadingFilter
from gen.pipeline.run.outline import Refusal
from gen.pipeline.run.paragraphs import Paragraphs
from gen.pipeline.run.reader import Reader
from gen.pipeline.run.release import (
    bare_marker_from,
    release_end,
    round_pieces,
    unfinished_from,
)
from gen.pipeline.run.repetition import ECHO_N, LoopDetector, Repetition
from gen.pipeline.run.siblings import Siblings, plan_start
from gen.text.function_words import FUNCTION_WORDS
from gen.text.listparse import title_key
from gen.text.quality import ngrams, tokens
from gen.text.words import count_words

COVERED_CHARS = 300  # what is kept of a sentence cut for saying an earlier section again


class Draft:
    def __init__(
        self,
        events: EventLog,
        key: str,
        policy: LengthPolicy,
        headings: HeadingFilter,
        siblings: Siblings,
        earlier: Sequence[str] = (),
    ) -> None:
        """`key`: the section's, for its deltas; `earlier`: the text of the sections before
        it in the document (a sentence that says theirs again is cut)."""
        self.events = events
        self.key = key
        self.policy = policy
        self.headings = headings
        self.siblings = siblings
        self.text = ""
        self.shown = 0  # characters of the text already sent as deltas
        self.round_start = 0  # where the current round's text begins
        self._round_starts: list[tuple[int, int]] = []  # (where, round): who wrote the text
        self._earlier = frozenset(ngrams(tokens("\n\n".join(earlier)), ECHO_N))
        self._detector = LoopDetector(earlier=self._earlier)
        self._stale = False  # the text was cut back: the checks start again on it
        self.covered: list[str] = []  # sentences cut for saying an earlier section again
        self.unfinished: str | None = None  # the sentence a cut-off section ended in, dropped
        self.list: ListItems | None = None  # a held list: its guard checks the items
        self.reader: Reader | None = None  # the reader checks; None: off (a shaped output)
        self.allowed: set[str] = set()  # the checks that yielded: they cut nothing more
        # the text's length when the last round ended uncut (a kv round that goes on from
        # there goes on with the junk filter's line); None: cut, or text added since
        self._flowing: int | None = None
        self.paragraphs = Paragraphs()  # a conclusion, a heading said again, shouting

    def begin(self, round_no: int, restart: bool, answer: bool = False) -> None:
        """Round `round_no` writes on from the end of the text; with `restart` it may start
        over (a chat turn, a round past where the model stopped): an opening that says the
        text again is a loop. `answer`: a new request's answer (its opening may be chatter
        again). The checks read on across rounds while the text goes on; a text cut
        back (a retry) gets new ones that read it as it stands."""
        self.round_start = len(self.text)
        while self._round_starts and self._round_starts[-1][0] >= self.round_start:
            self._round_starts.pop()  # a round whose text was all cut away
        self._round_starts.append((self.round_start, round_no))
        fresh = self._stale or self._detector.text != self.text
        if fresh:
            self._detector = LoopDetector(
                self.text,
                floor=self.shown,
                restart=restart and bool(self.text),
                earlier=self._earlier,
                allowed=frozenset(self.allowed),
            )
        elif restart and self.text:
            self._detector.restart()
        if self.reader is not None:
            flowing = self._flowing == len(self.text)
            self.reader.begin(self.text, self.shown, flowing, fresh, restart=answer)
        if fresh:  # the text was cut back: its paragraphs are read again as they stand
            self.paragraphs.reread(self.text)
        self._stale = False
        self._flowing = None

    def cut_back(self, end: int) -> None:
        """The text goes back to `end` (never before what was shown); the checks read it
        again as it stands."""
        self.text = self.text[: max(len(self.text[:end].rstrip()), self.shown)]
        self._stale = True

    def allow(self, kind: str) -> None:
        """The check of this kind yields: from now on it cuts nothing."""
        self.allowed.add(kind)
        self._stale = True  # the next round's checks are made anew, without it

    def take(self, piece: str, round_no: int) -> str | Repetition | None:
        """Add a piece of the round's text; a loop or the length policy may end the round:
        "words", a sibling's title, or the Repetition found."""
        piece, junk = self._clean(self.headings.feed(piece))
        if not piece and junk is None:
            return None
        self.text += piece
        if junk is not None:
            return self._cut(junk)
        if self.list is not None:  # a held list: its guard, not the loop detector
            refusal = self.list.guard.feed(self.text)
            if refusal is not None:
                return self._refuse(refusal)
        found = self._check(piece) if self.list is None else None
        if found is not None:
            return self._cut(found)
        sibling = self.siblings.line(self.text)
        if sibling is not None:
            return self._at_sibling(*sibling, round_no)
        end = self.policy.end(self.text, self.shown)
        if end is not None:
            self.text = self.text[:end]
            self.release(final=True, round_no=round_no)
            return "words"
        self.release(round_no=round_no)
        return None

    def end_round(
        self, round_no: int, goes_on: bool = False, answered: bool = False
    ) -> str | Repetition | None:
        """The round's text is all there; its last line may be a sibling's title. `goes_on`:
        the same stream decodes on (kv), so a line held (a heading so far) stays held and
        the last line is not yet whole. `answered`: the model ended its answer (chatter at
        its end is dropped, chatter inside cut)."""
        if not goes_on:
            piece, junk = self._clean(self.headings.flush())
            self.text += piece
            if junk is not None:
                return self._cut(junk)
            found = self._check(piece) if piece and self.list is None else None
            if found is not None:
                return self._cut(found)
            sibling = self.siblings.line(self.text, final=True)
            if sibling is not None:
                return self._at_sibling(*sibling, round_no)
        if self.reader is not None:  # an opening is decided within a round
            opening = self.reader.opening("", final=True)
            if opening:
                self.text += opening
                found = self._check(opening) if self.list is None else None
                if found is not None:
                    return self._cut(found)
        if answered and self.reader is not None:  # chatter inside is cut, at the end dropped
            found = self.reader.chatter_cut(self.text, self.shown, final=True)
            if found is not None and found.kind not in self.allowed:
                return self._cut(found)
            self.text = self.text[: self.reader.trailing(self.text, self.shown)]
        self.release(round_no=round_no)  # the last sentences stay held into the next round
        self._flowing = len(self.text)
        return None

    def append(self, piece: str, round_no: int | None = None) -> None:
        """Text added between rounds (a seam, a held-back tail); a new request goes on from
        the text, so what the filters hold is decided as it stands first. The checks read
        it without judging it (it ends no round)."""
        if self._flowing == len(self.text):
            held, _ = self._clean(self.headings.flush())  # a kv round's line held so far
            if self.reader is not None:
                held += self.reader.flush()
            piece = held + piece
        self._flowing = None
        if self.reader is not None:
            piece = self.reader.unbroken(piece)
        if piece:
            self.text += piece
            if self.list is None:
                self._check(piece, judge=False)
        self.release(round_no=round_no)

    def finish(self, tail: str, cut_off: bool = False) -> None:
        """The end of the section, `tail` the text the backend still held: a last line that
        is a sibling's title is dropped (and a last line that is junk, or only a list
        marker), and everything still held back is shown. `cut_off`: the last round was
        cut off at max_tokens and no round went on from it: the unfinished sentence it
        ends in is dropped (it is held back, never shown) and kept in `unfinished`."""
        piece = self.headings.feed(tail) + self.headings.flush()
        if self.reader is not None:
            piece = self.reader.close(piece, self.text, self._flowing == len(self.text))
        self.text += piece
        found = self.siblings.line(self.text, final=True)
        if found is not None:
            self.text = self.text[: max(found[0], self.shown)]
        if self.reader is not None:
            self.text = self.text[: self.reader.end(self.text, self.shown)]
            self.text = self.text[: self.reader.trailing(self.text, self.shown)]
        start = unfinished_from(self.text) if cut_off else None
        if start is not None and start >= self.shown:
            self.unfinished = self.text[start:].strip()
            self.text = self.text[:start]
        bare = bare_marker_from(self.text)  # "2." with nothing after it: held, never shown
        if bare is not None and bare >= self.shown:
            self.text = self.text[:bare]
        self.text = self.text[: max(self.shown, len(self.text.rstrip()))]
        self.release(final=True)

    def release(self, final: bool = False, round_no: int | None = None) -> None:
        """Send as deltas the text that can no longer be cut away (see release_end), one
        per round whose text it holds."""
        end = release_end(self.text, self.shown, final)
        if end <= self.shown:
            return
        for number, piece in round_pieces(self.text, self.shown, end, self._round_starts, round_no):
            self.events.emit("delta", section=self.key, round=number, text=piece)
        self.shown = end

    def _check(self, piece: str, judge: bool = True) -> Repetition | None:
        """The loop checks, the language check and the chatter check read a piece of the
        text (`judge`: False for text the pipeline added, which ends no round)."""
        found = self._detector.feed(piece, judge)
        if found is None and self.reader is not None:
            found = self.reader.language_cut(piece, self.text, self.shown, judge)
            if found is None and judge:
                found = self.reader.chatter_cut(self.text, self.shown)
            if found is None:
                found = self.paragraphs.check(self.text, self.shown, judge)
        return None if found is None or found.kind in self.allowed else found

    def _clean(self, piece: str) -> tuple[str, Repetition | None]:
        """The piece without its junk, and the cut a row of junk calls for."""
        if self.reader is None:
            return piece, None
        piece = self.reader.junk.feed(piece)
        cut = self.reader.junk_cut(self.text + piece, self.shown)
        return (piece if cut else self.reader.opening(piece)), cut

    def _cut(self, found: Repetition) -> Repetition:
        """A loop or a reader check ends the round: the text goes back to `found.keep`."""
        if found.kind == "echo":
            self.covered.append(self.text[found.start :].strip()[:COVERED_CHARS])
        self._stale = True
        self.text = self.text[: max(len(self.text[: found.keep].rstrip()), self.shown)]
        if self.reader is not None:  # the retry writes on from the text's own, not chatter
            self.text = self.text[: self.reader.trailing(self.text, self.shown)]
        return found  # what is still held may be cut by the retry's own loop

    def _refuse(self, refusal: Refusal) -> Repetition:
        """A list item repeats an earlier one (or is one the pipeline writes itself): it is
        cut away and sampled again, the grammar banning it from now on."""
        if self.list is not None:
            self.list.refuse(refusal)
        self._stale = True
        self.text = self.text[: max(len(self.text[: refusal.start].rstrip()), self.shown)]
        detail = f"item {refusal.title!r} refused: {refusal.reason}"
        return Repetition("item", refusal.start, len(self.text), detail)

    def _at_sibling(self, start: int, title: str, round_no: int) -> str | Repetition:
        """The part has begun a sibling's title at `start`: it ends there (the title is the
        round's stop reason); before half its target it has gone astray (writing the plan,
        or the next part) and is retried from there like a loop."""
        target = self.policy.target
        early = bool(target) and count_words(self.text[:start]) < (target or 0) / 2
        if early:  # the list lines just before it were the plan too: they go with it
            start = plan_start(self.text, start)
        self._stale = True
        self.text = self.text[: max(start, self.shown)]
        if early:
            words = tuple(w for w in title_key(title).split() if w not in FUNCTION_WORDS)
            detail = f"began another part's title early: {title}"
            return Repetition("sibling", len(self.text), len(self.text), detail, words[:1])
        self.release(final=True, round_no=round_no)
        return title
