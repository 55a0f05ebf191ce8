"""Engine.score: the log-probabilities of a text after each context, as a plain forward
gives them, computed between steps without touching the requests in flight."""

from __future__ import annotations

import pytest
import torch

from gen.engine import Engine, SamplingParams, kernels
from gen.engine.kv_cache import KVCache
from gen.engine.llama import LlamaModel
from tests.engine.test_kernels import with_kernels
from tests.fakes import ByteTokenizer, tiny_llama

tok = ByteTokenizer()
CONTEXTS = [tok.encode("灯塔的守护人"), tok.encode("A")]
TEXT = tok.encode("The keeper lit the lamp 🎉 每晚。")
GREEDY = SamplingParams(temperature=0, max_tokens=40, ignore_eos=True)


@torch.inference_mode()
def reference(model: LlamaModel, context: list[int], text: list[int]) -> list[float]:
    """log-softmax of one plain forward over context + text, at the text's tokens."""
    ids = context + text
    cache = KVCache(model.cfg, max_slots=1, max_len=len(ids))
    cache.reserve(1, len(ids))
    logits = model(
        torch.tensor([ids]), torch.arange(len(ids))[None], torch.tensor([0]), cache, all_logits=True
    )[0]  # (T, vocab)
    found = torch.log_softmax(logits[len(context) - 1 : -1], dim=-1)
    return found.gather(1, torch.tensor(text)[:, None])[:, 0].tolist()


def models() -> list[LlamaModel]:
    plain = tiny_llama()
    if not kernels.supported() or kernels.load() is None:
        return [plain]
    return [plain, with_kernels(plain, kernels.load())]


@pytest.mark.parametrize("which", [0, 1])
def test_score_equals_log_softmax_of_a_plain_forward(which: int) -> None:
    found = models()
    if which >= len(found):
        pytest.skip("no kernels on this machine")
    model = found[which]
    engine = Engine(model, tok)
    scored = engine.score(CONTEXTS, TEXT)
    for context, row in zip(CONTEXTS, scored, strict=True):
        assert len(row) == len(TEXT)
        torch.testing.assert_close(row, reference(found[0], context, TEXT), rtol=1e-4, atol=1e-4)
    assert scored[0] != scored[1]  # the context matters


@pytest.mark.parametrize("which", [0, 1])
def test_scoring_between_steps_leaves_decoding_alone(which: int) -> None:
    found = models()
    if which >= len(found):
        pytest.skip("no kernels on this machine")
    prompts = [tok.encode("Hello"), tok.encode("你好，世界")]
    alone = Engine(found[which], tok, max_slots=4).generate(prompts, GREEDY)
    engine = Engine(found[which], tok, max_slots=4)
    ids = [engine.add_request(p, GREEDY) for p in prompts]
    tokens: dict[str, list[int]] = {rid: [] for rid in ids}
    first = engine.score(CONTEXTS, TEXT)
    steps = 0
    while engine.has_unfinished():
        for out in engine.step():
            tokens[out.request_id] += out.token_ids
        steps += 1
        if steps % 3 == 0:  # between steps, mid-prompt and mid-decode
            assert engine.score(CONTEXTS, TEXT) == first
    assert [tokens[rid] for rid in ids] == [c.token_ids for c in alone]


def test_a_text_past_the_window_is_refused() -> None:
    engine = Engine(tiny_llama(max_position_embeddings=16), tok)
    with pytest.raises(ValueError, match="context window of 16"):
        engine.score([tok.encode("context")], tok.encode("far too long a text"))
    with pytest.raises(ValueError, match="at least one token"):
        engine.score([[]], TEXT)


def test_prompt_logprobs_are_the_scores_with_their_alternatives() -> None:
    engine = Engine(tiny_llama(), tok)
    ids = CONTEXTS[0] + TEXT
    found = engine.prompt_logprobs(ids, 3)
    assert [t.token_id for t in found] == ids[1:]
    (scored,) = engine.score([ids[:1]], ids[1:])
    assert [t.logprob for t in found] == pytest.approx(scored, abs=1e-5)
    for t in found:
        assert len(t.top) == 3 and t.top[0][1] >= t.logprob - 1e-5
    assert engine.prompt_logprobs(ids[:1], 3) == []
