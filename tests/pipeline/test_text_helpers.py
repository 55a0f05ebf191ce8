from __future__ import annotations

import pytest

from gen.pipeline import DependencyCycle, count_words, length_score, parse_list
from gen.pipeline.graph import find_cycle


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", 0),
        ("Hello, world!", 2),
        ("state-of-the-art isn't — hard", 3),
        ("印刷术改变了世界。", 8),
        ("Gutenberg 发明了 printing press", 6),
        ("ひらがな カタカナ", 8),
        ("1. 2. 3.", 3),
        ("— … !!", 0),
    ],
)
def test_count_words(text: str, words: int) -> None:
    assert count_words(text) == words


def test_length_score() -> None:
    assert length_score(400, 400) == 100
    assert length_score(400, 0) == 0
    assert length_score(100, 200) == pytest.approx(100 * (1 - 1 / 3))
    assert length_score(100, 50) == pytest.approx(50.0)
    assert length_score(100, 1000) == 0
    with pytest.raises(ValueError, match="target must be > 0, got 0"):
        length_score(0, 10)


@pytest.mark.parametrize(
    ("text", "items"),
    [
        ("1. Intro\n2. Body\n3. End", ["Intro", "Body", "End"]),
        ("Outline:\n- **Intro**\n  - detail\n- Body:\n", ["Intro", "Body"]),
        ("一、起源\n二、发展", ["起源", "发展"]),
        ("1) a\n(2) b\n3、c", ["a", "b", "c"]),
        ("Just a line\n\nAnother line\n", ["Just a line", "Another line"]),
        ("", []),
    ],
)
def test_parse_list(text: str, items: list[str]) -> None:
    assert parse_list(text) == items


def test_cycles_are_named() -> None:
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["b"]}) == ["b", "c", "b"]
    assert find_cycle({"a": ["a"]}) == ["a", "a"]
    assert find_cycle({"a": ["b"], "b": []}) is None
    assert str(DependencyCycle(["a", "a"])) == "dependency cycle: a -> a"


def test_parse_list_takes_a_plural_for_the_same_item() -> None:
    from gen.text.listparse import parse_list

    text = "1. Building lighthouses\n2. Building lighthouse\n3. 灯塔的建造\n4. Glass lenses\n"
    assert parse_list(text) == ["Building lighthouses", "灯塔的建造", "Glass lenses"]
    assert parse_list("- Class\n- Glass\n- Gas\n") == ["Class", "Glass", "Gas"]  # -ss stays
    # -es after s, x, ch, sh: "processes" is the plural of "process"
    text = "- Water treatment process\n- Water treatment processes\n- Boxes\n- Box\n"
    assert parse_list(text) == ["Water treatment process", "Boxes"]


def test_parse_list_drops_each_items_own_number_said_again() -> None:
    from gen.text.listparse import parse_list

    text = "1. How bicycles work: 1\n2. Gears and chains: 2\n3. 自行车的历史（3）\n"
    assert parse_list(text) == ["How bicycles work", "Gears and chains", "自行车的历史"]
    kept = ["Part 1", "Part 2"]  # a title with a number in it, no echo
    assert parse_list("1. Part 1\n2. Part 2\n") == kept
    mixed = ["Top tips: 10", "Tides: 2"]  # not every item ends in its own number
    assert parse_list("- Top tips: 10\n- Tides: 2\n") == mixed
    assert parse_list("1. Rules: 1\n") == ["Rules: 1"]  # one item says nothing


def test_parse_list_drops_a_twin_with_one_word_misspelt() -> None:
    text = (
        "1. Building lighthouses\n2. Building lighthairs\n3. Lighthouses in Europe\n"
        "4. Lighthouses in Asia\n5. First lights\n6. Fifth lights\n7. Lighthairs\n"
    )
    # one word begun the same and ended otherwise is the model misspelling an item; other
    # one-word differences (Europe / Asia, First / Fifth) are other items, and so is a title
    # of one word
    assert parse_list(text) == [
        "Building lighthouses",
        "Lighthouses in Europe",
        "Lighthouses in Asia",
        "First lights",
        "Fifth lights",
        "Lighthairs",
    ]


def test_parse_list_excludes_twins_of_the_titles_the_pipeline_writes() -> None:
    text = "1. The history of lighthairs\n2. Lighthouse keepers\n3. Conclusions\n"
    assert parse_list(text, ["The history of lighthouses", "Conclusion"]) == ["Lighthouse keepers"]
