from __future__ import annotations

from gen.sources.tokens import terms


def test_latin_words_lower_case_singular_without_function_words() -> None:
    assert terms("The Fares of the Trams and Deliveries, in 2025") == [
        "fare", "tram", "delivery", "2025",
    ]  # fmt: skip


def test_numbers_stay_whole() -> None:
    assert terms("€61.4 million, 1,140 staff, 14:12 on 2025-06-27") == [
        "61.4", "million", "1,140", "staff", "14:12", "2025-06-27",
    ]  # fmt: skip


def test_short_words_and_endings_that_are_no_plural_are_kept() -> None:
    assert terms("bus class analysis status gas") == ["bus", "class", "analysis", "status", "gas"]


def test_cjk_characters_and_their_pairs() -> None:
    assert terms("四号线的开通") == [
        "四",
        "号",
        "线",
        "开",
        "通",
        "四号",
        "号线",
        "线的",
        "的开",
        "开通",
    ]


def test_full_width_forms_are_folded() -> None:
    assert terms("ＫＲＴ　２０２５") == ["krt", "2025"]
