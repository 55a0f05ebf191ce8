"""Drift: how well each paragraph of a section keeps to what the section was asked, in the
model's own probabilities. A paragraph's gain is the mean, over its first SCORED_TOKENS
tokens, of log p(token | the section's prompt and the paragraph before it) - log p(token |
a neutral prompt): how much knowing the topic helps the model predict it. A paragraph
whose gain is below DRIFT_GAIN is far off topic: it is cut where it began and retried like
a loop ("drift"). The section's `relevance` is the mean gain of the paragraphs it keeps.

The paragraph before is on the topical side because a paragraph that goes on from it
("Despite their strength, they were also resilient...") names its topic no more: judged
alone it gained -0.13 to -0.20 in a lighthouse essay and was cut; after its paragraph
0.27 to 0.48, while a quiz, a sermon, install instructions or market news after an
on-topic paragraph stay at -0.24 to -1.19. In Chinese it helps less: a tea paragraph
after another gained -0.06 (one on brewing in a section on tea's history) to 0.15, a sermon
or market news after one -0.17 and -0.13, a quiz 0.12.

Calibrated on the bundled SmolLM2-135M (gguf), mean gain over the first 128 tokens, the
topical context the section's prompt naming the document and the section (a first
paragraph, nothing before it):

- English, on topic: hand-written 0.11 to 0.85 (prose, a list, dialogue, a refrain,
  figures, chess notation in a code block); the model's own at temperature 0.7, 0.04 to
  0.55 (mean 0.17). Off topic: a multiple-choice quiz -0.14, a sermon -0.20, pip
  instructions -0.19, stock-market news -0.30; a paragraph on another essay's topic
  -0.49 to 0.10 (mostly below 0).
- Chinese, on topic: hand-written 0.09 to 0.53. Off topic: a sermon -0.07, stock-market
  news -0.05, gibberish ("花天一切茶香，空气热洉…") -0.09; another topic's paragraph
  -0.03 to 0.04. A quiz (0.04) and gibberish made of the topic's own characters
  ("茶菜茶菂茶本,茶鸟茶草…", 0.04) come out just above 0: the topic's characters are
  what the prompt makes likely.

DRIFT_GAIN is 0: the section's prompt makes the paragraph no more likely than a neutral
one, so it is not about what was asked. Every on-topic sample above it, every clear
off-topic one below. Word salad is not drift by this measure (the model's own at
temperature 1.1 gains -0.14 to 0.57), nor is its mean log-probability a sound second
figure: it follows the sampling temperature and the writer more than the sense (the
model's own text at 0.7: -0.5 to -2.4 a token; hand-written on-topic text -2.3 to -4.8;
word salad -3.5 to -7.0; the tea-character gibberish above -1.2), so a floor would cut
sound text. The loop, junk and language checks take the rest.

Knows nothing of how the text is cut into rounds: a paragraph is judged once, when a
blank line follows it or the model ends the section after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from statistics import fmean
from typing import TYPE_CHECKING

from gen.backends.base import Backend, Message
from gen.pipeline.run.repetition import Repetition
from gen.text.language import Script
from gen.text.words import count_words

if TYPE_CHECKING:
    from gen.pipeline.run.draft import Draft
    from gen.pipeline.run.manifest import SectionRecord

DRIFT_GAIN = 0.0
SCORED_TOKENS = 128  # a paragraph's first tokens, where its topic shows (and the cost is capped)
MIN_WORDS = 20  # shorter paragraphs (a heading, a line of dialogue) are not judged
PROMPT_CHARS = 1000  # of the section's prompt, as the topical context
BEFORE_CHARS = 600  # of the paragraph before, as the start of the topical reply
# the neutral context, in the section's script: a section of a document, no topic
NEUTRAL: dict[Script, str] = {
    "latin": "You are writing a document. Write a section of it in several paragraphs.",
    "cjk": "你正在写一篇文章。请写其中的一节，分几段。",
}
_BREAK = re.compile(r"\n[ \t]*\n\s*")


def paragraphs(text: str, final: bool, begin: int = 0) -> list[tuple[int, int]]:
    """(start, end) of each complete paragraph of text from `begin` on: a blank line
    follows it, or with `final` the text ends after it."""
    found: list[tuple[int, int]] = []
    start = begin
    for brk in _BREAK.finditer(text, begin):
        found.append((start, brk.start()))
        start = brk.end()
    if final and text[start:].strip():
        found.append((start, len(text.rstrip())))
    return [(s, e) for s, e in found if e > s]


@dataclass(slots=True)
class Relevance:
    """One section's judge of its paragraphs; `judged`: (start, paragraph, gain) of each
    scored, the cut ones among them until the text no longer holds them."""

    backend: Backend
    topical: list[Message]
    neutral: list[Message]
    judged: list[tuple[int, str, float]] = field(default_factory=list)
    drifted: bool = False  # some paragraph was cut as off topic
    able: bool = True  # the backend scores

    async def check(self, draft: Draft, final: bool = False) -> Repetition | None:
        """Judge the paragraphs of draft's text completed since the last check (`final`: the
        model has ended the text, its last paragraph is complete too). The first far off
        topic is cut from the text, where it began (never before what was shown)."""
        if not self.able:
            return None
        text = draft.text
        self.judged = [j for j in self.judged if text.startswith(j[1], j[0])]
        done = max((start + len(p) for start, p, _ in self.judged), default=0)
        for start, end in paragraphs(text, final, done):
            if count_words(text[start:end]) < MIN_WORDS:
                continue
            gain = await self.gain(text[start:end], text[:start])
            if gain is None:
                return None
            self.judged.append((start, text[start:end], gain))
            if gain < DRIFT_GAIN and end > draft.shown:
                return self._cut(draft, start, gain)
        return None

    async def gain(self, paragraph: str, before: str = "") -> float | None:
        """The paragraph's mean gain in log-probability from the topic, `before` the
        section's text before it (its last paragraph goes on the topical side); None
        where the backend cannot score (the judge then stops asking)."""
        context = self.topical
        last = before.rstrip()
        begin = last.rfind("\n\n") + 2 if "\n\n" in last else 0
        last = last[max(begin, len(last) - BEFORE_CHARS) :].strip()
        if last:
            context = [*context, {"role": "assistant", "content": last + "\n\n"}]
        found = await self.backend.score([context, self.neutral], paragraph, SCORED_TOKENS)
        if found is None:
            self.able = False
            return None
        topical, neutral = found
        if not topical:
            return 0.0
        return fmean(t - n for t, n in zip(topical, neutral, strict=True))

    def _cut(self, draft: Draft, start: int, gain: float) -> Repetition:
        self.drifted = True
        self.judged.pop()
        keep = max(len(draft.text[:start].rstrip()), draft.shown)
        words = draft.text[start:].split()[:8]
        draft.text = draft.text[:keep]
        detail = f"gain {gain:.2f} from the topic: {' '.join(words)}"
        return Repetition("drift", start, keep, detail)

    def record(self, record: SectionRecord, text: str) -> None:
        """The section's `relevance`: its kept paragraphs' mean gain (None: none judged, or
        the backend cannot score); a cut says `drift` among its reasons."""
        kept = [g for start, p, g in self.judged if text.startswith(p, start)]
        record.relevance = round(fmean(kept), 2) if kept and self.able else None
        if self.drifted and "drift" not in record.reasons:
            record.reasons.append("drift")


def judge_for(
    backend: Backend, prompt: str, system: str | None, wanted: Script | None
) -> Relevance:
    """A prose section's judge: the topical context is the prompt it was asked (own_prompt,
    cut to PROMPT_CHARS) with its system prompt, the neutral one NEUTRAL in the script it
    is written in."""
    head: list[Message] = [{"role": "system", "content": system}] if system else []
    return Relevance(
        backend,
        [*head, {"role": "user", "content": prompt.strip()[:PROMPT_CHARS]}],
        [*head, {"role": "user", "content": NEUTRAL[wanted or "latin"]}],
    )
