"""The script a text is written in, against the one it should be: CJK (Chinese characters,
kana, Hangul) or Latin. Counted in gen's words (a CJK character is one); code, links and
numbers are left out, and so is a short run of another script (a name, a term, an
acronym). Pure text, torch-free."""

from __future__ import annotations

import re
from collections import Counter, deque
from dataclasses import dataclass
from typing import Literal

from gen.text.quality import Scanner, Token, Unit, scan
from gen.text.words import CJK

Script = Literal["cjk", "latin"]
Language = Literal["auto", "any", "zh", "en"]  # the `language:` setting
SCRIPTS: dict[str, Script] = {"zh": "cjk", "en": "latin"}

# up to this many words of another script in a row are a name or a term: not counted
NAME_RUN = 3
# the share is judged over the last LANGUAGE_WINDOW counted words, once it holds at least
# LANGUAGE_MIN_WORDS; below LANGUAGE_SHARE of them in the wanted script, the text has
# left it
LANGUAGE_WINDOW, LANGUAGE_MIN_WORDS, LANGUAGE_SHARE = 80, 30, 0.5
# a prompt wants the script at least this share of its words are in (else none: mixed);
# a prompt of fewer words than PROMPT_MIN_WORDS ("Write the section.") says too little
PROMPT_SHARE, PROMPT_MIN_WORDS = 2 / 3, 6
# a prompt that asks for one of these by name wants it, whatever it is written in
ASKED: dict[Script, tuple[str, ...]] = {
    "latin": ("in english", "into english", "用英文", "用英语", "英文写", "英文回答",
              "英语回答", "翻译成英文", "译成英文", "翻译成英语", "译成英语"),
    "cjk": ("into chinese", "in simplified chinese", "用中文", "用汉语", "用简体中文",
            "中文写", "中文回答", "翻译成中文", "译成中文"),
}  # fmt: skip

_CJK_CHAR = re.compile(rf"[{CJK}\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")
_INNER = frozenset("'’-.")
_APART = re.compile(r"[\n|\u3000-\u303f\uff01-\uff0f\uff1a-\uff1f]")  # line, cell, CJK mark
_DOMAIN = re.compile(r"[^\W\d_]{2,}\.[^\W\d_]{2,}")
# a line of a reference list ("[3] OPHIR E, NASS C. Cognitive control in media
# multitaskers[J]. …"): a work cited in its own language, not the text's
_REFERENCE = re.compile(r"[ \t]*\[\d{1,3}\][ \t]")


def letter_script(ch: str) -> str:
    """ "cjk", "latin" or "other" for a letter."""
    if _CJK_CHAR.match(ch):
        return "cjk"
    o = ord(ch)
    if o < 0x250 or 0x1E00 <= o <= 0x1EFF or 0xFF21 <= o <= 0xFF5A:
        return "latin"
    return "other"


def word_script(raw: str) -> str | None:
    """The script of a word as written (punctuation at its ends aside): "cjk", "latin" or
    "other"; None for what is no word of one script: a number, a link, an address, code,
    a mix."""
    if "://" in raw or raw.lower().startswith("www.") or "@" in raw:
        return None
    i, j = _core(raw)
    core = raw[i:j]
    if not core or _DOMAIN.search(core):
        return None
    if not all(c.isalpha() or c in _INNER for c in core):
        return None
    scripts = {letter_script(c) for c in core if c.isalpha()}
    return scripts.pop() if len(scripts) == 1 else None


def _core(raw: str) -> tuple[int, int]:
    """Where a word's letters and digits begin and end, punctuation at its ends aside."""
    i, j = 0, len(raw)
    while i < j and not raw[i].isalnum():
        i += 1
    while j > i and not raw[j - 1].isalnum():
        j -= 1
    return i, j


def _words(text: str) -> list[str]:
    """The words of text as written, code left out."""
    return [
        text[e.start : e.end] for e in scan(text) if isinstance(e, Token) and e.region != "code"
    ]


def prompt_script(prompt: str) -> Script | None:
    """The script a prompt wants: the one it asks for by name ("in English", "用中文"),
    else the one at least PROMPT_SHARE of its words are in; None for a prompt that mixes
    them more evenly (a translation, say), is in neither, or is too short to tell."""
    low = prompt.lower()
    asked = [script for script, names in ASKED.items() if any(n in low for n in names)]
    if len(asked) == 1:
        return asked[0]
    counts = Counter(word_script(w) for w in _words(prompt))
    total = counts["cjk"] + counts["latin"] + counts["other"]
    for script in ("cjk", "latin"):
        if total >= PROMPT_MIN_WORDS and counts[script] >= PROMPT_SHARE * total:
            return script  # type: ignore[return-value]
    return None


def wanted_script(language: str, prompt: str) -> Script | None:
    """The `language:` setting's script: zh CJK, en Latin, any none; auto the prompt's."""
    if language == "any":
        return None
    if language in SCRIPTS:
        return SCRIPTS[language]
    return prompt_script(prompt)


@dataclass(frozen=True, slots=True)
class Slip:
    """The text has left the wanted script: from `start` (a sentence's start) on; `share`
    of the last `words` counted words are in it."""

    start: int
    share: float
    words: int


class LanguageCheck:
    """Feed it a text's pieces; it reports once, as a Slip, where the text went over to
    another script: the window's share of the wanted script below LANGUAGE_SHARE, and the
    sentences since the last one mostly in the wanted script. `base` (text before) fills
    the window, but only a fed word is judged; `floor`: no start before it."""

    def __init__(self, wanted: Script, base: str = "", *, floor: int | None = None) -> None:
        self.wanted = wanted
        self.wanted_words = 0  # in the whole text
        self.counted_words = 0
        self._base_len = len(base)
        self._floor = self._base_len if floor is None else max(0, min(floor, self._base_len))
        self._pieces = [base]
        self._scanner = Scanner()
        self._window: deque[bool] = deque()  # the last words counted: in the wanted script?
        self._window_wanted = 0
        self._units: deque[list[int]] = deque(maxlen=LANGUAGE_WINDOW)  # [start, wanted, other]
        self._new_unit = True
        self._run: list[list[int]] = []  # a run of other-script words: each one's unit
        self._run_counted = False  # the run is longer than a name: its words count
        self._last_end = 0
        self._inline_code = False
        self._found = False
        for event in self._scanner.feed(base):
            self._event(event, fed=False)

    @property
    def text(self) -> str:
        if len(self._pieces) > 1:
            self._pieces = ["".join(self._pieces)]
        return self._pieces[0]

    @property
    def share(self) -> float | None:
        """The wanted script's share of the words counted in the whole text so far."""
        return self.wanted_words / self.counted_words if self.counted_words else None

    def feed(self, piece: str, judge: bool = True) -> Slip | None:
        """Read the next piece; `judge` False: it is read like base (a seam between
        requests), nothing judged."""
        self._pieces.append(piece)
        found = None
        for event in self._scanner.feed(piece):
            slip = self._event(event, fed=judge)
            found = found or slip
        return found

    def finish(self) -> None:
        """The end of the text: its last word is counted (nothing is judged)."""
        for event in self._scanner.finish():
            self._event(event, fed=False)

    def _event(self, event: Token | Unit, fed: bool) -> Slip | None:
        if isinstance(event, Unit):
            self._new_unit = True
            return None
        text = self.text
        raw = text[event.start : event.end]
        i, j = _core(raw)
        gap = text[self._last_end : event.start + i]  # from the last word's letters on
        if "\n" in gap:
            self._inline_code = False
        if _APART.search(gap):
            self._break()  # names in a list or a table's cells are not a sentence
        self._last_end = event.start + j
        line = text.rfind("\n", 0, event.start) + 1
        cited = _REFERENCE.match(text, line) is not None
        code = event.region == "code" or self._inline_code or raw.startswith("`") or cited
        if raw.count("`") % 2:
            self._inline_code = not self._inline_code
        script = None if code else word_script(raw)
        if script is None:
            self._break()  # a number, a link, code: a run of names ends there
            return None
        if self._new_unit:
            self._units.append([event.start, 0, 0])
            self._new_unit = False
        unit = self._units[-1]
        if script == self.wanted:
            self._break()
            unit[1] += 1
            self._count(True)
        elif self._run_counted:
            unit[2] += 1
            self._count(False)
        else:
            self._run.append(unit)
            if len(self._run) > NAME_RUN:  # no name: every word of the run counts
                for u in self._run:
                    u[2] += 1
                    self._count(False)
                self._run, self._run_counted = [], True
        return self._judge() if fed else None

    def _break(self) -> None:
        self._run, self._run_counted = [], False

    def _count(self, wanted: bool) -> None:
        self.counted_words += 1
        self.wanted_words += wanted
        self._window.append(wanted)
        self._window_wanted += wanted
        if len(self._window) > LANGUAGE_WINDOW:
            self._window_wanted -= self._window.popleft()

    def _judge(self) -> Slip | None:
        n = len(self._window)
        if self._found or n < LANGUAGE_MIN_WORDS:
            return None
        share = self._window_wanted / n
        if share >= LANGUAGE_SHARE:
            return None
        start = None
        for unit_start, wanted, other in reversed(self._units):
            if other > wanted:
                start = unit_start
            elif wanted:
                break  # a sentence in the wanted script: the slip began after it
        if start is None:
            return None
        self._found = True
        return Slip(max(start, self._floor), share, n)


def language_share(text: str, wanted: Script) -> float | None:
    """The share of text's counted words in the wanted script (None: none counted)."""
    check = LanguageCheck(wanted, text)
    check.finish()
    return check.share


# Simplified Chinese as people write it keeps to GB2312's 3,755 first-level characters
# (hand-written passages here: none outside them, or a name now and then); the bundled
# model's Chinese gibberish ("碧碩碎碬碊碢碼…") has 7% to 70% of a paragraph outside. Over
# the last RARE_WINDOW Chinese characters (once RARE_MIN are read) more than RARE_SHARE
# outside, or over the last RARE_BURST at least RARE_BURST_SHARE, is gibberish; a list of
# names may hold six in thirty ("白头鹎、乌鸫、珠颈斑鸠……北红尾鸲、黄眉柳莺", a science night's
# birds), so a listed item's characters do not count.
RARE_WINDOW, RARE_MIN, RARE_SHARE = 100, 60, 0.1
RARE_BURST, RARE_BURST_SHARE = 30, 0.2
LISTED_SPAN = 5  # a rare character this close after a "、" is a listed name's, not rare
# a prompt is Simplified Chinese when it has this many Chinese characters, nearly all common
SIMPLIFIED_MIN, SIMPLIFIED_SHARE = 6, 0.95
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]")
_SENTENCE_END = re.compile(r"[。！？!?\n]")


def common_han(ch: str) -> bool:
    """A first-level GB2312 character: one of the 3,755 of everyday Simplified Chinese."""
    try:
        code = ch.encode("gb2312")
    except UnicodeEncodeError:
        return False
    return len(code) == 2 and 0xB0 <= code[0] <= 0xD7


def simplified(prompt: str) -> bool:
    """Is the prompt written in Simplified Chinese's common characters?"""
    han = _HAN.findall(prompt)
    common = sum(common_han(ch) for ch in han)
    return len(han) >= SIMPLIFIED_MIN and common >= SIMPLIFIED_SHARE * len(han)


class RareCheck:
    """Feed it a Simplified Chinese text's pieces; it reports once, as a Slip, where the
    text went over to rare characters (gibberish): from the first sentence in the window
    that is itself mostly rare past RARE_SHARE. `base` fills the window, only a fed
    character is judged; `floor`: no start before it."""

    def __init__(self, base: str = "", *, floor: int | None = None) -> None:
        self._text = ""
        self._floor = len(base) if floor is None else max(0, min(floor, len(base)))
        self._window: deque[tuple[int, bool]] = deque(maxlen=RARE_WINDOW)  # (where, rare)
        self._rare = 0
        self._found = False
        self.feed(base, judge=False)

    def feed(self, piece: str, judge: bool = True) -> Slip | None:
        begin = len(self._text)
        self._text += piece
        found = None
        for match in _HAN.finditer(piece):
            if len(self._window) == RARE_WINDOW:
                self._rare -= self._window[0][1]
            at = begin + match.start()
            # a name in a list ("白头鹎、乌鸫、珠颈斑鸠"): an item just after an enumeration mark
            named = "、" in self._text[max(0, at - LISTED_SPAN) : at]
            rare = not common_han(match.group()) and not named
            self._window.append((at, rare))
            self._rare += rare
            if judge and found is None and not self._found:
                found = self._judge()
        return found

    def _judge(self) -> Slip | None:
        window, n = self._window, len(self._window)
        burst = sum(rare for _, rare in list(window)[-RARE_BURST:])
        wide = n >= RARE_MIN and self._rare > RARE_SHARE * n
        if not wide and not (n >= RARE_BURST and burst >= RARE_BURST_SHARE * RARE_BURST):
            return None
        self._found = True
        share, words = (self._rare / n, n) if wide else (burst / RARE_BURST, RARE_BURST)
        return Slip(max(self._start(), self._floor), share, words)

    def _start(self) -> int:
        """The start of the first sentence in the window that is itself past RARE_SHARE."""
        sentences: dict[int, list[int]] = {}  # start -> [rare, all]
        for at, rare in self._window:
            ends = [m.end() for m in _SENTENCE_END.finditer(self._text, 0, at)]
            counts = sentences.setdefault(ends[-1] if ends else 0, [0, 0])
            counts[0] += rare
            counts[1] += 1
        return next(s for s, (rare, n) in sentences.items() if rare > RARE_SHARE * n)
