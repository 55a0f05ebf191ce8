"""Anti-repetition penalties over one request's ids: frequency/presence and the no-repeat
n-gram ban over its generated ids, DRY over its prompt and generated ids (as llama.cpp's:
a continuation that re-sends earlier text must not loop back into it), kept up to date
token by token (no rescan of the history).

It knows token ids only; which ids break a DRY match, and which are parts of a word,
come from `SequenceBreakers`, the one place that decodes the vocabulary.

Unlike llama.cpp's, gen's DRY does not penalise an id that goes on with a word already
begun (in a script that spaces its words): the penalty falls on the next word instead. A
word the text must repeat is often several ids (" l", "ighth", "ouses"); penalising its
last part, after "the history of l ighth" was seen, bent it into "lighthairs".
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Set as AbstractSet
from collections.abc import Sized
from dataclasses import dataclass

import torch

from gen.engine.detokenizer import Tokenizer
from gen.sampling import SamplingParams
from gen.text.scripts import spaced_letter

# llama.cpp caps DRY's exponent so that base ** exponent stays within float32
FLOAT_MAX_LOG = 88.7228391


@dataclass(frozen=True, slots=True)
class WordParts:
    """Ids whose text begins with a letter of a spaced script (no space before it), and
    ids whose text ends with one: the first go on with a word after the second; ids with a
    digit in their text, and ids that are a figure's marks ("." "," "%")."""

    starts: frozenset[int] = frozenset()
    ends: frozenset[int] = frozenset()
    digits: frozenset[int] = frozenset()
    marks: frozenset[int] = frozenset()


class SequenceBreakers:
    """The vocab ids DRY treats as sequence breakers, per tuple of breaker strings: those
    whose decoded text contains any of them. The vocabulary is decoded once, on the first
    request that uses DRY, and each tuple's id set is kept."""

    def __init__(self, tokenizer: Tokenizer, vocab: int) -> None:
        self.tokenizer = tokenizer
        self.vocab = vocab
        self._texts: list[str] | None = None
        self._ids: dict[tuple[str, ...], frozenset[int]] = {}
        self._parts: WordParts | None = None

    def ids(self, breakers: tuple[str, ...]) -> frozenset[int]:
        found = self._ids.get(breakers)
        if found is None:
            texts = self._decoded()
            found = frozenset(i for i, t in enumerate(texts) if any(b in t for b in breakers))
            self._ids[breakers] = found
        return found

    def word_parts(self) -> WordParts:
        if self._parts is None:
            texts = self._decoded()
            self._parts = WordParts(
                frozenset(i for i, t in enumerate(texts) if t and spaced_letter(t[0])),
                frozenset(i for i, t in enumerate(texts) if t and spaced_letter(t[-1])),
                frozenset(i for i, t in enumerate(texts) if any(c.isdigit() for c in t)),
                frozenset(i for i, t in enumerate(texts) if t in FIGURE_MARKS),
            )
        return self._parts

    def _decoded(self) -> list[str]:
        if self._texts is None:
            n = self.vocab
            if isinstance(self.tokenizer, Sized):  # the model's vocab may be padded past it
                n = min(n, len(self.tokenizer))
            decode = self.tokenizer.decode
            self._texts = [decode([i], skip_special_tokens=False) for i in range(n)]
        return self._texts


# a repeat that goes on as the source does after these many ids is copying it (two would
# match "of the" anywhere; three hold a figure's "43", ".", "04"); only a figure is let
# through (a phrase of the prompt said again and again is a model starting over)
SOURCE_RUN = 3
FIGURE_MARKS = frozenset({".", ",", "%", "，", "．", "％"})


class PenaltyState:
    """One request's generated ids, indexed for its penalties: `push` each generated id,
    `apply` to the logits before each draw.

    Per token: frequency/presence and the n-gram ban cost O(1) to update; `apply` costs
    O(vocab) for frequency/presence (one subtraction of a kept (vocab,) bias). DRY keeps,
    for the last id y, the length of the match ending at each earlier position of y (the
    "active" matches); a new id y' extends the matches that end just before its earlier
    positions. That update is O(earlier occurrences of y'), which grows with the text for
    common ids; `dry_penalty_last_n` caps it at the window (older positions are dropped).
    """

    def __init__(
        self,
        params: SamplingParams,
        vocab: int,
        breakers: AbstractSet[int] = frozenset(),
        words: WordParts = WordParts(),
    ) -> None:
        self.params = params
        self.vocab = vocab
        self.breakers = breakers
        self.words = words
        self.ids: list[int] = []  # the prompt's ids DRY looks at, then the generated ones
        self.context = 0  # how many of `ids` came from the prompt
        # frequency / presence: counts, and the amount each id loses, (vocab,)
        self.counts: dict[int, int] = {}
        self.bias: torch.Tensor | None = None
        if params.frequency_penalty or params.presence_penalty:
            self.bias = torch.zeros(vocab)
        # no-repeat n-gram: each (n-1)-gram generated -> the ids that followed it
        self.ngrams: dict[tuple[int, ...], set[int]] = {}
        # DRY: earlier positions of each id (within the window), and the active matches:
        # position i -> length of the longest run ending at i that equals the run ending
        # at the last id (i holds the last id; the run holds no breaker)
        self.positions: dict[int, deque[int]] = {}
        self.matches: dict[int, int] = {}
        self.max_exponent = int(FLOAT_MAX_LOG / math.log(params.dry_base))
        # the source DRY does not read (the prompt before its last dry_prompt_tokens ids):
        # each SOURCE_RUN ids in it -> the ids that follow them there; a repeat that goes on
        # copying it is a fact said again, not a loop
        self.source: dict[tuple[int, ...], set[int]] = {}

    def push_source(self, tokens: list[int]) -> None:
        """Take the ids of the text a repeat may copy without penalty (the prompt's
        material: figures, names, quotes said again in the answer)."""
        if not self.params.dry_multiplier:
            return
        for i in range(len(tokens) - SOURCE_RUN):
            self.source.setdefault(tuple(tokens[i : i + SOURCE_RUN]), set()).add(
                tokens[i + SOURCE_RUN]
            )

    def push_context(self, tokens: list[int]) -> None:
        """Take the prompt's ids, before any generated one: only DRY looks at them."""
        if self.params.dry_multiplier:
            for token in tokens:
                self.ids.append(token)
                self._push_dry(token)
        self.context = len(self.ids)

    def push(self, token: int) -> None:
        """Take one generated id."""
        p = self.params
        if self.bias is not None and 0 <= token < self.vocab:
            count = self.counts[token] = self.counts.get(token, 0) + 1
            self.bias[token] = p.frequency_penalty * count + p.presence_penalty
        k = p.no_repeat_ngram_size - 1
        if k > 0 and len(self.ids) - self.context >= k:
            self.ngrams.setdefault(tuple(self.ids[-k:]), set()).add(token)
        self.ids.append(token)
        if p.dry_multiplier:
            self._push_dry(token)

    def _push_dry(self, token: int) -> None:
        if token in self.breakers:
            self.matches = {}  # no match spans a breaker
            return
        pos = len(self.ids) - 1
        start = self._window_start()
        earlier = self.positions.setdefault(token, deque())
        while earlier and earlier[0] < start:
            earlier.popleft()
        # a match ending at i extends the one that ended at i - 1, cut at the window
        old = self.matches
        self.matches = {i: min(old.get(i - 1, 0) + 1, i - start + 1) for i in earlier}
        earlier.append(pos)

    def _window_start(self) -> int:
        last_n = self.params.dry_penalty_last_n
        return max(0, len(self.ids) - last_n) if last_n else 0

    def dry_lengths(self) -> dict[int, int]:
        """Each id that would extend a repeat of at least dry_allowed_length generated ids,
        with the longest such repeat. Breaker ids are never penalised (as in llama.cpp),
        nor, after an id that ends inside a word, an id that goes on with that word, nor an
        id that goes on copying the source (push_source) as it goes on there."""
        allowed = self.params.dry_allowed_length
        in_word = bool(self.ids) and self.ids[-1] in self.words.ends
        copying = self._copying()
        out: dict[int, int] = {}
        for i, length in self.matches.items():
            if length >= allowed:
                t = self.ids[i + 1]  # what followed the earlier run
                if (in_word and t in self.words.starts) or t in copying:
                    continue
                if t not in self.breakers and length > out.get(t, 0):
                    out[t] = length
        return out

    def _copying(self) -> AbstractSet[int]:
        """The ids that would go on copying a figure of the source, as it goes on there:
        a digit, or a figure's mark after one."""
        follows = self.source.get(tuple(self.ids[-SOURCE_RUN:]))
        if not follows:
            return frozenset()
        after_digit = self.ids[-1] in self.words.digits
        digits, marks = self.words.digits, self.words.marks
        return {t for t in follows if t in digits or (after_digit and t in marks)}

    def dry_penalties(self) -> dict[int, float]:
        """The amount each id loses to DRY: multiplier * base ** (L - allowed_length)."""
        p = self.params
        return {
            t: p.dry_multiplier * p.dry_base ** min(n - p.dry_allowed_length, self.max_exponent)
            for t, n in self.dry_lengths().items()
        }

    def banned_ids(self) -> AbstractSet[int]:
        """Ids that would complete an n-gram already generated (no_repeat_ngram_size)."""
        k = self.params.no_repeat_ngram_size - 1
        if k <= 0 or len(self.ids) - self.context < k:
            return frozenset()
        return self.ngrams.get(tuple(self.ids[-k:]), frozenset())

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """A (vocab,) float32 row with frequency/presence, then DRY, then the n-gram ban
        applied; a new tensor."""
        logits = logits.clone()
        if self.bias is not None:
            logits -= self.bias
        if self.params.dry_multiplier:
            amounts = self.dry_penalties()
            if amounts:
                logits[list(amounts)] -= torch.tensor(list(amounts.values()))
        banned = self.banned_ids()
        if banned:
            logits[list(banned)] = float("-inf")
        return logits
