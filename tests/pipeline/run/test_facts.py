"""Facts copied from the prompt survive gen's defaults byte for byte: DRY reads a section's
own text only (the answer a prefix round goes on with), never the prompt, its sources or
earlier sections, and a repeat that goes on copying a figure of the prompt (said again) is
not penalised. A model that copies figures, names and a quoted sentence from its prompt
writes them exactly through the pipeline's default sampling; the same model under DRY over
the whole prompt (llama.cpp's rule, gen's default before) mangles them."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import torch

from gen.engine import Engine
from gen.pipeline.run.params import sampling
from gen.pipeline.spec import GenerationSettings
from tests.fakes import ByteTokenizer, ScriptedModel
from tests.pipeline.fake_backend import FakeBackend, Reply, pipeline_from, run

from .test_continuation import one_section

FACTS_EN = (
    "Asian American students made up 43.04% of applicants, 0.67% fewer than in 2019; "
    "7.27% were admitted. Dean Mei-Ling O'Connor said: "
    '"Admissions must be fair to every applicant, whatever their name." '
)
FACTS_ZH = (
    "比亚迪2023年新能源汽车销量302.44万辆，同比增长62.3%。王传福说：“技术是宝马，创新是缰绳。”"
)


class Copier(ScriptedModel):
    """A ScriptedModel as sure of each copied token as a real model copying its prompt:
    the script's token leads the next one by 20 logits (other ids by 40)."""

    def __call__(self, *args: Any) -> torch.Tensor:
        return super().__call__(*args) * 4


def copy_engine(facts: str) -> tuple[Engine, ByteTokenizer]:
    """An engine whose model writes `facts` after a prompt that begins with "["."""
    tokenizer = ByteTokenizer()
    script = {tokenizer.encode("[")[0]: tokenizer.encode(facts)}
    copier = Copier(script, max_position_embeddings=2048)
    return Engine(copier, tokenizer), tokenizer


@pytest.mark.parametrize("facts", [FACTS_EN, FACTS_ZH])
def test_figures_names_and_quotes_from_the_prompt_are_copied_exactly(facts: str) -> None:
    engine, tokenizer = copy_engine(facts)
    prompt = tokenizer.encode(f"[Write the report. Use these facts exactly:\n{facts}\n")
    settings = GenerationSettings(seed=11)  # every other setting the pipeline's default
    assert settings.dry_multiplier > 0  # DRY is on by default
    params = sampling(settings, 4 * len(facts))
    assert params.dry_prompt_tokens == 0  # a first round: none of the prompt is its own
    (written,) = engine.generate([prompt], params)
    assert written.text == facts
    # the test can fail: DRY over the whole prompt penalises the copy and mangles it
    over_prompt = dataclasses.replace(params, dry_prompt_tokens=None)
    (mangled,) = engine.generate([prompt], over_prompt)
    assert mangled.text != facts


def test_dry_reads_the_last_prompt_tokens_it_is_given() -> None:
    """A prefix round's own text, at the prompt's end, is read: copying it again is the
    section repeating itself, and DRY bends it; the instruction before it is not read."""
    engine, tokenizer = copy_engine(FACTS_EN)
    own = FACTS_EN
    prompt = tokenizer.encode("[Go on.\n") + tokenizer.encode(own)
    params = sampling(GenerationSettings(seed=11), 4 * len(FACTS_EN), own_tokens=len(own))
    (written,) = engine.generate([prompt], params)
    assert written.text != FACTS_EN  # a second copy of its own text
    (alone,) = engine.generate([prompt], dataclasses.replace(params, dry_prompt_tokens=0))
    assert alone.text == FACTS_EN


@pytest.mark.parametrize(
    ("facts", "figures"),
    [(FACTS_EN, ["43.04%", "0.67%", "7.27%"]), (FACTS_ZH, ["2023", "302.44", "62.3%"])],
)
def test_a_figure_from_the_prompt_said_again_is_not_bent(facts: str, figures: list[str]) -> None:
    """The answer states the prompt's facts twice (a report's summary and its body): the
    second copy repeats the section's own text, but where it goes on copying a figure of
    the prompt DRY leaves it alone; without the facts in the prompt it is bent."""
    twice = facts + facts
    engine, tokenizer = copy_engine(twice)
    params = sampling(GenerationSettings(seed=11), 4 * len(twice))
    given = tokenizer.encode(f"[Write the report. Use these facts exactly:\n{facts}\n")
    (written,) = engine.generate([given], params)
    assert written.text.startswith(facts)
    assert all(written.text.count(figure) == 2 for figure in figures), written.text
    engine, _ = copy_engine(twice)  # (a fresh one: the fake reads no cached prefix)
    (bare,) = engine.generate([tokenizer.encode("[Write the report.\n")], params)
    assert bare.text.startswith(facts) and bare.text != twice


def test_a_prefix_round_gives_dry_the_section_text_only(tmp_path: Path) -> None:
    """The section runner tells the backend how much of a prefix round's prompt is its own
    text (the open assistant message); a first round has none."""
    loop = "The signal box stood beside the line for many years. " * 4
    sound = f"{FACTS_EN}Railway signalling began with flags and lamps. "
    replies: list[Reply] = [(sound + loop, "length"), (" The end.", "stop")]
    backend = FakeBackend({"s": replies}, chunk=3)
    yaml = one_section("kv", max_tokens=80, max_rounds=4)
    run(pipeline_from(yaml), backend, tmp_path)
    first, retry = backend.calls
    assert first.params.dry_prompt_tokens == 0
    assert retry.continue_final
    own = retry.messages[-1]["content"]
    assert FACTS_EN in own
    assert retry.params.dry_prompt_tokens == backend.count_text(own) > 0
