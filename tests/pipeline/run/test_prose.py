"""`format: prose`: plain paragraphs held token by token, so a part cannot start a list or
a heading of its own; a guard on a local engine, not asked of a remote server, and a
prose section that ends short is still written on."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gen.pipeline.run.prose import PROSE_REGEX
from tests.pipeline.fake_backend import FakeBackend, pipeline_from, run

PROSE = re.compile(PROSE_REGEX)
GOOD = [
    "The light shone in the 1990s.\n\nIt still does.",
    "1990 was a year of storms.\nThe keepers stayed.",
    "2021年，灯塔熄灭了。\n\n12 ships passed.",
    "Ships: 1.5 million passed. 3) is not at a line's start.",
    "2021, the year the lamp 💡 went out.\nOf glass, 3.14 metres.",
    "“Quoted” words.\n\n",
    "灯塔的历史很长。\n\nประภาคาร 🗼 stands.",
    "(Most) keepers stayed!\n¿Qué pasó?\n「灯塔」很高。",
    "Élan, naïveté and 12.5% of ships — all there…",
]
BAD = [
    "1. The first part",
    "1.The history of lighthouses",  # seen in the long-article recipe's prose parts
    "Text.\n\n1.2.1 History of the First Lighthouses",
    "Text.\n\n3.Item",
    "1.115035909211151700780571863227",  # a model held to "1.<digit>" wrote digits for ever
    "123456 is too long a number to start a line",
    "1-1. The history of lighthouses:",  # and the way round "1." it found next
    "1 The history of lighthouses",
    "1、灯塔的历史",
    "Text.\n\n2) Two",
    "## PREFACE",
    "Text.\n# This is a complete document",
    "- an item",
    "* an item",
    "• an item",
    " indented",
    "> quoted",
    "| a | table |",
    "```code",
    "Text.\n\n\n\nToo far apart.",
    # lines that do not end as a sentence does: a recipe part wrote these, then looped
    "Lighthouse\nLighthouse Light\nLighthouse.",
    "1000 words\n\nThe first lighthouse stood in 1825.",
    "Summary of write:\nLighthouses are tall.",
    "灯塔的历史\n灯塔很高。",
    "The history of lighthouses\n\nThey guided ships.",
    # symbols: a conclusion that began "<<Introduction" wrote "<<<<====" for three rounds
    "<<Introduction to the history.",
    "Text with <<<< symbols.",
    "Prices = high.",
    "A **bold** claim.",
    "🗼 A lighthouse emoji first.",
    "…and so on.",
]
UNFINISHED = ["It still does", "灯塔很高", "Ships passed.\n\nThen the lamp", '"Stop," he said']


@pytest.mark.parametrize("text", GOOD)
def test_paragraphs_are_prose(text: str) -> None:
    assert PROSE.fullmatch(text)


@pytest.mark.parametrize("text", BAD)
def test_lists_headings_and_blocks_are_not(text: str) -> None:
    assert not PROSE.fullmatch(text)


def test_llguidance_holds_the_same_pattern_over_real_tokens() -> None:
    from gen.engine.grammar import Grammars
    from gen.models.loader import load_tokenizer
    from gen.models.store import prepare, resolve
    from gen.sampling import Constraint

    tokenizer: Any = load_tokenizer(prepare(resolve("smollm2-135m")))
    grammars = Grammars(tokenizer, len(tokenizer))

    def follows(text: str) -> bool:
        matcher = grammars.state(Constraint("regex", PROSE_REGEX)).matcher
        ids = tokenizer.encode(text, add_special_tokens=False)
        return bool(matcher.consume_tokens(ids)) and not matcher.is_error()

    assert all(follows(text) for text in GOOD)
    assert not any(follows(text) for text in BAD)

    def ends(text: str) -> bool:
        matcher = grammars.state(Constraint("regex", PROSE_REGEX)).matcher
        assert matcher.consume_tokens(tokenizer.encode(text, add_special_tokens=False))
        return bool(matcher.is_accepting())

    assert all(ends(text) for text in GOOD)
    assert not any(ends(text) for text in UNFINISHED)  # only at a sentence's end


@pytest.mark.parametrize("text", UNFINISHED)
def test_prose_ends_only_at_a_sentence_end(text: str) -> None:
    assert not PROSE.fullmatch(text)
    assert PROSE.fullmatch(text + ".")


YAML = """\
name: t
model: fake
sections:
  - id: body
    prompt: "[body] Write about tea."
    format: prose
    target_words: 12
    continuation: {strategy}
"""


def test_a_local_engine_gets_the_pattern_and_a_short_end_is_written_on(tmp_path: Path) -> None:
    replies = [("泡茶 tea is steeped.", "stop"), ("\n\nIt cools in cups of 🍵 and more.", "stop")]
    backend = FakeBackend({"body": replies})  # type: ignore[dict-item]
    backend.supports_grammar = True
    manifest, _ = run(pipeline_from(YAML.format(strategy="prefix")), backend, tmp_path)
    calls = backend.calls_for("body")
    assert len(calls) == 2  # ended short of 12 words: written on, not left short
    first, second = (c.params.constraint for c in calls)
    assert first is not None and (first.kind, first.text) == ("regex", PROSE_REGEX)
    assert first.prefix == ""
    assert second is not None and second.prefix.startswith("泡茶 tea is steeped.")
    assert manifest["sections"][0]["words"] >= 10


def test_a_remote_server_is_not_asked(tmp_path: Path) -> None:
    backend = FakeBackend({"body": [("Tea is steeped and then it cools in cups of tea.", "stop")]})
    run(pipeline_from(YAML.format(strategy="chat")), backend, tmp_path)
    assert all(c.params.constraint is None for c in backend.calls)
