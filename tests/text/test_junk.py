"""The junk filter: lines and runs without a letter or digit are dropped as text streams in,
Markdown syntax and code kept, the same whatever the pieces."""

from __future__ import annotations

import pytest

from gen.text.junk import (
    JUNK_ROW_CHARS,
    JUNK_ROW_LINES,
    JUNK_RUN_CHARS,
    JunkFilter,
    junk_line,
    syntax_line,
)


def filtered(text: str, chunk: int = 3) -> tuple[str, JunkFilter]:
    junk = JunkFilter()
    kept = "".join(junk.feed(text[i : i + chunk]) for i in range(0, len(text), chunk))
    return kept + junk.finish(), junk


SOUND = {
    "list": "Steps:\n\n- Pick the leaves.\n- Wither them.\n\n1. Roll\n2. Dry\n",
    "dialogue": "“Tea?” she asked.\n\n“Yes — please!” he said… and smiled.\n\n— Fine.",
    "refrain": "Row, row, row your boat,\nGently down the stream.\nRow, row, row your boat,\n",
    "code": "Run it:\n\n```python\nif ok:\n    f(x)\n\n}\n)\n***!!\n```\n\nDone.",
    "numbers": "In 1610, 1662 and 1784: 3.5%, 12 / 7 = 1.71 (about).",
    "table": "| Tea | Cups |\n|:---|---:|\n| Green | 3 |\n| Black | 12 |\n",
    "rules": "One.\n\n---\n\n***\n\n___\n\nHeading\n=======\n\n> quoted\n>\n> on",
    "emoji in sentences": "Great work 😀! Let's go 🚀. Tea ☕ is hot (90 °C) → drink it.",
    "brackets": "function f() {\n  return [1, 2];\n}\n",
    "chinese": "她说：“你好！”……他笑了。\n\n一、采摘；二、萎凋。\n\n——完——",
    "chinese list": "步骤：\n\n1. 采摘\n2. 萎凋\n\n- 揉捻 😀\n",
}


@pytest.mark.parametrize("chunk", [1, 3, 50])
@pytest.mark.parametrize("name", list(SOUND))
def test_sound_text_passes_untouched(name: str, chunk: int) -> None:
    text, junk = filtered(SOUND[name], chunk)
    assert text == SOUND[name]
    assert junk.dropped == 0 and not junk.due


@pytest.mark.parametrize("chunk", [1, 4, 100])
@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Hello.\n🌟🌟🌟\nWorld.", "Hello.\nWorld."),
        ("Hello.\n\n👩\n\nWorld.", "Hello.\n\nWorld."),  # its blank line goes with it
        ("Items:\n- one\n-\n- two", "Items:\n- one\n- two"),  # a list marker alone
        ("Title\n##\nText", "Title\nText"),
        ("茶很香。\n\n\ufffd\ufffd\n\n茶很苦。", "茶很香。\n\n茶很苦。"),  # broken bytes
        ("😀😀\nText.", "Text."),
        ("Text.\n✨✨", "Text.\n"),
    ],
)
def test_a_junk_line_is_dropped_silently(text: str, kept: str, chunk: int) -> None:
    out, junk = filtered(text, chunk)
    assert out == kept
    assert junk.dropped == 1 and not junk.due


@pytest.mark.parametrize("chunk", [1, 5])
def test_a_run_inside_a_line_is_dropped(chunk: int) -> None:
    out, junk = filtered("The answer is " + "👩" * 30 + " and more.", chunk)
    assert out == "The answer is and more."
    out, junk = filtered("Wow" + "!" * 40 + " ok", chunk)
    assert out == "Wow!!!!!!!! ok"  # punctuation up to PLAIN_PASS went out at once
    assert junk.dropped == 1 and not junk.due
    # shorter than a run: kept
    short = "Stars " + "✨" * (JUNK_RUN_CHARS - 1) + " shine."
    assert filtered(short, chunk)[0] == short


@pytest.mark.parametrize("chunk", [1, 3, 100])
def test_blank_lines_are_one_paragraph_break(chunk: int) -> None:
    text = "\n\nOne.\n\n\n\nTwo.\n   \n\t\nThree.  \nFour.\n```\n\n\n\n```\n"
    out, junk = filtered(text, chunk)
    assert out == "One.\n\nTwo.\n\nThree.  \nFour.\n```\n\n\n\n```\n"  # code as it is
    assert junk.dropped == 0  # (layout, not junk)


def test_a_row_of_junk_lines_is_due_and_takes_nothing_more() -> None:
    junk = JunkFilter()
    kept = junk.feed("Adrian:\n" + "👩\n" * (JUNK_ROW_LINES - 1))
    assert kept == "Adrian:\n" and not junk.due
    assert junk.feed("👩\nMore words.") == ""
    assert junk.due and junk.row_lines == JUNK_ROW_LINES and junk.first == "👩"
    junk.sync("Adrian:\n")  # after the cut: a fresh start
    assert not junk.due and junk.feed("Sound.\n") == "Sound.\n"


def test_a_row_of_junk_characters_is_due() -> None:
    junk = JunkFilter()
    assert junk.feed("Sound text. " + "\ufffd" * (JUNK_ROW_CHARS - 1)) == "Sound text. "
    assert not junk.due
    junk.feed("\ufffd")
    assert junk.due and junk.first == "\ufffd"


def test_a_word_ends_the_row() -> None:
    junk = JunkFilter()
    text = ("😀\nword\n" * 5) + "😀\n"
    assert junk.feed(text) == "word\n" * 5
    assert not junk.due and junk.dropped == 6


def test_the_end_of_a_round_decides_what_is_held_as_it_stands() -> None:
    junk = JunkFilter()
    assert junk.feed("Text.\n- ") == "Text.\n"
    assert junk.flush() == "- "  # a marker may still go on
    assert junk.feed("item\n") == "item\n"
    assert junk.feed("👩👩") == ""
    assert junk.flush() == ""  # a symbol: dropped, and so is the rest of its line
    assert junk.feed("👩\nNext") == "Next"
    assert junk.dropped == 1
    assert junk.feed(".\n\n   ") == ".\n\n"
    assert junk.flush() == ""  # space alone: still held
    assert junk.feed("  \nOn.") == "On."  # a second blank line


def test_a_run_split_across_rounds_is_counted_once() -> None:
    junk = JunkFilter()
    assert junk.feed("铁路信号。" + "\ufffd" * 40) == "铁路信号。"
    assert junk.flush() == ""
    assert junk.feed("！？＃" * 10) == ""
    assert junk.flush() + junk.finish() == ""
    assert junk.dropped == 1 and not junk.due


def test_sync_reads_the_text_it_starts_on() -> None:
    junk = JunkFilter()
    junk.sync("Intro.\n\n```\ncode\n")
    assert junk.feed("}\n😀\n```\n😀\nText") == "}\n😀\n```\nText"  # code until the fence


@pytest.mark.parametrize(
    ("line", "junk"),
    [
        ("👩", True),
        ("  ✨ ✨ ✨  ", True),
        ("-", True),
        ("##", True),
        ("**", True),
        ("...", True),
        ("\ufffd", True),
        ("", False),
        ("---", False),
        ("* * *", False),
        ("|---|:-:|", False),
        ("```", False),
        ("~~~", False),
        (">", False),
        ("}", False),
        ("});", False),
        ("2.", False),
        ("a", False),
        ("茶", False),
    ],
)
def test_junk_lines(line: str, junk: bool) -> None:
    assert junk_line(line) is junk
    if not junk and not any(c.isalnum() for c in line):
        assert syntax_line(line)
