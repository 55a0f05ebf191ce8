"""The length plan as arithmetic: rounds from a target, the tokens per word of the prompt's
script and max_tokens, bounded by the window; an explicit max_rounds wins; and why a
target is out of reach, with the numbers."""

from __future__ import annotations

import pytest

from gen.pipeline.length import (
    CONSERVATIVE,
    DEFAULT_ROUNDS,
    SAMPLES,
    LengthPlan,
    Rate,
    Window,
    after_run,
    conservative_rate,
    measure_rate,
    plan_length,
    script_of,
    text_room,
)
from gen.text.words import count_words
from tests.pipeline.fake_backend import pipeline_from

EN = Rate("latin", 1.2, measured=True)
ZH = Rate("cjk", 2.4, measured=True)
ROOMY = Window(8192, 50, 8142)


def plan(
    lengths: tuple[int | None, int | None, int | None],
    rate: Rate | None,
    *,
    max_rounds: int | None = None,
    max_tokens: int = 256,
    window: Window | None = ROOMY,
) -> LengthPlan:
    return plan_length(lengths, rate, max_rounds=max_rounds, max_tokens=max_tokens, window=window)


@pytest.mark.parametrize(
    ("text", "script"),
    [
        ("Write an essay about rivers.", "latin"),
        ("Écris un essai sur les fleuves et les routes.", "latin"),
        ("请写一篇关于 Python 和 Rust 的文章，介绍它们的优点。", "cjk"),
        ("日本の川について書いてください。", "cjk"),
        ("Напишите эссе о реках и дорогах.", "cyrillic"),
        ("강과 길에 대한 글을 쓰세요.", "other"),
        ("", "latin"),
        ("123 — 456", "latin"),
    ],
)
def test_script_of_counts_words_per_script(text: str, script: str) -> None:
    assert script_of(text) == script


def two_per_cjk_character(text: str) -> int:
    """A tokenizer that spends 2 tokens on a CJK character and 1 on any other word."""
    cjk = sum(1 for ch in text if script_of(ch) == "cjk")
    return 2 * cjk + (count_words(text) - cjk)


def test_the_rate_is_measured_on_the_sample_of_the_prompts_script() -> None:
    english = measure_rate("Write an essay about rivers.", two_per_cjk_character)
    chinese = measure_rate("写一篇关于河流的文章。", two_per_cjk_character)
    assert (english.script, english.tokens_per_word, english.measured) == ("latin", 1.0, True)
    assert (chinese.script, chinese.tokens_per_word) == ("cjk", 2.0)
    seen: list[str] = []
    measure_rate("Напишите эссе.", lambda text: seen.append(text) or 1)
    assert seen == [SAMPLES["cyrillic"]]


def test_a_long_prompt_that_costs_more_than_the_sample_raises_the_rate() -> None:
    french = " ".join(["les fleuves et les routes font les villes"] * 3)  # 24 words

    def dearer_french(text: str) -> int:
        return count_words(text) * (2 if text == french else 1)

    assert measure_rate(french, dearer_french).tokens_per_word == 2.0
    short = "les fleuves et les routes"  # too few words to be measured
    assert (
        measure_rate(short, lambda t: count_words(t) * (2 if t == short else 1)).tokens_per_word
        == 1.0
    )


def test_a_script_without_a_sample_is_measured_on_the_prompt() -> None:
    korean = "강과 길에 대한 글을 쓰세요"
    assert measure_rate(korean, lambda t: 4 * count_words(t)) == Rate("other", 4.0, True)
    assert conservative_rate(korean) == Rate("other", CONSERVATIVE["other"], False)


def test_an_english_target_gets_the_rounds_it_needs() -> None:
    p = plan((1500, None, None), EN)
    # 1500 words x 1.2 = 1800 tokens, 1.5 times over in rounds of 256
    assert (p.rounds, p.rounds_from, p.tokens, p.room) == (11, "target", 1800, 8142)
    assert p.reachable and p.why is None
    assert p.to_json() == {
        "rounds": 11,
        "rounds_from": "target",
        "words": 1500,
        "script": "latin",
        "tokens_per_word": 1.2,
        "tokens": 1800,
        "room": 8142,
        "reachable": True,
        "why": None,
    }


def test_a_chinese_target_costs_more_tokens_a_word() -> None:
    p = plan((800, None, None), ZH)
    assert (p.rounds, p.tokens) == (12, 1920)  # ceil(1920 x 1.5 / 256)
    assert p.to_json()["script"] == "cjk" and p.reachable


def test_a_small_target_keeps_the_default_rounds() -> None:
    assert plan((150, None, None), EN).rounds == DEFAULT_ROUNDS
    assert plan((None, None, None), None).rounds_from == "default"
    assert plan((None, None, 300), None).rounds == DEFAULT_ROUNDS  # a ceiling is no target


def test_min_words_alone_is_the_length_aimed_at() -> None:
    p = plan((None, 1000, None), EN)
    assert (p.words, p.tokens, p.rounds) == (1000, 1200, 8)


def test_the_window_bounds_the_rounds_and_says_why() -> None:
    p = plan((5000, None, None), ZH, window=Window(8192, 192, 8000))
    assert p.rounds == 47  # what 8000 tokens hold 1.5 times over, not the 71 of 12000
    assert not p.reachable
    assert p.why is not None
    assert "5000 words take about 12000 tokens at 2.40 tokens a word (cjk script" in p.why
    assert "more than the 8000 the 8192-token context window leaves" in p.why
    assert "beside the 192-token prompt" in p.why
    warning = p.warning("sections.s")
    assert warning is not None
    assert warning.startswith("sections.s: a target of 5000 words cannot be reached: ")


def test_an_explicit_max_rounds_wins_and_says_when_it_is_too_few() -> None:
    p = plan((1500, None, None), EN, max_rounds=4)
    assert (p.rounds, p.rounds_from) == (4, "max_rounds")
    assert p.why == (
        "max_rounds 4 x max_tokens 256 = 1024 tokens hold about 853 words at 1.20 tokens a "
        "word (latin script, measured with the model's tokenizer), and 1500 words take about "
        "1800; leave max_rounds unset to plan 11 rounds"
    )
    enough = plan((1500, None, None), EN, max_rounds=8)
    assert (enough.rounds, enough.reachable) == (8, True)
    assert plan((None, None, None), None, max_rounds=2).rounds_from == "max_rounds"


def test_max_words_below_the_target_is_out_of_reach() -> None:
    p = plan((1500, None, 1000), EN)
    assert p.why == "max_words (1000) is below target_words (1500): the section ends by then"
    assert plan((None, 800, 500), EN).why == (
        "max_words (500) is below min_words (800): the section ends by then"
    )


def test_every_reason_is_given() -> None:
    p = plan((5000, None, 1000), ZH, max_rounds=2, window=Window(4096, 96, 4000))
    assert p.why is not None and p.why.count("; ") >= 2
    assert p.why.startswith("max_words (1000)") and "window" in p.why and "max_rounds 2" in p.why


def test_a_conservative_rate_may_not_reach() -> None:
    p = plan((3000, None, None), conservative_rate("Write."), window=Window(4096, 20, 4076))
    warning = p.warning("sections.a")
    assert warning is not None and "may not be reached" in warning
    assert "1.50 tokens a word (latin script, a conservative figure" in warning


def test_text_room_per_strategy() -> None:
    assert text_room(8192, 100, "kv", 256, 256).room == 8092
    # prefix and chat send the text again within window - reserve, then one more round
    assert text_room(8192, 100, "chat", 1024, 256).room == 8192 - 1024 + 256 - 100
    assert text_room(8192, 100, "prefix", 64, 256).room == 8092


def test_after_the_run_a_section_cut_off_short_says_why() -> None:
    p = plan((1500, None, None), EN)
    ran_out = after_run(p, 900, truncated=True, rounds=11, tokens=2816)
    assert not ran_out.reachable
    assert ran_out.why == (
        "it stopped at 900 words when its 11 rounds ran out: its rounds wrote 2816 tokens, "
        "3.13 a word kept, against the 1.20 planned"
    )
    filled = after_run(p, 900, truncated=True, rounds=5, tokens=2000)
    assert filled.why is not None and "when the window filled" in filled.why
    assert after_run(p, 1500, truncated=True, rounds=11, tokens=2000) == p  # it got there
    assert after_run(p, 900, truncated=False, rounds=3, tokens=900) == p  # it finished


def test_max_rounds_unset_and_set_survive_the_settings_merge() -> None:
    yaml = (
        "defaults: {max_rounds: 6}\n"
        "sections:\n"
        "  - {id: a, prompt: A}\n"
        "  - {id: b, prompt: B, max_rounds: 2}\n"
        "  - {id: c, prompt: C, max_rounds: null}\n"
    )
    pipeline = pipeline_from(yaml)
    assert [pipeline.settings_for(s).max_rounds for s in "abc"] == [6, 2, None]
    unset = pipeline_from("sections:\n  - {id: a, prompt: A}\n")
    assert unset.settings_for("a").max_rounds is None
    overridden = pipeline_from("sections:\n  - {id: a, prompt: A}\n", **{"defaults.max_rounds": 3})
    assert overridden.settings_for("a").max_rounds == 3
    per_section = pipeline_from(yaml, **{"sections.a.max_rounds": "null"})
    assert per_section.settings_for("a").max_rounds is None
