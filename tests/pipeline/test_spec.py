from __future__ import annotations

import pytest
from pydantic import ValidationError

from gen.pipeline import GenerationSettings, Pipeline, Section
from gen.pipeline.length import plan_length


def test_generation_defaults() -> None:
    settings = GenerationSettings()
    assert settings.max_tokens == 256 and settings.max_rounds is None  # None: planned
    # a section without a target keeps the 4 rounds it always had
    plan = plan_length((None, None, None), None, max_rounds=None, max_tokens=256, window=None)
    assert (plan.rounds, plan.rounds_from) == (4, "default")
    assert settings.continuation == "kv" and settings.stop == [] and settings.seed is None


def test_stop_accepts_a_string() -> None:
    assert GenerationSettings.model_validate({"stop": "END"}).stop == ["END"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_tokens", 0),
        ("max_rounds", 0),
        ("temperature", -0.1),
        ("top_p", 0),
        ("top_p", 1.01),
        ("top_k", -1),
        ("min_p", 1.5),
        ("repetition_penalty", 0),
        ("min_tokens", -1),
        ("continuation", "stream"),
        ("max_tokens", "256"),
        ("max_tokens", True),
    ],
)
def test_generation_ranges(field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        GenerationSettings.model_validate({field: value})


def test_extra_keys_are_forbidden() -> None:
    with pytest.raises(ValidationError):
        Section.model_validate({"id": "a", "prompt": "x", "max_token": 3})


def test_section_overrides_only_what_it_sets() -> None:
    section = Section.model_validate({"id": "a", "prompt": "x", "max_tokens": 9, "seed": None})
    assert section.overrides() == {"max_tokens": 9, "seed": None}


def test_settings_for_merges_defaults() -> None:
    pipeline = Pipeline.model_validate(
        {
            "defaults": {"max_tokens": 100, "temperature": 0.2, "seed": 7, "stop": ["X"]},
            "sections": [
                {"id": "a", "prompt": "x"},
                {"id": "b", "prompt": "y", "max_tokens": 50, "stop": "END", "seed": None},
            ],
        }
    )
    a, b = pipeline.settings_for("a"), pipeline.settings_for(pipeline.sections[1])
    assert (a.max_tokens, a.temperature, a.seed, a.stop) == (100, 0.2, 7, ["X"])
    assert (b.max_tokens, b.temperature, b.seed, b.stop) == (50, 0.2, None, ["END"])
    b.stop.append("mutated")
    assert pipeline.defaults.stop == ["X"]


def test_hidden_defaults_to_list_sections() -> None:
    outline = Section.model_validate({"id": "o", "prompt": "x", "parse": "list"})
    shown = Section.model_validate({"id": "o", "prompt": "x", "parse": "list", "hidden": False})
    assert not outline.in_document and shown.in_document
    assert Section.model_validate({"id": "p", "prompt": "x"}).in_document
