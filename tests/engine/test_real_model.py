"""The engine on the bundled SmolLM2-135M-Instruct: agreement with transformers, real
tokenizer streaming (Chinese, emoji), stop strings across real tokens, seeds.

Generations are kept short: the model runs at about a dozen tokens a second on a CPU.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from gen.engine import Completion, Engine, SamplingParams
from gen.engine.chat import encode_chat

pytestmark = pytest.mark.real_model

REPLACEMENT = "\ufffd"
PROMPTS = {
    "english": "Write one sentence about the sea.",
    "chinese": "Translate to Chinese: Good morning.",
    "emoji": "Reply with three emoji that describe a party 🎉",
}
MAX_NEW = 48


@pytest.fixture(scope="module")
def chat_ids(real_model: Any) -> dict[str, list[int]]:
    return {
        name: encode_chat(real_model.tokenizer, [{"role": "user", "content": text}])
        for name, text in PROMPTS.items()
    }


@pytest.fixture
def engine(real_model: Any) -> Engine:
    return Engine(real_model.model, real_model.tokenizer, max_slots=4)


@pytest.fixture(scope="module")
def greedy(real_model: Any, chat_ids: dict[str, list[int]]) -> dict[str, Completion]:
    """The three prompts, batched, greedy, up to MAX_NEW tokens."""
    engine = Engine(real_model.model, real_model.tokenizer, max_slots=4)
    done = engine.generate(
        list(chat_ids.values()), SamplingParams(temperature=0, max_tokens=MAX_NEW)
    )
    return dict(zip(chat_ids, done, strict=True))


def decode(real_model: Any, ids: list[int]) -> str:
    return str(real_model.tokenizer.decode(ids, skip_special_tokens=True))


def test_greedy_matches_transformers_token_for_token(
    real_model: Any, chat_ids: dict[str, list[int]], greedy: dict[str, Completion]
) -> None:
    from transformers import AutoModelForCausalLM

    hf: Any = AutoModelForCausalLM.from_pretrained(real_model.path, dtype=torch.float32)
    hf.eval()
    eos = set(real_model.config.eos_token_ids)
    for name, ids in chat_ids.items():
        prompt = torch.tensor([ids])
        with torch.inference_mode():
            out = hf.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                do_sample=False,
                max_new_tokens=MAX_NEW,
            )
        expected = out[0, len(ids) :].tolist()
        c = greedy[name]
        if c.finish_reason == "stop":  # transformers keeps the final EOS, the engine does not
            assert expected[-1] in eos, name
            expected = expected[:-1]
        else:
            assert (c.finish_reason, len(expected)) == ("length", MAX_NEW), name
        assert c.token_ids == expected, name
        assert c.text == decode(real_model, c.token_ids)


def test_chinese_streams_without_replacement_characters(
    real_model: Any, engine: Engine, chat_ids: dict[str, list[int]], greedy: dict[str, Completion]
) -> None:
    known = greedy["chinese"].token_ids
    # the longest run of up to 30 tokens that ends on a whole character
    n = max(
        n
        for n in range(1, min(30, len(known)) + 1)
        if REPLACEMENT not in decode(real_model, known[:n])
    )
    outs = list(engine.stream(chat_ids["chinese"], SamplingParams(temperature=0, max_tokens=n)))
    ids = [t for o in outs for t in o.token_ids]
    assert ids == known[:n]  # alone or batched, the same
    text = decode(real_model, ids)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in text)  # it did answer in Chinese
    assert REPLACEMENT not in text
    assert not any(REPLACEMENT in o.text for o in outs)
    assert "".join(o.text for o in outs) == text


def test_max_tokens_inside_a_multibyte_character(
    real_model: Any, engine: Engine, chat_ids: dict[str, list[int]], greedy: dict[str, Completion]
) -> None:
    """Cut inside a character: only the final flush may show U+FFFD; joined == decode."""
    names, limits = [], []
    for name in ("chinese", "emoji"):
        ids = greedy[name].token_ids
        cut = next(
            n
            for n in range(3, min(40, len(ids)) + 1)
            if decode(real_model, ids[:n]).endswith(REPLACEMENT)
            and len(decode(real_model, ids[:n])) > 1
        )
        names.append(name)
        limits.append(cut)
    params = [SamplingParams(temperature=0, max_tokens=n) for n in limits]
    done = engine.generate([chat_ids[n] for n in names], params)
    for name, n, c in zip(names, limits, done, strict=True):
        assert c.token_ids == greedy[name].token_ids[:n]
        assert c.finish_reason == "length"
        assert not any(REPLACEMENT in d for d in c.deltas[:-1]), (name, c.deltas)
        assert c.deltas[-1].endswith(REPLACEMENT)
        assert "".join(c.deltas) == decode(real_model, c.token_ids)


def test_stop_string_across_real_tokens(
    real_model: Any, engine: Engine, chat_ids: dict[str, list[int]], greedy: dict[str, Completion]
) -> None:
    ids = greedy["english"].token_ids
    full = greedy["english"].text
    ends = [len(decode(real_model, ids[:n])) for n in range(len(ids) + 1)]  # token boundaries
    # the first run of three tokens of 3+ characters each: the stop starts inside the first
    # token and ends inside the third
    k = next(
        k
        for k in range(2, len(ids) - 3)
        if all(ends[i + 1] - ends[i] >= 3 for i in (k, k + 1, k + 2))
    )
    start, end = ends[k] + 1, ends[k + 2] + 2
    stop = full[start:end]
    assert full.find(stop) == start, stop
    c = engine.generate(
        [chat_ids["english"]], SamplingParams(temperature=0, max_tokens=MAX_NEW, stop=(stop,))
    )[0]
    assert (c.text, c.finish_reason, c.stop_reason) == (full[:start], "stop", stop)
    assert c.token_ids == ids[: k + 3]
    shown = ""
    for delta in c.deltas:
        shown += delta
        assert full[:start].startswith(shown)  # nothing of the stop string was ever shown


def test_seeds_at_temperature_one(engine: Engine, chat_ids: dict[str, list[int]]) -> None:
    prompt = chat_ids["english"]
    params = [SamplingParams(temperature=1.0, max_tokens=12, seed=s) for s in (11, 11, 12)]
    first, again, other = engine.generate([prompt, prompt, prompt], params)
    assert first.text == again.text and first.token_ids == again.token_ids
    assert other.text != first.text


def test_batched_greedy_equals_solo_on_the_real_model(
    real_model: Any, chat_ids: dict[str, list[int]], greedy: dict[str, Completion]
) -> None:
    """Batch invariance: each prompt decoded alone gives the same tokens as in a batch where
    requests join mid-way (rows at different positions, so attention runs masked) and
    others finish early. The float32 oneDNN kernels give a row the same bits at any M."""
    engine = Engine(real_model.model, real_model.tokenizer, max_slots=4)
    params = SamplingParams(temperature=0, max_tokens=MAX_NEW)
    alone = {name: engine.generate([ids], params)[0].token_ids for name, ids in chat_ids.items()}
    assert {name: c.token_ids for name, c in greedy.items()} == alone

    # staggered: "chinese" starts alone, "english" joins after 5 steps, "emoji" after 11,
    # and a short filler request leaves early
    ids = dict(chat_ids)
    got: dict[str, list[int]] = {name: [] for name in ids}
    rid = {engine.add_request(ids["chinese"], params): "chinese"}
    rid[engine.add_request(ids["english"][:9], SamplingParams(temperature=0, max_tokens=3))] = ""
    for step in range(400):
        if step == 5:
            rid[engine.add_request(ids["english"], params)] = "english"
        if step == 11:
            rid[engine.add_request(ids["emoji"], params)] = "emoji"
        for out in engine.step():
            if rid[out.request_id]:
                got[rid[out.request_id]] += out.token_ids
        if step > 11 and not engine.has_unfinished():
            break
    assert got == alone
    assert all(len(t) > 10 for t in alone.values())


def test_prefix_reuse_decodes_what_a_cold_engine_decodes(real_model: Any) -> None:
    """Two chat requests share a system prompt and a document; the second copies that
    prefix from the first (kept after it finished) and still matches a cold engine."""
    document = "文档：" + "长城是中国古代的军事防御工程，修建历时两千多年。🏯 " * 6
    asks = ["用一句话总结这份文档。", "Translate the first sentence into English."]
    ids = [
        encode_chat(
            real_model.tokenizer,
            [
                {"role": "system", "content": "You are a careful assistant. " + document},
                {"role": "user", "content": ask},
            ],
        )
        for ask in asks
    ]
    params = SamplingParams(temperature=0, max_tokens=24)
    warm = Engine(real_model.model, real_model.tokenizer, max_slots=2)
    cold = Engine(real_model.model, real_model.tokenizer, max_slots=2, prefix_cache_bytes=0)
    first = warm.generate([ids[0]], params)[0]
    second = warm.generate([ids[1]], params)[0]
    shared = next(i for i, (a, b) in enumerate(zip(*ids, strict=False)) if a != b)
    assert shared > 100
    assert (first.cached_prompt_tokens, second.cached_prompt_tokens) == (0, shared)
    assert [first.token_ids, second.token_ids] == [
        cold.generate([p], params)[0].token_ids for p in ids
    ]
    assert REPLACEMENT not in second.text
