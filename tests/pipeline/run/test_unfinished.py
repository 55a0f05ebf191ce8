"""A section whose last round was cut off at max_tokens, with no round left to go on from
it, ends in an unfinished sentence ("In this book, I"): that sentence is held back (it is
never shown), dropped from the document, and kept in the manifest's `unfinished`. A
section that ended by itself, or at a line's end, keeps all of its text; a last line that
is only a list marker ("2.") is dropped however the section ended."""

from __future__ import annotations

from pathlib import Path

import pytest

from gen.pipeline.run.release import unfinished_from

from .test_reader import PROMPT_ZH, run_section

PROMPT = "Write a short introduction to how tea is made for curious beginners."


@pytest.mark.parametrize(
    ("text", "kept"),
    [("It grows.\n\nIn this book, I", "It grows.\n\n"),
     ("A cup. Then", "A cup."),
     ("茶很好。然后我们", "茶很好。"),
     ('He said "go." And', 'He said "go."'),
     ("Tips:\n1. Boil water.\n2. Use fresh wa", "Tips:\n1. Boil water.\n"),
     ("Steps\n\n3. Use fresh wa", "Steps\n\n"),  # not the bare "3."
     ("สวัสดีครับ 🌸\nวันนี้อากาศ", "สวัสดีครับ 🌸\n"),  # (Thai ends a line, not a sentence)
     ("Done.", None), ("Done.\n", None), ("A line\n", None),
     ("no end at all", None), ("It costs 3.5 dollars and", None)],
)  # fmt: skip
def test_the_unfinished_sentence_is_found(text: str, kept: str | None) -> None:
    start = unfinished_from(text)
    assert (None if start is None else text[:start]) == kept


def test_a_section_cut_off_mid_sentence_ends_at_its_last_full_sentence(tmp_path: Path) -> None:
    reply = (
        "Tea comes from the leaves of one plant. Pickers take the top leaves by hand.\n\n"
        "In this book, I"
    )
    sec, text, _, _ = run_section(tmp_path, PROMPT, [(reply, "length")], max_rounds=1)
    assert text.rstrip() == reply.split("\n\n")[0]
    assert sec["unfinished"] == "In this book, I"
    assert sec["truncated"] is True and "truncated" in sec["reasons"]


def test_chinese_is_cut_back_to_its_full_stop(tmp_path: Path) -> None:
    reply = "汽车制造商的研究背景包括市场、技术和政策三个方面。电动化改变了整个行业的"
    sec, text, _, _ = run_section(tmp_path, PROMPT_ZH, [(reply, "length")], max_rounds=1)
    assert text.rstrip() == "汽车制造商的研究背景包括市场、技术和政策三个方面。"
    assert sec["unfinished"] == "电动化改变了整个行业的"


@pytest.mark.parametrize(
    ("reply", "finish"),
    [("Tea comes from one plant. It is picked by hand and", "stop"),  # it ended by itself
     ("Tea comes from one plant. It is picked by hand.\n", "length")],  # cut at a line end
)  # fmt: skip
def test_a_section_that_ended_or_was_cut_at_a_line_end_keeps_its_text(
    tmp_path: Path, reply: str, finish: str
) -> None:
    sec, text, _, _ = run_section(tmp_path, PROMPT, [(reply, finish)], max_rounds=1)
    assert text.rstrip() == reply.rstrip() and "unfinished" not in sec


@pytest.mark.parametrize("finish", ["stop", "length"])
def test_a_last_line_that_is_only_a_list_marker_is_dropped(tmp_path: Path, finish: str) -> None:
    reply = "Three tips.\n\n1. Boil fresh water.\n\n2."
    _, text, _, _ = run_section(tmp_path, PROMPT, [(reply, finish)], max_rounds=1)
    assert text.rstrip() == "Three tips.\n\n1. Boil fresh water."


def test_a_list_marker_before_the_targets_paragraph_break_is_never_shown(tmp_path: Path) -> None:
    """The length policy ends the section at the paragraph break past its target, which
    comes after a bare "2.": the marker is held back there too, then dropped."""
    reply = ("Tea comes from the leaves of one plant that grows on warm green hills. "
             "Pickers take the top leaves by hand in the early morning.\n\n2.\n\n"
             "Then the leaves wither on racks for many hours before rolling.")  # fmt: skip
    sec, text, _, _ = run_section(
        tmp_path, PROMPT, [(reply, "stop")], max_rounds=1, target_words=26
    )
    assert sec["rounds"][-1]["stop_reason"] == "target_words"
    assert text.rstrip().endswith("by hand in the early morning.")


def test_a_round_that_goes_on_finishes_the_sentence(tmp_path: Path) -> None:
    """Cut off, then continued: the sentence is finished, nothing is dropped."""
    replies = [("Tea comes from one plant. Pickers take the top", "length"),
               (" leaves by hand.", "stop")]  # fmt: skip
    sec, text, _, _ = run_section(tmp_path, PROMPT, replies, max_rounds=2)
    assert text.rstrip().endswith("Pickers take the top leaves by hand.")
    assert "unfinished" not in sec and sec["truncated"] is False
