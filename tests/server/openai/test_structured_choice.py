"""structured_outputs.choice: the answer is exactly one of the strings, whatever they hold
(Lark's and regular expressions' own characters, newlines, Thai, emoji), and a long list
stays one lexeme instead of a parser row per choice."""

from __future__ import annotations

from typing import Any

import pytest

from gen.engine.grammar import Grammars
from gen.models.loader import load_tokenizer
from gen.models.store import prepare, resolve
from gen.server.openai.requests import StructuredOutputs

CHOICES = ["a/b", "(ok)", "x\ny", "ก.ข", "-", "\\", " ", "50%+$", "是", "🍵 tea", "[x]{2}", "a|b"]


@pytest.fixture(scope="module")
def grammars() -> Grammars:
    tokenizer: Any = load_tokenizer(prepare(resolve("smollm2-135m")))
    return Grammars(tokenizer, len(tokenizer))


def follows(grammars: Grammars, choices: list[str], text: str) -> bool:
    constraint = StructuredOutputs(choice=choices).constraint()
    assert constraint is not None
    state = grammars.state(constraint)
    ids = grammars.tokenizer.encode(text, add_special_tokens=False)
    matcher = state.matcher
    return bool(matcher.consume_tokens(ids)) and not matcher.is_error() and matcher.is_accepting()


@pytest.mark.parametrize("choice", CHOICES)
def test_each_choice_is_taken_whole(grammars: Grammars, choice: str) -> None:
    assert follows(grammars, CHOICES, choice)


@pytest.mark.parametrize("text", ["ab", "a", "ok", "x", "a\\/b", "🍵", "xx", "是是", "a|b|(ok)"])
def test_what_is_not_a_choice_is_refused(grammars: Grammars, text: str) -> None:
    assert not follows(grammars, CHOICES, text)


def test_twenty_thousand_choices_make_one_lexeme(grammars: Grammars) -> None:
    many = [str(i) for i in range(20_000)]
    assert all(follows(grammars, many, text) for text in ("0", "7", "19999", "12345"))
    assert not follows(grammars, many, "20000")
