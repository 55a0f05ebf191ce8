"""Outlines that always parse: the grammar a `parse: list` section is held to, the guard
that refuses a repeated item while the list streams, and the section runner cutting a
refused item away and sampling it again (scripted backend; the grammar itself is checked
with llguidance and the bundled model's tokenizer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gen.pipeline.run.outline import ItemGuard, json_list_schema, list_grammar
from gen.text.listparse import item_title, parse_json_items
from tests.pipeline.fake_backend import FakeBackend, Reply, pipeline_from, read_events, run

PROMPT = "Write a numbered outline of exactly 5 parts for a technical report about solar power."


def refusal_reason(titles: list[str], exclude: tuple[str, ...] = ()) -> str | None:
    """The reason the guard gives for the last title, after the others were accepted."""
    guard = ItemGuard(PROMPT, exclude)
    text = "".join(f"{n}. {t}\n" for n, t in enumerate(titles, 1))
    found = guard.feed(text)
    if found is None:
        return None
    assert found.title == titles[-1].rstrip(":"), found  # nothing before the last was refused
    return found.reason


@pytest.mark.parametrize(
    ("titles", "why"),
    [
        (["Photovoltaic cells", "Photovoltaic Cell"], "the same as"),  # a plural aside
        (["Water treatment processes", "water treatment process:"], "the same as"),
        (["Building lighthouses", "Building lighthairs"], "the same as"),  # one word misspelt
        (["Grid storage with batteries", "Battery grid storage"], "most of its words"),
        (["Panels in ancient times", "Panels in ancient cultures"], "most of its words"),
        (["Printing: A Historical View", "Printing: A Global Historical View in Europe"], "holds"),
        (["The history of grids", "Grids in historical times"], "most of its words"),  # stems
        (["Panel efficiency", "Solar Power"], "only the prompt's words"),
        (["Panel efficiency", "The conclusion and outlook"], "writes itself"),
        (["Panel efficiency", "Panels are made of silicon"], "a sentence"),
        (["Panel efficiency", "The history of the"], "ends on 'the'"),
        (["Panel efficiency", "Applications: eB,A,D"], "cut off"),
        (["Panel efficiency", "Scale: " + "x" * 53], "cut off"),
        (["太阳能电池", "太阳能电池"], "the same as"),
        # the long-article recipe's outline: eleven titles, every one "The history of ..."
        (
            [
                "The history of signal lamps",
                "The history of keepers and families",
                "History of the Fresnel lens",
            ],
            "it opens like",
        ),
    ],
)
def test_the_guard_refuses_a_repeat_an_echo_and_a_sentence(titles: list[str], why: str) -> None:
    reason = refusal_reason(titles, exclude=("Conclusion",))
    assert reason is not None and why in reason, reason


@pytest.mark.parametrize(
    "titles",
    [
        ["History of solar power", "Future of solar power", "Costs of solar power"],
        ["The history of panels", "History of grids", "Grid storage in winter"],
        ["Photovoltaic cells and modules", "Inverters and grid efficiency"],
        ["太阳能电池", "风能 😀", "ไฟฟ้าพลังน้ำ"],
    ],
)
def test_the_guard_passes_distinct_items(titles: list[str]) -> None:
    assert refusal_reason(titles, exclude=("Conclusion",)) is None


@pytest.mark.parametrize(
    ("title", "tidy"),
    [
        ("The history of lighthouse building and the", "The history of lighthouse building"),
        (
            "Definition: Scooters (eS) - A self-balancing board,R",
            "Definition: Scooters (eS) - A self-balancing board",
        ),
        ("Applications: eB,A,D", "Applications: eB"),
        ("灯塔的历史", "灯塔的历史"),
        ("The", "The"),
        ("Bridges of the world", "Bridges of the world"),
        # cut at the length limit (60 characters) inside "Americans"
        (
            "Extracurricular and Personal Discrimination against Asian Am",
            "Extracurricular and Personal Discrimination against Asian",
        ),
    ],
)
def test_a_title_that_ends_badly_is_tidied(title: str, tidy: str) -> None:
    from gen.pipeline.run.outline import tidy_title

    assert tidy_title(title) == tidy


def test_a_lenient_guard_only_refuses_repeats() -> None:
    guard = ItemGuard(PROMPT, ("Conclusion",))
    guard.lenient = True
    assert guard.judge("Panels are made of silicon") is None
    assert guard.judge("Solar power") is None
    assert guard.feed("1. Solar power\n") is None
    found = guard.feed("1. Solar power\n2. Solar powers\n")
    assert found is not None and "the same as" in found.reason
    assert guard.judge("Conclusion") is not None


def test_the_guard_forgets_items_cut_away() -> None:
    guard = ItemGuard(PROMPT)
    assert guard.feed("1. Panel efficiency\n2. Grid storage\n") is None
    assert [t for _, _, t in guard.items] == ["Panel efficiency", "Grid storage"]
    assert guard.feed("1. Panel efficiency") is None  # the text was cut back
    assert [t for _, _, t in guard.items] == ["Panel efficiency"]
    assert guard.feed("1. Panel efficiency\n2. Grid storage\n") is None  # so it may return


def test_the_list_grammar_counts_items() -> None:
    grammar = list_grammar(2, 4, exclude=["Conclusion"], refused=["Solar cells"], fresh_from=2)
    assert grammar.startswith("start: i1 i2 (i3 (i4)?)?\n")
    assert 'i1: "1. " TITLE "\\n"' in grammar  # written before the refusal: not re-checked
    assert 'i2: "2. " FRESH "\\n"' in grammar
    with pytest.raises(ValueError):
        list_grammar(3, 2)


@pytest.fixture(scope="module")
def matcher_for(real_model: Any) -> Any:
    import llguidance

    from gen.engine.grammar import ll_tokenizer

    tokenizer = real_model.tokenizer
    ll = ll_tokenizer(tokenizer, real_model.config.vocab_size)

    def follows(grammar: str, text: str) -> tuple[bool, bool]:
        """(the text is a valid start, the list is complete) under the grammar."""
        compiled = llguidance.grammar_from("lark", grammar)
        assert not llguidance.LLMatcher.validate_grammar(compiled, ll)
        matcher = llguidance.LLMatcher(ll, compiled, log_level=0)
        ok = matcher.consume_tokens(tokenizer.encode(text, add_special_tokens=False))
        return bool(ok) and not matcher.is_error(), matcher.is_accepting()

    return follows


@pytest.mark.real_model
@pytest.mark.parametrize(
    ("text", "valid", "complete"),
    [
        ("1. Panel efficiency\n2. Grid storage\n", True, True),
        ("1. 太阳能电池\n2. 风能 😀\n3. ไฟฟ้าพลังน้ำ\n", True, True),
        ("1. Panel efficiency\n", True, False),  # fewer than min_items
        ("1. A b\n2. C d\n3. E f\n4. G h\n", False, False),  # more than max_items
        ("1. Panel efficiency\n2. Conclusion\n", False, False),  # the pipeline's own
        ("1. Panel efficiency\n2. The conclusion\n", False, False),
        ("1. Panel efficiency\n2. Solar cells and modules\n", False, False),  # refused before
        ("1. **Bold title**\n", False, False),
        ("1. Panels are cheap. They last.\n", False, False),  # a sentence's end
        ("1. Panel efficiency\n  - a sub-point\n", False, False),
        ("Here is the outline:\n1. Panels\n", False, False),
        ("1. Here is the outline\n", False, False),
        ("1. Panel efficiency:\n2. Grid storage\n", True, True),  # the colon small models write
        ("1. Panel efficiency -\n", False, False),
    ],
)
def test_the_list_grammar_holds_titles(
    matcher_for: Any, text: str, valid: bool, complete: bool
) -> None:
    grammar = list_grammar(2, 3, exclude=["Conclusion"], refused=["Solar cells"])
    assert matcher_for(grammar, text) == (valid, complete)


def test_a_json_outline_parses_items_with_fields() -> None:
    schema = json.loads(json_list_schema(2, 4))
    assert (schema["minItems"], schema["maxItems"]) == (2, 4)
    text = json.dumps(
        [
            {"title": "太阳能电池", "words": 300, "points": ["效率"]},
            {"title": "Conclusion", "words": 100, "points": []},
            {"title": "Grid storage", "words": 400, "points": ["batteries"]},
            {"title": "grid storages", "words": 400, "points": []},
        ],
        ensure_ascii=False,
    )
    items = parse_json_items(text, ["Conclusion"])
    assert [item_title(i) for i in items] == ["太阳能电池", "Grid storage"]
    assert items[0]["points"] == ["效率"]
    assert parse_json_items(json.dumps({"parts": ["A one", "B two"]})) == ["A one", "B two"]


# -- the section runner: a refused item is cut away and sampled again ------------------------

OUTLINE = """\
name: t
model: fake
defaults: {temperature: 0, seed: 3, max_tokens: 200, max_rounds: 1}
sections:
  - id: outline
    prompt: "[outline] A numbered outline of {{ n }} parts about solar power."
    parse: list
    max_items: "{{ n }}"
    exclude: [Conclusion]
  - id: part
    foreach: sections.outline.items
    prompt: "[part] Write about {{ item }}."
inputs: {n: 3}
"""


def run_outline(tmp_path: Path, replies: list[Reply]) -> tuple[dict[str, Any], FakeBackend, Path]:
    backend = FakeBackend({"outline": replies}, chunk=3, supports_grammar=True)
    manifest, prepared = run(pipeline_from(OUTLINE), backend, tmp_path)
    return manifest, backend, prepared.run_dir.path


def test_a_repeated_item_is_cut_and_sampled_again(tmp_path: Path) -> None:
    replies: list[Reply] = [
        ("1. 太阳能电池 😀\n2. Grid storage\n3. grid storages\nmore", "length"),
        ("\n3. Panel recycling\n", "stop"),
    ]
    manifest, backend, run_dir = run_outline(tmp_path, replies)
    first, retry = backend.calls_for("outline")
    held = first.params.constraint
    assert held is not None and held.kind == "lark" and held.prefix == ""
    assert "start: i1 i2 i3\n" in held.text  # exactly n items, n a template
    # the retry goes on from the kept items, the repeat banned from the item after them
    kept = "1. 太阳能电池 😀\n2. Grid storage"
    assert retry.continue_final and retry.messages[-1] == {"role": "assistant", "content": kept}
    again = retry.params.constraint
    assert again is not None and again.prefix == kept
    assert 'i3: "3. " FRESH' in again.text and 'i2: "2. " TITLE' in again.text
    assert "grid storages" in again.text.split("FRESH:")[1]
    assert retry.params.temperature >= 0.5  # sampled again, warmer than greedy
    outline = next(s for s in manifest["sections"] if s["id"] == "outline")
    assert outline["items"] == ["太阳能电池 😀", "Grid storage", "Panel recycling"]
    assert outline["rounds"][0]["stop_reason"] == "repetition"
    assert outline["rounds"][0]["repetition"]["kind"] == "item"
    parts = [s["title"] for s in manifest["sections"] if s["section"] == "part"]
    assert parts == outline["items"]
    events = read_events(run_dir / "events.jsonl")
    shown = "".join(e["text"] for e in events if e["type"] == "delta" and e["section"] == "outline")
    assert shown == (run_dir / "sections" / "outline.md").read_text("utf-8")


def test_a_list_that_keeps_repeating_ends_with_the_items_it_has(tmp_path: Path) -> None:
    first: Reply = ("1. Grid storage\n2. Grid storage\n", "stop")
    replies: list[Reply] = [first] + [("\n2. Grid storage\n", "stop")] * 9  # the grammar's way
    manifest, backend, _ = run_outline(tmp_path, replies)
    outline = next(s for s in manifest["sections"] if s["id"] == "outline")
    assert outline["items"] == ["Grid storage"]
    assert outline["status"] == "completed"
    assert len(backend.calls_for("outline")) == 9  # the first try and 2 * ITEM_RETRIES more


def test_a_backend_that_cannot_hold_a_grammar_gets_no_constraint(tmp_path: Path) -> None:
    backend = FakeBackend({"outline": [("1. A one\n2. A one\n3. B two\n4. C three\n", "stop")]})
    manifest, _ = run(pipeline_from(OUTLINE), backend, tmp_path)
    (call,) = backend.calls_for("outline")
    assert call.params.constraint is None
    outline = next(s for s in manifest["sections"] if s["id"] == "outline")
    assert outline["items"] == ["A one", "B two", "C three"]  # parsed as before


def test_format_none_leaves_a_list_free(tmp_path: Path) -> None:
    backend = FakeBackend({"outline": [("1. A one\n2. B two\n3. C three\n", "stop")]})
    backend.supports_grammar = True
    yaml = OUTLINE.replace(
        "    exclude: [Conclusion]\n", "    exclude: [Conclusion]\n    format: none\n"
    )
    run(pipeline_from(yaml), backend, tmp_path)
    (call,) = backend.calls_for("outline")
    assert call.params.constraint is None


def test_a_section_format_is_sent_as_its_constraint(tmp_path: Path) -> None:
    yaml = """\
name: t
model: fake
sections:
  - id: date
    prompt: "[date] A date."
    format: {regex: "20[0-9]{2}-[01][0-9]-[0-3][0-9]"}
  - id: city
    prompt: "[city] A city."
    format:
      json_schema: {type: object, properties: {name: {type: string}}, required: [name]}
  - id: answer
    prompt: "[answer] Yes or no?"
    format: {grammar: 'root ::= "yes" | "no"'}
"""
    backend = FakeBackend({"date": [("2026-12-02", "stop")]})
    run(pipeline_from(yaml), backend, tmp_path)
    sent = {c.key: c.params.constraint for c in backend.calls}
    assert sent["date"] is not None and sent["date"].kind == "regex"
    assert sent["city"] is not None and sent["city"].kind == "json_schema"
    assert json.loads(sent["city"].text)["required"] == ["name"]
    assert sent["answer"] is not None and sent["answer"].kind == "gbnf"


@pytest.mark.parametrize(
    ("fmt", "message"),
    [
        ("{}", "give one of json_schema, regex, grammar"),
        ("{regex: a, grammar: b}", "give one of json_schema, regex, grammar"),
        ("{json_schema: 'not json'}", "not JSON"),
        ("{lark: x}", "lark"),
    ],
)
def test_a_bad_format_names_the_place(fmt: str, message: str) -> None:
    from gen.errors import GenError

    yaml = f'name: t\nmodel: fake\nsections:\n  - id: s\n    prompt: "x"\n    format: {fmt}\n'
    with pytest.raises(GenError) as caught:
        pipeline_from(yaml)
    assert "test.yaml:6:" in str(caught.value) and message in str(caught.value)
