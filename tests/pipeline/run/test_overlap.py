"""The seam of the `chat` strategy: remove_overlap drops what the new round repeats."""

from __future__ import annotations

import pytest

from gen.pipeline.run.continuation import remove_overlap

FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # man ZWJ woman ZWJ girl
FAMILY4 = FAMILY + "\u200d\U0001f466"  # ... ZWJ boy


@pytest.mark.parametrize(
    ("old", "new", "rest"),
    [
        # none
        ("The tea is ready.", " Pour it slowly.", " Pour it slowly."),
        ("", "Start.", "Start."),
        ("Done.", "", ""),
        # partial: the last words again
        ("The cat sat on the mat", " on the mat and purred.", " and purred."),
        ("The cat sat on the mat", "sat on the mat and purred.", " and purred."),
        # full repeat: the model starts over
        ("Once upon a time.", "Once upon a time. Then a dragon came.", " Then a dragon came."),
        ("Once upon a time.", "\n\nOnce upon a time. Then a dragon came.", " Then a dragon came."),
        ("Once upon a time.", "Once upon a time.", ""),
        # Chinese at the seam
        ("从前有一条龙，它住在山里。", "它住在山里。后来它飞走了。", "后来它飞走了。"),
        ("从前有一条龙，它住在山里。", "从前有一条龙，它住在山里。后来", "后来"),
        # emoji with ZWJ: the family is repeated, or grown by one more person
        (f"Our family: {FAMILY}", f"{FAMILY} went home.", " went home."),
        (f"Our family: {FAMILY}", f"{FAMILY4} went home.", "\u200d\U0001f466 went home."),
        # Thai: vowels and tone marks are their own code points
        ("เราไปดื่มน้ำ", "ดื่มน้ำเย็นกัน", "เย็นกัน"),
        ("เราไปดื่มน้ำ", "น้ำเย็นกัน", "เย็นกัน"),
    ],
)
def test_remove_overlap(old: str, new: str, rest: str) -> None:
    assert remove_overlap(old, new) == rest
    joined = old + remove_overlap(old, new)
    assert joined == old + rest
    joined.encode("utf-8")  # whole characters only: no lone surrogate, nothing half-cut
    assert "\ufffd" not in joined


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("We went to the", "the theatre"),  # 'the' is 3 bytes: too short to be a repeat
        ("It rained in Mississippi", "ppi is a funny word."),
        ("我们去看海", "海边的日落很美。"),  # one CJK character
        (f"Hello {FAMILY}", "\U0001f467 is a girl."),  # one emoji (4 bytes)
        ("เราไปดื่มน้ำ", "ำ"),
    ],
)
def test_short_accidental_overlaps_are_kept(old: str, new: str) -> None:
    assert remove_overlap(old, new) == new


def test_family_stays_whole_when_repeated_inside_a_sentence() -> None:
    old = f"Photo: {FAMILY} at the beach"
    new = f"{FAMILY} at the beach, smiling."
    joined = old + remove_overlap(old, new)
    assert joined == f"Photo: {FAMILY} at the beach, smiling."
    assert joined.count(FAMILY) == 1
