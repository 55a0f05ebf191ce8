"""Log probabilities: the model's own (log_softmax of its logits, before any sampler),
reported for each token of the text, alike alone or batched, and never changing what is
sampled."""

from __future__ import annotations

from collections.abc import Callable

import torch

from gen.engine import Engine, SamplingParams
from gen.engine.kv_cache import KVCache
from gen.sampling import TokenLogprob
from tests.fakes import ByteTokenizer

MakeEngine = Callable[..., Engine]
tok = ByteTokenizer()
PROMPTS = [tok.encode(p) for p in ("Hello", "你好，世界", "The quick brown fox")]


def logprobs_of(engine: Engine, prompt: list[int], params: SamplingParams) -> list[TokenLogprob]:
    rid = engine.add_request(prompt, params)
    found: list[TokenLogprob] = []
    while True:
        for out in engine.step():
            if out.request_id == rid:
                assert len(out.logprobs) == len(out.token_ids)
                found += out.logprobs
                if out.finished:
                    return found


@torch.inference_mode()
def reference(engine: Engine, ids: list[int]) -> torch.Tensor:
    """log_softmax of the model's logits over `ids` in one forward: (len(ids), vocab)."""
    model = engine.runner.model
    cache = KVCache(model.cfg, 1, len(ids))
    cache.reserve(1, len(ids))
    logits = model(
        torch.tensor([ids]),
        torch.arange(len(ids))[None, :],
        torch.tensor([0]),
        cache,
        all_logits=True,
    )
    return torch.log_softmax(logits[0].float(), -1)


def test_greedy_logprobs_are_the_models_and_the_top_is_the_choice(make_engine: MakeEngine) -> None:
    engine = make_engine()
    params = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True, logprobs=4)
    prompt = PROMPTS[0]
    found = logprobs_of(engine, prompt, params)
    assert len(found) == 12
    ids = prompt + [t.token_id for t in found]
    want = reference(engine, ids)
    for i, t in enumerate(found):
        row = want[len(prompt) - 1 + i]
        assert torch.isclose(torch.tensor(t.logprob), row[t.token_id], atol=1e-4)
        assert len(t.top) == 4 and t.top[0][0] == t.token_id and t.top[0][1] == t.logprob
        assert [lp for _, lp in t.top] == sorted((lp for _, lp in t.top), reverse=True)
        assert [i for i, _ in t.top] == row.topk(4).indices.tolist()


def test_logprobs_change_nothing_sampled_and_batching_keeps_them(
    make_engine: MakeEngine,
) -> None:
    engine = make_engine()
    sampled = SamplingParams(temperature=0.9, top_k=30, seed=3, max_tokens=10, ignore_eos=True)
    with_lp = SamplingParams(**{**_fields(sampled), "logprobs": 2})
    plain = [c.token_ids for c in engine.generate(PROMPTS, sampled)]
    alone = [logprobs_of(engine, p, with_lp) for p in PROMPTS]
    assert [[t.token_id for t in lps] for lps in alone] == plain
    ids = [engine.add_request(p, with_lp) for p in PROMPTS]
    together: dict[str, list[TokenLogprob]] = {i: [] for i in ids}
    while engine.has_unfinished():
        for out in engine.step():
            together[out.request_id] += out.logprobs
    for rid, solo in zip(ids, alone, strict=True):
        # (the tiny model runs without gen's kernels: batching may move the last bits)
        assert [t.token_id for t in together[rid]] == [t.token_id for t in solo]
        for a, b in zip(together[rid], solo, strict=True):
            assert abs(a.logprob - b.logprob) < 1e-5
            assert [i for i, _ in a.top] == [i for i, _ in b.top]
    assert all(t.top == () for t in engine.generate([PROMPTS[0]], sampled)[0].logprobs)


def test_no_logprobs_unless_asked_and_none_for_the_final_eos() -> None:
    engine = Engine(_eos_after_two(), tok)
    done = engine.generate([PROMPTS[0]], SamplingParams(temperature=0, max_tokens=8))[0]
    assert done.logprobs == []
    asked = SamplingParams(temperature=0, max_tokens=8, logprobs=0)
    done = engine.generate([PROMPTS[0]], asked)[0]
    assert done.finish_reason == "stop" and len(done.logprobs) == len(done.token_ids) == 2
    assert all(t.top == () for t in done.logprobs)


def _fields(p: SamplingParams) -> dict[str, object]:
    return {name: getattr(p, name) for name in p.__dataclass_fields__}


def _eos_after_two() -> torch.nn.Module:
    from tests.fakes import ScriptedModel

    first = PROMPTS[0][0]
    return ScriptedModel({first: tok.encode("ok")})
