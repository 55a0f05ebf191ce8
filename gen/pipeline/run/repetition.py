"""A streaming loop detector for a section's text as its deltas arrive: it reports where a
loop (repeated span, repeated sentence, collapsed vocabulary) begins; trimming is the caller's."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter, deque
from dataclasses import dataclass
from typing import Literal

from gen.text.function_words import CJK_FUNCTION, DETERMINERS, FUNCTION_WORDS
from gen.text.quality import (
    CLOSERS,
    TERMINATORS,
    Scanner,
    Token,
    Unit,
    is_sentence,
    ngrams,
    sentence_key,
)
from gen.text.scripts import spaced_script
from gen.text.words import CJK_CHAR

# (and the section runner's own: "sibling", for a fan-out part that began another's title;
# "item", for a list item refused as a repeat; "junk", "language", "gibberish" (rare
# characters in Simplified Chinese) and "chatter", the reader checks'; "drift", a paragraph
# far off topic: relevance.py; "conclusion", a second conclusion (or one before a planned
# section's last point) and "shout", a paragraph in capitals: draft.py)
Kind = Literal[
    "span", "sentence", "refrain", "collapse", "word", "count", "restart", "echo", "sibling",
    "item", "junk", "language", "gibberish", "chatter", "drift", "conclusion", "shout",
]  # fmt: skip
# the reader checks' kinds: a round one of them cut has the kind as its stop_reason (a loop's
# round has "repetition")
READER_CUTS = frozenset({"junk", "language", "gibberish", "chatter", "drift", "shout"})
# the cuts that end the section where they begin (a planned section's point: the next point
# follows), without a retry: the text had concluded already
ENDING_CUTS = frozenset({"conclusion"})
DETAIL_CHARS = 60
# a line or short sentence said again right after itself: LINE_PERIODS units back to back
# ("Lighthouse" / "Lighthouse" / ...), too short for the sentence check; copies as spans
LINE_PERIODS = 2
# count: this many numbers in a row ("11, 2, 12, 3, 4, ..., 491"), each word new, so no
# other check sees it (a list of years in prose holds a few)
NUMBER_RUN = 16
# a run-on word: letters, digits, ".", "," or "-" of a script that spaces its words, this
# long ("lightlightlight...", "1.1150359092111517..."): a loop inside one word
RUN_ON_CHARS = 48
# and any run of spaced-script characters without a space this long (a link, a path, or
# "http://www.baidu.net/baidu_z_w_r_w_b_..." for ten rounds)
RUN_ON_LINK_CHARS = 200
# refrain: REFRAIN_SAME of the last REFRAIN_WINDOW sentences open with the same two words
# (a determiner before them aside), or SUBJECT_SAME of SUBJECT_WINDOW with the same first word
# when that word is not a function word
REFRAIN_LEAD, REFRAIN_SAME, REFRAIN_WINDOW = 2, 5, 6
SUBJECT_SAME, SUBJECT_WINDOW = 6, 7
# a heading refrain: REFRAIN_SAME of the last REFRAIN_WINDOW headings open with the same
# HEADING_LEAD words, numbers aside ("Step 12: Learn to Use …" again and again; "Week 3:
# Closures" after "Week 2: Optionals" is a plan)
HEADING_LEAD = 4
# a motif: a short sentence said again MOTIF_GAP or more sentences after its last copy (a
# story's refrain line, a plan's "Long run: Sun 6 km easy" in two weeks) is let pass on its
# own; a repeated sentence right after it makes both a loop. Short: at most MOTIF_TOKENS
# words (MOTIF_CJK characters)
MOTIF_GAP, MOTIF_TOKENS, MOTIF_CJK = 3, 14, 24
# a labelled line of a list ("**Long run:** Sun 6 km easy", "目标：…") said again, not
# back to back, is a plan's weeks alike, never a loop on its own
# a quoted line said again back to back ("“No.”" three times in a dialogue) takes one more
# copy to be a loop than a bare line
_LABELLED = re.compile(r"[ \t>*_#\-+•\d.)]*[^\s:：*]{1,24}(?: [^\s:：*]{1,24}){0,3}[*_]*[:：]")
_QUOTE_MARKS = frozenset('"“”「」『』')
# word: one word (not a function word) is more than this share of the recent tokens
WORD_SHARE = 0.2
# echo: a sentence of at least ECHO_GRAMS word 5-grams, at least ECHO_SHARE of them in
# earlier sections, says again what the document already said
ECHO_N, ECHO_GRAMS, ECHO_SHARE = 5, 4, 0.5
# a collapse window that reaches back into base is reported once FED_MIN fed tokens go on
# with it: half their 4-grams seen before, or at most FED_NEW_WORDS of their words new
FED_MIN, FED_NEW_WORDS = 16, 0.2
# few words: fewer than this share of the last VOCAB_WINDOW prose tokens are distinct
# (prose keeps 0.6-0.8 of a 100-token window distinct; a stuttering loop 0.3-0.4); a window
# mostly of CJK characters, each a token, keeps fewer (the corpus's Chinese: 0.44 at least,
# a survey with figures), so it is held to VOCAB_DISTINCT_CJK
VOCAB_WINDOW, VOCAB_DISTINCT, VOCAB_DISTINCT_CJK = 100, 0.4, 0.3


@dataclass(frozen=True, slots=True)
class Repetition:
    kind: Kind
    start: int  # where the repeated material begins, in base + fed text
    keep: int  # the end of the last sound sentence at or before start (>= floor)
    detail: str
    words: tuple[str, ...] = ()  # what the loop leans on: a refrain's subject, the word


class LoopDetector:
    """Feed it every delta; it returns the first loop it finds, once.

    - "span": a stretch of tokens with period p, back to back: p < min_span_tokens covering
      >= short_loop_tokens tokens ("very very very ..."), p < long_span_tokens three times,
      longer p twice; only in prose (not code or tables), periods up to window_tokens / 2.
      start: the second copy.
    - "span" too: a unit (a line or a sentence) equal to the one before it, three in a row
      ("Lighthouse" / "Lighthouse" / "Lighthouse"), or a pair of units three times. start:
      the second copy, or the first where the unit is a fragment (no sentence end).
    - "sentence": a prose sentence of >= min_sentence_tokens tokens (min_sentence_cjk when
      mostly CJK) equal, once normalised, to an earlier one of base + text. start: its start.
    - "refrain": 5 of the last 6 sentences (or lines) open with the same two tokens (after a
      determiner), or 6 of the last 7 with the same first word that is not a function word;
      two of them after base. start: the second of them.
    - "collapse": distinct 4-grams < collapse_distinct over the last collapse_tokens fed
      tokens. start: the first 4-gram in that window that repeats one before it.
    - "restart" (with restart=True, or after `restart()`, for a round asked to go on): its
      first sentence opens like an earlier one or shares half its words with one. start:
      that sentence.
    - "count": NUMBER_RUN numbers in a row ("11, 2, 12, 3, ..."). start: the first.
    - "word" too: a word of RUN_ON_CHARS letters, digits, ".", "," or "-" still being
      written ("lightlightlight..."), or of RUN_ON_LINK_CHARS characters of any kind
      (a link that never ends). start: its start.
    - "word": one word that is not a function word is more than WORD_SHARE of those
      tokens ("God's grace, God's mercy, ..."). start: where it begins to crowd the rest.
    - "echo": a sentence half of whose word 5-grams are in `earlier` (the 5-grams of the
      sections before this one): it says again what the document said. start: its start.

    base (text before) is read for its sentences and its tail, but nothing that ends inside
    it is reported; start and keep are never before `floor` (default: the end of base; the
    caller passes how much of base it has shown, and may still cut the rest). One detector
    reads a section's text for as long as it goes on: however the text is cut into rounds
    and pieces, a loop is reported at the same place (a refrain's two sentences after base
    count from where the detector began: after a cut, a retry gets its own chance). Each
    feed costs its piece plus O(window_tokens) per completed token.
    """

    def __init__(
        self,
        base: str = "",
        *,
        floor: int | None = None,
        restart: bool = False,
        earlier: frozenset[tuple[str, ...]] = frozenset(),
        min_span_tokens: int = 8,
        long_span_tokens: int = 20,
        short_loop_tokens: int = 24,
        window_tokens: int = 200,
        min_sentence_tokens: int = 6,
        min_sentence_cjk: int = 8,
        collapse_tokens: int = 150,
        collapse_distinct: float = 0.5,
        allowed: frozenset[str] = frozenset(),
    ) -> None:
        if not 1 <= min_span_tokens <= long_span_tokens:
            raise ValueError(
                f"need 1 <= min_span_tokens <= long_span_tokens, got {min_span_tokens}, "
                f"{long_span_tokens}"
            )
        if window_tokens < max(3 * long_span_tokens, short_loop_tokens):
            raise ValueError(
                "window_tokens must be >= 3 * long_span_tokens and >= short_loop_tokens, "
                f"got {window_tokens}"
            )
        if collapse_tokens < 8:
            raise ValueError(f"collapse_tokens must be >= 8, got {collapse_tokens}")
        if not 0 < collapse_distinct <= 1:
            raise ValueError(f"collapse_distinct must be in (0, 1], got {collapse_distinct}")
        self._allowed = allowed  # kinds it does not report (checks that yielded)
        self._min_span, self._long_span = min_span_tokens, long_span_tokens
        self._short_loop = short_loop_tokens
        self._sentence = (min_sentence_tokens, min_sentence_cjk)
        self._collapse_tokens, self._collapse_distinct = collapse_tokens, collapse_distinct
        self._base_len = len(base)
        self._floor = self._base_len if floor is None else max(0, min(floor, self._base_len))
        self._pieces = [base]
        self._scanner = Scanner()
        self._found = False
        # span: the recent prose tokens, and per period p how many tokens in a row equal
        # the one p before them
        self._window: deque[Token] = deque(maxlen=window_tokens)
        self._runs = [0] * (window_tokens // 2 + 1)
        # sentence: every earlier sentence; where fed units end (places to trim back to)
        self._seen: dict[str, int] = {}  # each earlier sentence -> its number
        self._motif: int | None = None  # where a motif said again (not yet a loop) begins
        # restart: a round asked to go on (more, chat) whose first sentence is close to one
        # already written has started the text over
        self._restart = restart
        self._restart_from = self._base_len  # the first sentence that ends past it is checked
        self._quiet = self._base_len  # nothing that ends at or before it is reported
        self._earlier = earlier
        self._sentences: list[tuple[str, ...]] = []  # every sentence so far, for that check
        self._leads: deque[tuple[tuple[str, ...], int]] = deque(maxlen=REFRAIN_WINDOW)
        self._bare_leads: deque[tuple[tuple[str, ...], int]] = deque(maxlen=REFRAIN_WINDOW)
        self._subjects: deque[tuple[str, int]] = deque(maxlen=SUBJECT_WINDOW)
        self._headings: deque[tuple[tuple[str, ...], int]] = deque(maxlen=REFRAIN_WINDOW)
        self._ends = [self._floor]
        self._numbers: list[Token] = []  # count: the numbers in a row just fed
        # unit spans: the last units' tokens, and per period how many in a row equal the
        # one that many before them
        self._units: deque[Unit] = deque(maxlen=3 * LINE_PERIODS)
        self._unit_runs = [0] * (LINE_PERIODS + 1)
        # collapse: the last collapse_tokens fed tokens and their 4-grams
        self._recent: deque[Token] = deque()
        self._grams: deque[tuple[str, ...]] = deque()
        self._gram_counts: Counter[tuple[str, ...]] = Counter()
        self._word_counts: Counter[str] = Counter()  # the recent tokens, function words aside
        self._prose: deque[Token] = deque()  # the last VOCAB_WINDOW fed prose tokens
        self._vocab: Counter[str] = Counter()
        self._cjk = 0  # the CJK characters among the last VOCAB_WINDOW prose tokens
        for event in self._scanner.feed(base):
            self._event(event)

    @property
    def text(self) -> str:
        if len(self._pieces) > 1:
            self._pieces = ["".join(self._pieces)]
        return self._pieces[0]

    def feed(self, piece: str, judge: bool = True) -> Repetition | None:
        """Read the next piece; `judge` False: text the caller added itself (a seam between
        requests) is read like base, nothing that ends inside it reported."""
        self._pieces.append(piece)
        if self._found:
            return None
        if not judge:
            self._quiet = len(self.text)
        for event in self._scanner.feed(piece):
            found = self._event(event)
            if found is not None:
                self._found = True
                return found
        found = self._run_on()
        self._found = found is not None
        return found

    def restart(self) -> None:
        """The next sentence is a new request's first (a chat turn, a round past where the
        model stopped): one that opens like an earlier sentence has started over."""
        self._restart, self._restart_from = True, len(self.text)

    def _run_on(self) -> Repetition | None:
        """The word still being written has run on for RUN_ON_CHARS characters."""
        start, n = self._scanner.open_word
        if n < RUN_ON_CHARS or start + n <= self._quiet:
            return None
        word = self.text[start : start + n]
        if not spaced_script(word):
            return None  # a script that does not space its words
        if n < RUN_ON_LINK_CHARS and not all(c.isalnum() or c in ".,-" for c in word):
            return None  # a link or a path, so far
        return self._report("word", start, f"a run-on word: {_clip(word)}")

    def _event(self, event: Token | Unit) -> Repetition | None:
        fed = event.end > self._quiet
        if isinstance(event, Unit):
            if event.end > self._floor:
                self._ends.append(event.end)
            return self._unit_span(event, fed) or self._sentence_repeat(event, fed)
        found = None
        if event.region == "text":
            found = self._span(event, fed) or self._count(event, fed)
        elif self._window:  # spans are looked for within one stretch of prose
            self._window.clear()
            self._runs = [0] * len(self._runs)
        if found is None:
            # base fills the windows too, so a loop fed a few words a round (a retry's short
            # rounds) is seen across rounds; it is reported when the fed words repeat too
            collapsed = self._collapse(event)
            if fed and collapsed is not None and self._fed_repeats():
                found = collapsed
        return found

    def _fed_repeats(self) -> bool:
        """The fed tokens in the collapse window go on with what came before them: at
        least FED_MIN of them, half their 4-grams already in the window, or nearly all
        their words. (A window of fed tokens only is judged on its own.)"""
        recent = self._recent
        fed = [i for i, t in enumerate(recent) if t.end > self._base_len]
        if len(fed) == len(recent):
            return True
        if len(fed) < FED_MIN:
            return False
        norms = [t.norm for t in recent]
        first = fed[0]
        earlier_grams = {tuple(norms[i : i + 4]) for i in range(max(0, first - 3))}
        fed_grams = [tuple(norms[i : i + 4]) for i in fed if i + 4 <= len(norms)]
        repeated = sum(g in earlier_grams for g in fed_grams)
        if fed_grams and repeated >= 0.5 * len(fed_grams):
            return True
        seen = set(norms[:first])
        new = sum(norms[i] not in seen for i in fed)
        return new <= FED_NEW_WORDS * len(fed)

    def _span(self, token: Token, fed: bool) -> Repetition | None:
        window, runs = self._window, self._runs
        window.append(token)
        n = len(window)
        for p in range(1, min(len(runs), n)):
            runs[p] = runs[p] + 1 if window[n - 1 - p].norm == token.norm else 0
            if fed and p + runs[p] >= self._needed(p):
                first = window[max(0, n - runs[p])]
                copy = self.text[window[max(0, n - runs[p] - p)].start : first.start]
                detail = f"{p}-token span repeated back to back: {_clip(copy)}"
                return self._report("span", first.start, detail)
        return None

    def _count(self, token: Token, fed: bool) -> Repetition | None:
        """Numbers in a row: a model counting ("11, 2, 12, 3, 4, ..., 491")."""
        numbers = self._numbers
        if not token.norm.isascii() or not token.norm.isdigit():
            numbers.clear()
            return None
        numbers.append(token)
        if not fed or len(numbers) < NUMBER_RUN:
            return None
        shown = ", ".join(t.norm for t in numbers[:4])
        detail = f"{len(numbers)} numbers in a row: {shown}, …"
        return self._report("count", numbers[0].start, detail)

    def _unit_span(self, unit: Unit, fed: bool) -> Repetition | None:
        """Lines or short sentences repeated back to back: a run of units with period p
        covering 3p units (tables and code repeat rows and lines, and are left out)."""
        units, runs = self._units, self._unit_runs
        if unit.kind not in ("text", "heading") or not unit.tokens:
            units.clear()
            runs[:] = [0] * len(runs)
            return None
        units.append(unit)
        n = len(units)
        for p in range(1, min(len(runs), n)):
            runs[p] = runs[p] + 1 if units[n - 1 - p].tokens == unit.tokens else 0
            quoted = any(c in _QUOTE_MARKS for c in self.text[unit.start : unit.end])
            if fed and runs[p] >= 2 * p + quoted:
                copied = max(0, n - runs[p] - p)  # the first copy, then the run's first repeat
                text = self.text[units[copied].start : units[copied + p - 1].end].rstrip()
                # fragments go with every copy; sentences keep their first
                keep_first = text.rstrip(CLOSERS)[-1:] in TERMINATORS
                first = units[copied + p if keep_first else copied]
                detail = f"{runs[p] // p + 1} copies back to back of: {_clip(text)}"
                return self._report("span", first.start, detail)
        return None

    def _needed(self, period: int) -> int:
        """How many tokens a stretch with this period must cover to be a loop."""
        if period < self._min_span:
            return self._short_loop
        return 3 * period if period < self._long_span else 2 * period

    def _sentence_repeat(self, unit: Unit, fed: bool) -> Repetition | None:
        found = self._refrain(unit, fed) or self._heading_refrain(unit, fed)
        if found is not None or not is_sentence(unit, *self._sentence):
            return found
        if self._restart and fed and unit.end > self._restart_from:
            self._restart = False  # only the request's first sentence is compared
            close = next((s for s in self._sentences if _close(s, unit.tokens)), None)
            if close is not None:
                detail = f"starts over: {_clip(self.text[unit.start : unit.end])}"
                return self._report("restart", unit.start, detail)
        self._sentences.append(unit.tokens)
        if fed and self._earlier:
            grams = ngrams(unit.tokens, ECHO_N)
            said = sum(g in self._earlier for g in grams)
            if len(grams) >= ECHO_GRAMS and said >= ECHO_SHARE * len(grams):
                text = _clip(self.text[unit.start : unit.end])
                return self._report("echo", unit.start, f"an earlier section said it: {text}")
        key = sentence_key(unit)
        number = len(self._sentences)
        last = self._seen.get(key)
        self._seen[key] = number
        if not fed or last is None:
            self._motif = None
            return None
        if number - last > MOTIF_GAP and _LABELLED.match(self.text, unit.start):
            return None  # a list's labelled line said again: a plan's weeks alike
        motif, self._motif = self._motif, None
        if motif is None and number - last > MOTIF_GAP and self._motif_line(unit):
            self._motif = unit.start  # a motif, unless the next sentence repeats too
            return None
        start = unit.start if motif is None else motif
        return self._report(
            "sentence",
            start,
            f"repeats an earlier sentence: {_clip(self.text[unit.start : unit.end])}",
        )

    @staticmethod
    def _motif_line(unit: Unit) -> bool:
        """Short enough to be a motif line."""
        limit = MOTIF_CJK if unit.cjk * 2 > len(unit.tokens) else MOTIF_TOKENS
        return len(unit.tokens) <= limit

    def _refrain(self, unit: Unit, fed: bool) -> Repetition | None:
        """Sentence after sentence opening with the same words ("The universe is ...", "The
        future of ... is the future of ...", "Sulfite makes ...", "Sulfite gives ..."): a
        loop that varies only its ends."""
        if unit.kind != "text" or len(unit.tokens) < 3:
            return None
        raw = tuple(unit.tokens[:REFRAIN_LEAD])
        tokens = unit.tokens[1:] if unit.tokens[0] in DETERMINERS else unit.tokens
        bare = tuple(tokens[:REFRAIN_LEAD])  # "The science of" and "This science of" alike
        word = tokens[0]
        if word in FUNCTION_WORDS or (len(word) == 1 and not word.isascii()):
            word = ""  # (one CJK character is not a subject; its two-token lead counts)
        self._subjects.append((word, unit.start))
        self._leads.append((raw, unit.start))
        self._bare_leads.append((bare, unit.start))
        for leads, lead in ((self._leads, raw), (self._bare_leads, bare)):
            same = [start for opening, start in leads if opening == lead]
            if len(same) >= REFRAIN_SAME and self._fresh(same, fed):
                detail = f"{len(same)} of the last {len(leads)} sentences open with: " + " ".join(
                    lead
                )
                return self._report("refrain", same[1], detail, lead[:1])
        same = [start for subject, start in self._subjects if word and subject == word]
        if len(same) >= SUBJECT_SAME and self._fresh(same, fed):
            detail = f"{len(same)} of the last {len(self._subjects)} sentences open with: {word}"
            return self._report("refrain", same[1], detail, (word,))
        return None

    def _heading_refrain(self, unit: Unit, fed: bool) -> Repetition | None:
        """Heading after heading opening with the same words, their numbers aside: a list of
        steps that has become a loop. Cut at the last of them (the ones before are kept)."""
        if unit.kind != "heading":
            return None
        lead = tuple("#" if w.isdigit() else w for w in unit.tokens if w)[:HEADING_LEAD]
        self._headings.append((lead, unit.start))
        if len(lead) < HEADING_LEAD:
            return None
        same = [start for opening, start in self._headings if opening == lead]
        if len(same) < REFRAIN_SAME or not self._fresh(same, fed):
            return None
        detail = f"{len(same)} of the last {len(self._headings)} headings open with: "
        return self._report("refrain", same[-1], detail + " ".join(lead), lead[:1])

    def _fresh(self, starts: list[int], fed: bool) -> bool:
        """Two of the refrain's sentences come after base: a retry from a trimmed refrain
        gets its own chance."""
        return fed and starts[-2] >= self._base_len

    def _collapse(self, token: Token) -> Repetition | None:
        recent, grams, counts = self._recent, self._grams, self._gram_counts
        words = self._word_counts
        if len(recent) == self._collapse_tokens:
            dropped = recent.popleft()
            if self._counts_as_word(dropped):
                words[dropped.norm] -= 1
            oldest = grams.popleft()  # the 4-gram that began at the token just dropped
            counts[oldest] -= 1
            if not counts[oldest]:
                del counts[oldest]
        recent.append(token)
        if self._counts_as_word(token):
            words[token.norm] += 1
        if len(recent) >= 4:
            gram = tuple(recent[i].norm for i in range(len(recent) - 4, len(recent)))
            grams.append(gram)
            counts[gram] += 1
        few = self._few_words(token)
        if len(recent) < self._collapse_tokens:
            return few
        if words[token.norm] > WORD_SHARE * len(recent):
            return self._word(token.norm)
        if few is not None:
            return few
        share = len(counts) / len(grams)
        if share >= self._collapse_distinct:
            return None
        seen: set[tuple[str, ...]] = set()
        first = recent[0]
        for i, gram in enumerate(grams):
            if gram in seen:
                first = recent[i]
                break
            seen.add(gram)
        detail = f"distinct 4-grams {share:.2f} over the last {len(recent)} tokens"
        return self._report("collapse", first.start, detail)

    def _few_words(self, token: Token) -> Repetition | None:
        """The last VOCAB_WINDOW prose tokens use few distinct words ("Cities grew. Cities
        grew, cities grew. This was a new era. This was a new era of ..."): cut from the
        middle of that window, where the stutter has set in."""
        if token.region != "text":
            return None
        prose, vocab = self._prose, self._vocab
        prose.append(token)
        vocab[token.norm] += 1
        self._cjk += bool(CJK_CHAR.fullmatch(token.norm))
        if len(prose) > VOCAB_WINDOW:
            dropped = prose.popleft()
            vocab[dropped.norm] -= 1
            self._cjk -= bool(CJK_CHAR.fullmatch(dropped.norm))
            if not vocab[dropped.norm]:
                del vocab[dropped.norm]
        least = VOCAB_DISTINCT_CJK if self._cjk * 2 > len(prose) else VOCAB_DISTINCT
        if len(prose) < VOCAB_WINDOW or len(vocab) >= least * VOCAB_WINDOW:
            return None
        detail = f"only {len(vocab)} distinct words in the last {VOCAB_WINDOW}"
        return self._report("collapse", prose[VOCAB_WINDOW // 2].start, detail)

    @staticmethod
    def _counts_as_word(token: Token) -> bool:
        """Prose words other than function words (tables and code repeat cells and names)."""
        norm = token.norm
        return token.region == "text" and norm not in FUNCTION_WORDS and norm not in CJK_FUNCTION

    def _word(self, word: str) -> Repetition | None:
        """One word fills the window ("God's grace, God's mercy, God's ..."): cut where it
        starts to take more than half again its share of what follows."""
        recent = list(self._recent)
        at = [i for i, t in enumerate(recent) if t.norm == word]
        start = recent[at[-1]].start
        for k, i in enumerate(at):
            if len(at) - k > 1.5 * WORD_SHARE * (len(recent) - i):
                start = recent[i].start
                break
        share = len(at) / len(recent)
        detail = f"“{word}” is {share:.0%} of the last {len(recent)} words"
        return self._report("word", start, detail, (word,))

    def _report(
        self, kind: Kind, start: int, detail: str, words: tuple[str, ...] = ()
    ) -> Repetition | None:
        if kind in self._allowed:
            return None
        start = max(start, self._floor)
        keep = self._ends[bisect_right(self._ends, start) - 1]
        return Repetition(kind, start, keep, detail, words)


def _close(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Two sentences alike enough to be one written twice: the same first four words, or
    half their words shared."""
    if a[:4] == b[:4]:
        return True
    sa, sb = set(a), set(b)
    return len(sa & sb) >= 0.5 * len(sa | sb)


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"
