"""Where a section with a length target ends: a paragraph break past the target, a
sentence end a little later, and never past the ceiling (about 1.3x the target)."""

from __future__ import annotations

from gen.pipeline.run.continuation import LengthPolicy
from gen.text.words import count_words, length_score


def words(n: int, word: str = "word") -> str:
    return " ".join([word] * n)


def feed(policy: LengthPolicy, text: str, size: int = 5) -> tuple[str, int | None]:
    """Stream text in pieces, as a section does; returns the text kept and where it ended."""
    for i in range(size, len(text) + size, size):
        end = policy.end(text[:i], 0)
        if end is not None:
            return text[:end], end
    return text, None


def test_short_of_the_target_it_goes_on() -> None:
    policy = LengthPolicy(100, None, None)
    assert policy.short(words(99)) and not policy.short(words(100))
    assert feed(policy, words(99) + ".\n\n" + words(5))[1] is None


def test_past_the_target_it_ends_at_the_next_paragraph_break() -> None:
    text = words(95) + ". " + words(10) + ".\n\nNext paragraph starts here."
    kept, end = feed(LengthPolicy(100, None, None), text)
    assert end is not None and kept == words(95) + ". " + words(10) + "."


def test_without_a_paragraph_break_it_ends_at_a_sentence_soon_after() -> None:
    sentences = " ".join(f"Sentence {i} has five words." for i in range(40))  # 200 words
    kept, end = feed(LengthPolicy(100, None, None), sentences)
    assert end is not None and kept.endswith("words.")
    assert 110 <= count_words(kept) <= 115  # the first sentence end past 1.1x the target
    kept, _ = feed(LengthPolicy(100, None, None), sentences, size=1000)  # one big piece
    assert 110 <= count_words(kept) <= 115


def test_at_the_ceiling_it_cuts_after_the_last_full_sentence() -> None:
    text = words(100) + ". " + words(50) + ". " + words(50)
    kept, _ = feed(LengthPolicy(100, None, None), text)  # 150 > the ceiling of 130
    assert kept == words(100) + "."
    assert length_score(100, count_words(kept)) >= 90
    kept, _ = feed(LengthPolicy(100, None, 200), text)  # max_words sets the ceiling
    assert kept == words(100) + ". " + words(50) + "."


def test_a_run_on_text_past_what_is_final_is_cut_at_the_ceiling() -> None:
    text = words(60) + ". " + words(200)  # no sentence end after word 60
    assert LengthPolicy(100, None, None).end(text, len(words(60))) == len(words(60)) + 1
    final = len(words(80))  # shown already: the cut can only come later, mid-text
    end = LengthPolicy(100, None, None).end(text, final)
    assert end is not None and count_words(text[:end]) == 130


def test_what_is_final_is_never_cut() -> None:
    text = words(150)
    assert LengthPolicy(100, None, None).end(text, len(text)) == len(text)


def test_chinese_counts_characters_and_ends_at_a_full_stop() -> None:
    text = "长城很长。" * 30  # 4 characters a sentence, 120 in all
    kept, end = feed(LengthPolicy(50, None, None), text, size=3)
    assert end is not None and kept.endswith("。")
    assert 55 <= count_words(kept) <= 60


def test_word_counts_stay_right_as_text_grows_and_is_trimmed() -> None:
    policy = LengthPolicy(10, None, None)
    text = "one two three four five six seven"
    assert policy.words(text) == 7
    assert policy.words(text + " eight nine") == 9
    assert policy.words("one two") == 2  # trimmed: counted afresh
    assert policy.words("一二三 four") == 4


def test_a_line_break_inside_wrapped_prose_ends_no_sentence() -> None:
    """A model that wraps its lines (as the sources it was shown are wrapped) is cut at a
    sentence's end, not where a line happens to break; a list item still ends at its line."""
    wrapped = "\n".join(words(8) for _ in range(15)) + "."  # one sentence of 120 words
    for size in (5, 1000):  # streamed, and in one piece
        kept, end = feed(LengthPolicy(100, None, None), wrapped + " 然后 more after.", size)
        assert end is not None and kept == wrapped
    items = "\n".join(f"- item {i} of a list with six words" for i in range(30))
    kept, end = feed(LengthPolicy(100, None, None), items)
    assert end is not None and kept.endswith("six words") and kept.count("\n- ") < 29
