from __future__ import annotations

import random
import re
from collections.abc import Iterable

import pytest

from gen.pipeline.run.repetition import LoopDetector, Repetition
from gen.text.quality import CLOSERS, TERMINATORS

PHRASE_LOOP = (
    "The king wanted a faster way to travel. He told his engineers to build something new, "
    + "which would create a chariot with a horse-drawn carriage, " * 5
)
CHINESE_PHRASE_LOOP = (
    "国王想要更快的出行方式。于是他命令工匠们，" + "然后他们又回到了那座古老的城堡，" * 4
)
GREAT_WALL = "\n\n".join(
    [
        "长城是中国古代规模最大的军事防御工程，东起河北的山海关，西至甘肃的嘉峪关，"
        "绵延数千公里。早在春秋战国时期，各诸侯国就开始在边境修筑城墙，"
        "用来抵御北方游牧民族的侵扰。",
        "秦始皇统一六国以后，派大将蒙恬率领数十万人，把原有的城墙连接起来，"
        "形成了万里长城的雏形。汉代继续向西延伸，一直修到今天的新疆一带，"
        "保护着丝绸之路上的商队。",
        "今天我们看到的长城，大多是明朝修建的。明朝的工匠用砖石代替夯土，"
        "在山脊上修建了密集的敌楼和烽火台。一旦发现敌情，守军白天放烟，夜里举火，"
        "消息可以在几个小时内传到京城。",
        "如今，长城已经成为中华民族的象征，每年吸引着成千上万的游客。"
        "人们登上八达岭或慕田峪，一边欣赏壮丽的山景，一边感受历史的厚重。\n",
    ]
)
PROSE = """The printing press reached Venice in 1469, and within a decade the city had more \
presses than any other place in Europe. Printers there were merchants first: they bought \
paper on credit, sold books at the spring fairs, and failed when a large edition did not sell.

Aldus Manutius changed the trade by printing small books that a scholar could carry. His \
italic type saved paper, and his editions of Greek authors were corrected by the best \
readers he could hire. Other printers copied his format within a few years, often badly.

By 1500 the presses of Europe had produced perhaps twenty million volumes. Most were \
religious or legal texts, but almanacs, grammars and news sheets sold steadily, and they \
paid for the larger projects that made a printer's name.
"""

ORDINARY = {
    "markdown list with a repeated lead": """## Options

- **Cost:** Low for small teams, since the free tier covers most needs.
- **Cost:** Moderate once you pass fifty seats and need audit logs.
- **Speed:** Fast on small repositories; slower when the history is deep.
- **Speed:** Acceptable on large monorepos with partial clones enabled.
- **Support:** Community forums only on the free plan.
- **Support:** A named engineer and a four-hour response on enterprise plans.
""",
    "steps": "Step 1: Open the settings page. Step 2: Choose the account tab. "
    "Step 3: Click the export button. Step 4: Wait for the email with the link. "
    "Step 5: Download the archive and check its size.\n",
    "repeated short headings": "".join(
        f"### Example\n\n{body}\n\n"
        for body in (
            "A list of three numbers sorts in place with `sort()`.",
            "A dictionary keeps insertion order since Python 3.7.",
            "A set removes duplicates but forgets the order of items.",
            "### Example",
        )
    ),
    "refrain": """The boats come in at evening, heavy with the catch.
And still the river runs.
The children wait on the jetty, counting sails against the light.
And still the river runs.
The old men mend the nets and talk about the war.
And still the river runs.
And still the river runs.
Nobody remembers who built the first house on the hill.
And still the river runs.
""",
    "table with repeated cells": """| Plan | SSO | Audit log | Export | Support |
|------|-----|-----------|--------|---------|
| Free | No | No | No | No |
| Team | Yes | No | Yes | No |
| Business | Yes | Yes | Yes | No |
| Enterprise | Yes | Yes | Yes | Yes |
| Enterprise Plus | Yes | Yes | Yes | Yes |
| Yes | Yes | Yes | Yes | Yes |
| Yes | Yes | Yes | Yes | Yes |
| Yes | Yes | Yes | Yes | Yes |
| Yes | Yes | Yes | Yes | Yes |
| Yes | Yes | Yes | Yes | Yes |
""",
    "numbered outline": """1. Introduction
   1.1 Scope of the report
   1.2 Sources and methods
2. Background
   2.1 Early presses
   2.2 The spread of printing
3. Findings
   3.1 Prices
   3.2 Readers
4. Conclusion
""",
    "chinese prose": GREAT_WALL,
    "code block": """Here is the loop:

```python
total = 0
for value in values:
    total = total + compute_the_weight(value, scale, offset)
    total = total + compute_the_weight(value, scale, offset)
    total = total + compute_the_weight(value, scale, offset)
grid = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
```

```python
total = total + compute_the_weight(value, scale, offset)
```
""",
    "english prose with emoji": PROSE.replace("1469,", "1469 🎉,") + "Thanks 🙏🙏🙏🙏!\n",
    "song with a short chorus": "Let it be, let it be, let it be, let it be. "
    "Whisper words of wisdom in the dark. Let it be, let it be, let it be.\n",
}


def feed(text: str, sizes: Iterable[int], base: str = "") -> tuple[LoopDetector, Repetition | None]:
    detector, found, at = LoopDetector(base), None, 0
    for size in sizes:
        result = detector.feed(text[at : at + size])
        at += size
        if result is not None:
            assert found is None, "reported twice"
            found = result
    detector.feed(text[at:])
    assert detector.text == base + text
    return detector, found


def detect(text: str, base: str = "", size: int = 5) -> Repetition:
    detector, found = feed(text, [size] * (len(text) // size + 1), base)
    assert found is not None
    assert_sound(detector, found, len(base))
    return found


def assert_sound(detector: LoopDetector, found: Repetition, base_len: int) -> None:
    text = detector.text
    assert base_len <= found.keep <= found.start < len(text)
    head = text[: found.keep]
    line_end = re.match(r"[^\S\n]*\n", text[found.keep :]) is not None
    assert found.keep in (0, base_len) or head.rstrip(CLOSERS)[-1:] in TERMINATORS or line_end
    assert len(found.detail) <= 120


def test_phrase_loop_starts_at_its_second_copy() -> None:
    found = detect(PHRASE_LOOP)
    first = PHRASE_LOOP.index("which")
    second = PHRASE_LOOP.index("which", first + 1)
    assert (found.kind, found.start) == ("span", second)
    assert found.keep == PHRASE_LOOP.index("travel.") + len("travel.")
    assert "which would create a chariot" in found.detail


def test_chinese_phrase_loop() -> None:
    found = detect(CHINESE_PHRASE_LOOP)
    first = CHINESE_PHRASE_LOOP.index("然后")
    assert found == Repetition(
        "span",
        CHINESE_PHRASE_LOOP.index("然后", first + 1),
        CHINESE_PHRASE_LOOP.index("。") + 1,
        found.detail,
    )


def test_long_span_twice_is_a_loop() -> None:
    clause = (
        "the committee agreed that the budget for the new library on the hill would be "
        "reviewed again by the council next spring "
    )
    text = "In March, " + clause + "and " + clause + "and then they went home."
    found = detect(text)
    assert found.kind == "span"
    assert found.start == text.index("the committee", 20)
    assert found.keep == 0


def test_span_of_eight_twice_is_not_a_loop() -> None:
    text = "He said it twice: we will meet again at the old bridge, we will meet again "
    text += "at the old bridge. Then he left without another word.\n"
    assert feed(text, [4] * len(text))[1] is None


@pytest.mark.parametrize(
    ("text", "period"),
    [
        ("It was a very " + "very " * 30 + "good day.", 1),
        ("他笑了起来。" + "哈" * 40, 1),
        ("这是我的的" + "的" * 30, 1),
        ("And then " + "on and " * 20, 2),
        ("Numbers: " + "one two three four five six seven, " * 5, 7),
    ],
)
def test_short_period_loops(text: str, period: int) -> None:
    found = detect(text)
    assert found.kind == "span"
    assert found.detail.startswith(f"{period}-token span")


def test_repeated_sentence() -> None:
    text = (
        "The wall is long. It was built over many centuries by workers. Then it rained. "
        "It was built over many centuries, by workers! And more."
    )
    found = detect(text)
    start = text.index("It was built", 30)
    assert found == Repetition("sentence", start, start - 1, found.detail)
    assert (
        found.detail == "repeats an earlier sentence: It was built over many centuries, by workers!"
    )


def test_repeated_chinese_sentence() -> None:
    cut = GREAT_WALL.index("明朝的工匠")
    text = (
        GREAT_WALL[:cut]
        + "早在春秋战国时期，各诸侯国就开始在边境修筑城墙，用来抵御北方游牧民族的侵扰。后来"
    )
    found = detect(text)
    assert (found.kind, found.start, found.keep) == ("sentence", cut, cut)


def test_short_sentences_may_repeat() -> None:
    text = "It works. Try again. It works. It works well. Try again.\n" * 2
    assert feed(text, [3] * len(text))[1] is None


@pytest.mark.parametrize(
    "text",
    [
        # one sentence, so no refrain: item 1 is ready and ..., item 2 is ready and ..., ...
        ", ".join(f"item {i} is ready and the system keeps going on and on" for i in range(40)),
        "".join(f"第{i}天我们继续沿着长城向前走去。" for i in range(1, 40)),
    ],
)
def test_collapse(text: str) -> None:
    found = detect(text)
    assert found.kind == "collapse"
    assert found.detail.startswith(("distinct 4-grams 0.", "only "))
    assert found.start < len(text) / 2


def test_a_collapse_across_rounds_is_caught() -> None:
    """A retry's short rounds each add a few words of the same loop: the window reaches
    back into the text before the round, so the loop is found once the fed words go on
    with it (the second case is what a 5,000-word recipe part did, 30 words a round)."""
    base = ", ".join(f"item {i} is ready and the system keeps going on and on" for i in range(11))
    text = ", " + ", ".join(
        f"item {i} is ready and the system keeps going on and on" for i in range(11, 18)
    )  # fewer than 100 fed tokens
    found = feed(text, [6] * len(text), base)[1]
    assert found is not None and found.kind == "collapse"
    assert found.start >= len(base)  # nothing before the round is cut
    lines = ["LighthouseBuilding", "BridgeLighthouse", "LighthouseBuilding", "LighthouseBuilding"]
    base = "Lighthouses guided ships for centuries.\n\n" + "\n".join(lines * 30)
    found = feed("\n" + "\n".join(lines * 5), [9] * 200, base)[1]
    assert found is not None and found.start >= len(base)


def test_sound_text_after_a_loop_the_round_cannot_cut_passes() -> None:
    base = ", ".join(f"item {i} is ready and the system keeps going on and on" for i in range(11))
    fresh = ". Bakers in Lyon rose before dawn to knead dough, while millers hauled flour"
    fresh += " from barges moored along the Saône and carters argued over tolls."
    assert feed(fresh, [5] * len(fresh), base)[1] is None


LOOPS = [PHRASE_LOOP, CHINESE_PHRASE_LOOP, "Intro. " + "very " * 30, PROSE[:300] + PROSE[:300]]


@pytest.mark.parametrize("text", LOOPS)
def test_same_detection_whatever_the_split(text: str) -> None:
    _, whole = feed(text, [len(text)])
    assert whole is not None
    _, by_char = feed(text, [1] * len(text))
    assert by_char == whole
    rng = random.Random(len(text))
    for _ in range(20):
        assert feed(text, [rng.randint(1, 12) for _ in text])[1] == whole


def test_same_detection_at_every_split_point() -> None:
    for text in (PHRASE_LOOP, CHINESE_PHRASE_LOOP + "好的。"):
        _, whole = feed(text, [len(text)])
        assert whole is not None
        for cut in range(len(text) + 1):
            assert feed(text, [cut, len(text)])[1] == whole


def test_repeat_of_a_base_sentence_is_caught() -> None:
    base = PROSE
    text = "\nA new paragraph starts here. By 1500 the presses of Europe had produced perhaps "
    text += "twenty million volumes. And then"
    found = detect(text, base)
    start = len(base) + text.index("By 1500")
    assert found == Repetition("sentence", start, start - 1, found.detail)


def test_loop_inside_base_is_not_reported() -> None:
    base = (
        "Intro. "
        + "very " * 40
        + "\n"
        + PROSE
        + PROSE
        + " ".join(f"Item {i} is ready and the system keeps going on and on." for i in range(20))
    )
    text = ORDINARY["steps"] + GREAT_WALL
    assert feed(text, [7] * len(text), base + "\n\n")[1] is None
    assert feed(" Fine.", [1] * 6, base.rstrip())[1] is None


def test_loop_continuing_from_base_is_cut_at_the_base() -> None:
    base = "Intro here. " + "which would create a chariot with a horse-drawn carriage, " * 3
    found = detect("which would create a chariot", base)
    assert (found.kind, found.start, found.keep) == ("span", len(base), len(base))


def test_reports_once() -> None:
    detector = LoopDetector()
    results = [detector.feed(piece) for piece in ["Intro. ", "very " * 30, "very " * 30, PROSE]]
    assert [result is not None for result in results] == [False, True, False, False]
    assert detector.text.endswith(PROSE)


@pytest.mark.parametrize("name", sorted(ORDINARY))
def test_ordinary_text_passes(name: str) -> None:
    text = ORDINARY[name]
    assert feed(text, [7] * len(text))[1] is None
    assert feed(text, [1] * len(text))[1] is None


def test_ordinary_texts_together_pass() -> None:
    text = "\n\n".join(ORDINARY.values())
    assert feed(text, [9] * len(text))[1] is None


def test_long_texts_return() -> None:
    looping = "The committee met again to discuss the same budget item, and " * 420  # ~5,000 words
    _, found = feed(looping, [5] * len(looping))
    assert found is not None and found.kind == "span"
    rng = random.Random(3)
    vocabulary = [
        a + b for a in ("ka", "lo", "mi", "ne", "su", "ta", "vi", "ro") for b in "aeiou" * 8
    ]
    words = [rng.choice(vocabulary) + str(i % 97) for i in range(5000)]
    ordinary = " ".join(w + ("." if i % 13 == 12 else "") for i, w in enumerate(words))
    assert feed(ordinary, [6] * len(ordinary))[1] is None


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"min_span_tokens": 0}, "min_span_tokens"),
        ({"min_span_tokens": 30}, "min_span_tokens"),
        ({"window_tokens": 30}, "window_tokens"),
        ({"collapse_tokens": 4}, "collapse_tokens"),
        ({"collapse_distinct": 0.0}, "collapse_distinct"),
    ],
)
def test_invalid_settings(settings: dict[str, int | float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LoopDetector(**settings)  # type: ignore[arg-type]


def test_refrain_of_sentences_opening_alike() -> None:
    text = (
        "Signals guide trains. The universe is infinite. The universe is time. "
        "The universe is matter and light. The universe is nothing at all. "
        "The universe is everywhere around us. More text."
    )
    d = LoopDetector()
    found = next(f for f in (d.feed(text[i : i + 3]) for i in range(0, len(text), 3)) if f)
    assert found.kind == "refrain"
    assert text[: found.keep] == "Signals guide trains. The universe is infinite."


def test_a_few_sentences_opening_alike_pass() -> None:
    text = (
        "The line opened in 1830. The line ran to Manchester. Trains were slow. "
        "The line carried cotton. Engines improved. The line was doubled in 1840. 😀"
    )
    d = LoopDetector()
    assert all(d.feed(text[i : i + 5]) is None for i in range(0, len(text), 5))


def feed_in_pieces(text: str, size: int = 4) -> Repetition | None:
    d = LoopDetector()
    found = (d.feed(text[i : i + size]) for i in range(0, len(text), size))
    return next((f for f in found if f), None)


def test_refrain_of_sentences_opening_with_one_subject() -> None:
    # what the bundled model wrote 1,000 words into a sourdough article
    text = (
        "Bakers keep a starter alive for years.\n\n"
        "Sulfite can be found in bread that is baked with the yeast.\n\n"
        "Sulfite enhances the flavor of baked goods made by yeast.\n\n"
        "Sulfite helps to make baked goods that are made with flour.\n\n"
        "Sulfite adds to bread baked in a oven.\n\n"
        "Sulfite creates a high quality bread.\n\n"
        "Sulfite provides a way to change the flavor of bread.\n\n"
        "Sulfite gives bread that gives bread.\n\n"
    )
    found = feed_in_pieces(text)
    assert found is not None and found.kind == "refrain"
    assert "sulfite" in found.detail
    assert text[: found.keep] == (
        "Bakers keep a starter alive for years.\n\n"
        "Sulfite can be found in bread that is baked with the yeast."
    )


def test_refrain_ignores_a_determiner_before_its_lead() -> None:
    text = (
        "Bread rises. The science of bread is old. This science of baking is new. "
        "The science of flour is simple. This science of bread makes bread. "
        "The science of yeast is a science. More."
    )
    found = feed_in_pieces(text)
    assert found is not None and found.kind == "refrain"
    assert found.detail.endswith("science of")


def test_prose_about_one_subject_passes() -> None:
    # a subject named at the start of several sentences, but not of nearly all of them
    text = (
        "Sourdough needs only flour, water and salt. The starter does the rest. "
        "Sourdough rises slowly, over a night in a cool kitchen. Bakers fold it by hand. "
        "Sourdough keeps for days because its acids slow the mould. It tastes sour. "
        "Sourdough was the bread of the gold rush 🍞. Miners carried starters in pouches. "
        "It travelled with them. 它很好吃。他们每天都吃。我们很喜欢。他们去买。"
        "你们回家。他们做饭。\n"
    )
    assert feed_in_pieces(text) is None


def test_one_word_crowding_out_the_rest() -> None:
    # what the bundled model wrote 1,500 words into an article on sourdough
    names = re.findall(
        r"\w+",
        "grace mercy glory truth name throne hand heart kingdom law love joy power wrath hope "
        "peace light word will plan gift voice face eyes wisdom strength patience favour time "
        "house people city temple promise spirit breath fire rest path song image",
    )
    text = PROSE + "This is the end of it. " + ", ".join(f"God's {n}" for n in names) + "."
    found = feed_in_pieces(text, 5)
    assert found is not None and found.kind == "word"
    assert found.detail.startswith("“god's” is ")
    assert text[: found.keep] == PROSE + "This is the end of it."


def test_a_refrain_that_opens_with_this_is() -> None:
    text = "Bread rises. " + " ".join(
        f"This is {what} of baking." for what in ("a science", "the art", "God's gift", "how",
                                                  "the end", "all")
    )  # fmt: skip
    found = feed_in_pieces(text)
    assert found is not None and found.kind == "refrain"
    assert found.detail.endswith("this is")


def test_a_stutter_of_few_words_is_caught() -> None:
    # the end of a 500-word article by the bundled model: no sentence long enough to count
    # as a repeat, no 4-gram collapse, but a handful of words going round
    stutter = (
        "Cities began to evolve. Cities began to evolve into self-sustaining cities. The way "
        "cities were designed had begun to change. In this new era, cities became "
        "self-sustaining cities. The city itself grew. Cities grew. Cities grew, humans "
        "started to live in cities and grew, cities grew, cities grew. This was a great "
        "transformation. Cities became self-sustaining cities, and cities became "
        "self-sustaining homes. This was a new era. This was a new era of human habitation, "
        "and this era became a new era of self-sustenance. This was a new era, and this new "
        "era became a new new era."
    )
    found = feed_in_pieces(PROSE + stutter, 7)
    assert found is not None and found.kind == "collapse"
    assert found.detail.startswith("only ")
    assert found.start > len(PROSE)  # the prose before it is kept


@pytest.mark.parametrize(
    ("again", "restarts"),
    [
        # what a `more` round of the bundled model wrote after 330 words
        ("In the early days of human settlement, human settlements were designed to adapt.", True),
        ("Cities were designed to be adaptable and versatile, early in human history.", True),
        ("Bicycles arrived in the 1880s and changed how workers reached the factories.", False),
    ],
)
def test_a_round_asked_to_go_on_that_starts_over(again: str, restarts: bool) -> None:
    base = (
        "In the early days of urban planning, human settlements were designed to be "
        "adaptable and versatile. Cities grew along rivers and roads 🚲.\n\n"
    )
    d = LoopDetector(base, restart=True)
    text = again + " Then more text follows here."
    found = next((f for f in (d.feed(text[i : i + 6]) for i in range(0, len(text), 6)) if f), None)
    if restarts:
        assert found is not None and found.kind == "restart"
        assert (found.start, found.keep) == (len(base), len(base))
    else:
        assert found is None
    # without restart=True the same text is no loop
    plain = LoopDetector(base)
    assert all(plain.feed(text[i : i + 6]) is None for i in range(0, len(text), 6))


def test_a_line_said_again_and_again_is_cut_with_every_copy() -> None:
    """What a 5,000-word recipe part wrote: one-word lines, each too short to count as a
    sentence and each released as soon as it ended; the third copy ends the round, and a
    fragment (no sentence end) goes with its first copy too."""
    intro = "灯塔守护着船只。The first lighthouse was built in 1825.\n"
    for lines in (["Lighthouse"] * 3, ["Lighthouse Light"] * 2 + ["lighthouse light"],
                  ["ประภาคาร 🗼"] * 3, ["灯塔"] * 3):  # fmt: skip
        text = intro + "\n".join(lines) + "\nThe end."
        found = detect(text, size=3)
        assert (found.kind, found.start, found.keep) == ("span", len(intro), len(intro) - 1)
        assert found.detail.startswith("3 copies back to back of: ")


def test_a_short_sentence_three_times_keeps_its_first_copy() -> None:
    text = "Ships came. It was late. It was late. It was late. Nobody slept."
    found = detect(text, size=4)
    second = text.index("It was late", text.index("It was late") + 1)
    assert (found.kind, found.start, found.keep) == ("span", second, second - 1)


def test_a_pair_of_lines_three_times_is_a_loop_twice_is_not() -> None:
    pair = "Lighthouse Light\nLighthouse\n"
    assert feed("Intro.\n" + pair * 2 + "Then the keepers left.\n", [5] * 20)[1] is None
    found = detect("Intro.\n" + pair * 3 + "Then")
    assert (found.kind, found.start) == ("span", len("Intro.\n"))
    assert found.detail.startswith("3 copies back to back of: Lighthouse Light Lighthouse")


def test_lines_repeated_in_base_are_cut_no_further_back_than_the_floor() -> None:
    base = "Intro.\n" + "Lighthouse\n" * 4
    found = detect("Lighthouse\nMore text here.", base)
    assert (found.kind, found.start, found.keep) == ("span", len(base), len(base))


def test_a_model_counting_is_cut_at_its_first_number() -> None:
    """A recipe part wrote "11, nder 2, 12, 3, 4, 13, 5, ... 491,": every word new, so no
    span, sentence or collapse check saw it, and its 491 "words" met the part's target."""
    intro = "灯塔的历史很长。 Keepers counted ships 🚢 each night.\n\n"
    text = intro + "11, nder " + ", ".join(str(i) for i in range(2, 40)) + ","
    found = detect(text, size=4)
    assert found.kind == "count"
    assert (found.start, found.keep) == (text.index("2, 3"), len(intro.rstrip()))
    assert found.detail == "16 numbers in a row: 2, 3, 4, 5, …"


def test_numbers_in_prose_pass() -> None:
    text = (
        "The lamps were lit in 1819, 1820, 1822, 1825 and 1827, then every year from 1830 to "
        "1850. Of 12 keepers, 3 stayed; 4, 5 or 6 left each winter.\n"
    )
    assert feed(text, [3] * len(text))[1] is None


def test_a_run_on_word_is_cut_while_it_is_still_being_written() -> None:
    for word in ("light" * 20, "1." + "1150359092" * 10):
        text = "ประภาคาร 🗼 stands. Then " + word
        found = feed(text, [5] * (len(text) // 5 + 1))[1]
        assert found is not None and found.kind == "word"
        assert found.start == text.index(word[:5], 20)
        assert found.detail.startswith("a run-on word: ")
    # a link that never ends (the zh-800 bench section wrote one for ten rounds)
    text = "丝绸之路。\nhttp://www.baidu.net/baidu_" + "z_w_r_" * 40
    found = feed(text, [7] * (len(text) // 7 + 1))[1]
    assert found is not None and found.kind == "word" and found.start == text.index("http")
    # a link, and a Thai sentence (one whitespace-free run), are not run-on words
    for text in ("See https://example.org/" + "a" * 60 + "/page.html for more.",
                 "ประภาคารเป็นสิ่งก่อสร้างที่ช่วยนำทางเรือในเวลากลางคืนมาหลายร้อยปีแล้ว"):  # fmt: skip
        assert feed(text, [4] * len(text))[1] is None


STEPS = ["Variables", "Functions", "Closures", "Optionals", "Structs", "Classes", "Protocols"]


def test_a_refrain_of_headings_is_cut_at_its_last() -> None:
    text = "".join(
        f"### Step {i}: Learn to Use {topic}\n\n{topic} 用法很多, each with its place.\n\n"
        for i, topic in enumerate(STEPS, 1)
    )
    found = feed_in_pieces(text, 5)
    assert found is not None and found.kind == "refrain" and found.words == ("step",)
    assert text[found.start :].startswith("Step 5: Learn to Use Structs")
    assert text[: found.keep].endswith("Optionals 用法很多, each with its place.")


def test_numbered_headings_of_a_plan_pass() -> None:
    said = [
        "You practise the syntax 🙂 and write notes.",
        "Two small apps show how functions are passed around.",
        "Closures capture values; a network call shows why.",
        "Optionals make a missing value explicit in tests.",
        "Structs are copied, which a release build makes fast.",
        "Classes are shared, and a review finds the cycles.",
    ]
    text = "".join(
        f"## Week {i}: {topic}\n\n{said[i - 1]}\n\n" for i, topic in enumerate(STEPS[:6], 1)
    )
    assert feed_in_pieces(text, 5) is None


def chinese_of(alphabet: str, chars: int, seed: int) -> str:
    """Sentences of ten characters drawn from `alphabet`, none said twice."""
    rng = random.Random(seed)
    return "".join("".join(rng.choices(alphabet, k=10)) + "。" for _ in range(chars // 10))


def test_chinese_counts_its_characters_against_a_lower_share() -> None:
    """A CJK character is a token: a hundred of them keep fewer distinct than a hundred
    English words, so 35 distinct in 100 is Chinese prose, not a collapse; 20 is."""
    rich = chinese_of(
        "外婆的厨房里摆着碗筷锅灶米面油盐酱醋茶柴火香味道暖人心我们小时候常去那", 300, 3
    )
    assert len(set(rich[-110:]) - {"。"}) >= 30
    assert feed(rich, [5] * (len(rich) // 5 + 1))[1] is None
    poor = chinese_of("外婆的厨房里碗筷锅灶米面油盐酱醋茶柴火", 300, 3)
    found = detect(poor)
    assert found.kind == "collapse" and "distinct words" in found.detail
