"""The engine with a tiny random Llama: batching, seeds, aborts, slots and validation."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import torch

from gen.engine import Engine, SamplingParams
from gen.errors import ConfigError
from tests.fakes import ByteTokenizer, tiny_llama

MakeEngine = Callable[..., Engine]
tok = ByteTokenizer()
PROMPTS = [tok.encode(p) for p in ("Hello", "a", "The quick brown fox jumps", "你好，世界 🎉")]
GREEDY = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
SAMPLED: dict[str, Any] = {
    "temperature": 0.8,
    "top_p": 0.9,
    "top_k": 20,
    "min_p": 0.05,
    "max_tokens": 24,
}


def solo(engine: Engine, prompt: list[int], params: SamplingParams) -> list[int]:
    return engine.generate([prompt], params)[0].token_ids


def test_batched_greedy_equals_solo_greedy(make_engine: MakeEngine) -> None:
    engine = make_engine()
    alone = [solo(engine, p, GREEDY) for p in PROMPTS]
    together = engine.generate(PROMPTS, GREEDY)
    assert [c.token_ids for c in together] == alone
    assert all(len(ids) == 24 for ids in alone)
    assert len({tuple(ids) for ids in alone}) == len(PROMPTS)  # the prompts matter


def test_requests_beyond_max_slots_wait_and_all_complete(make_engine: MakeEngine) -> None:
    engine = make_engine(max_slots=2)
    alone = [solo(engine, p, GREEDY) for p in PROMPTS]
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in (24, 5, 24, 9)]
    ids = [engine.add_request(p, sp) for p, sp in zip(PROMPTS, params, strict=True)]
    tokens: dict[str, list[int]] = {i: [] for i in ids}
    finished: list[str] = []
    while engine.has_unfinished():
        for out in engine.step():
            tokens[out.request_id] += out.token_ids
            if out.finished:
                finished.append(out.request_id)
        assert engine.runner.slots.used <= 2
    assert sorted(finished) == sorted(ids)
    for rid, expected, sp in zip(ids, alone, params, strict=True):
        assert tokens[rid] == expected[: sp.max_tokens]
    assert engine.runner.slots.used == 0


def test_seeded_sampling_is_reproducible_alone_or_batched(make_engine: MakeEngine) -> None:
    engine = make_engine()
    p = PROMPTS[0]
    seed7 = SamplingParams(seed=7, **SAMPLED)
    alone = solo(engine, p, seed7)
    assert solo(engine, p, seed7) == alone
    others = [SamplingParams(seed=s, **SAMPLED) for s in (1, 2)] + [GREEDY]
    batch = engine.generate(
        [PROMPTS[2], p, PROMPTS[1], PROMPTS[3]], [others[0], seed7, *others[1:]]
    )
    assert batch[1].token_ids == alone
    different = [solo(engine, p, SamplingParams(seed=s, **SAMPLED)) for s in (8, 9)]
    assert alone not in different and different[0] != different[1]


def test_unseeded_sampling_varies(make_engine: MakeEngine) -> None:
    engine = make_engine()
    runs = {tuple(solo(engine, PROMPTS[0], SamplingParams(**SAMPLED))) for _ in range(3)}
    assert len(runs) > 1


def test_abort_mid_generation_frees_the_slot(make_engine: MakeEngine) -> None:
    engine = make_engine(max_slots=4)
    alone = [solo(engine, p, GREEDY) for p in PROMPTS[:3]]
    ids = [engine.add_request(p, GREEDY) for p in PROMPTS[:3]]
    tokens: dict[str, list[int]] = {i: [] for i in ids}
    for _ in range(4):
        for out in engine.step():
            tokens[out.request_id] += out.token_ids
    assert engine.runner.slots.used == 3
    aborted = engine.abort(ids[0])  # the first slot: the last row moves into its place
    assert aborted is not None and aborted.finish_reason == "abort"
    assert engine.runner.slots.used == 2
    assert engine.abort(ids[0]) is None
    while engine.has_unfinished():
        for out in engine.step():
            tokens[out.request_id] += out.token_ids
    # the survivors were not disturbed by the slot move
    assert [tokens[i] for i in ids[1:]] == alone[1:]
    assert engine.runner.slots.used == 0 and not engine.has_unfinished()


def test_abort_everything(make_engine: MakeEngine) -> None:
    engine = make_engine(max_slots=1)
    ids = [engine.add_request(p, GREEDY) for p in PROMPTS]  # one runs, the others wait
    engine.step()
    engine.step()
    for rid in reversed(ids):
        out = engine.abort(rid)
        assert out is not None and out.finished and out.finish_reason == "abort"
    assert engine.runner.slots.used == 0
    assert not engine.has_unfinished()
    assert engine.step() == []


def test_closing_a_stream_early_aborts_its_request(make_engine: MakeEngine) -> None:
    engine = make_engine()
    stream = engine.stream(PROMPTS[0], GREEDY)
    first = [next(stream) for _ in range(3)]
    assert not any(o.finished for o in first)
    assert engine.runner.slots.used == 1
    stream.close()  # type: ignore[attr-defined]  # a generator
    assert engine.runner.slots.used == 0 and not engine.has_unfinished()


def test_stream_yields_the_same_tokens_as_generate(make_engine: MakeEngine) -> None:
    engine = make_engine()
    outs = list(engine.stream(PROMPTS[2], GREEDY))
    assert [t for o in outs for t in o.token_ids] == solo(engine, PROMPTS[2], GREEDY)
    assert outs[-1].finished and outs[-1].finish_reason == "length"


def test_prompt_must_fit_the_window(make_engine: MakeEngine) -> None:
    engine = make_engine(max_model_len=16)
    with pytest.raises(ValueError, match="16"):
        engine.add_request(list(range(1, 17)), GREEDY)
    c = engine.generate([list(range(1, 16))], GREEDY)[0]  # 15 tokens: room for one more
    assert (c.finish_reason, len(c.token_ids)) == ("length", 1)
    assert not engine.has_unfinished()


def test_max_model_len_is_capped_by_the_model(
    make_engine: MakeEngine, make_tiny_model: Any
) -> None:
    engine = make_engine(make_tiny_model(max_position_embeddings=32), max_model_len=1000)
    assert engine.max_model_len == 32
    with pytest.raises(ValueError, match="32"):
        engine.add_request(list(range(1, 33)), GREEDY)


def test_empty_prompt_and_duplicate_ids_are_rejected(make_engine: MakeEngine) -> None:
    engine = make_engine()
    with pytest.raises(ValueError, match="at least one token"):
        engine.add_request([], GREEDY)
    engine.add_request(PROMPTS[0], GREEDY, request_id="r1")
    with pytest.raises(ValueError, match="r1"):
        engine.add_request(PROMPTS[1], GREEDY, request_id="r1")


@pytest.mark.parametrize("setting", ["max_prefill_tokens", "prefill_chunk"])
def test_prefill_budgets_below_one_are_rejected(make_engine: MakeEngine, setting: str) -> None:
    with pytest.raises(ConfigError, match=f"{setting} must be at least 1, got 0"):
        make_engine(**{setting: 0})


def test_repetition_penalty_changes_a_repetitive_greedy_output(make_engine: MakeEngine) -> None:
    engine = make_engine()
    plain = solo(engine, PROMPTS[0], SamplingParams(temperature=0, max_tokens=30, ignore_eos=True))
    assert max(plain.count(t) for t in set(plain)) >= 4  # the random model loops
    penalised = solo(
        engine,
        PROMPTS[0],
        SamplingParams(temperature=0, max_tokens=30, ignore_eos=True, repetition_penalty=1.5),
    )
    assert penalised != plain
    assert len(set(penalised)) > len(set(plain))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_tokens", 0),
        ("max_tokens", -3),
        ("temperature", -0.5),
        ("top_k", -1),
        ("top_p", 0.0),
        ("top_p", 1.5),
        ("min_p", -0.1),
        ("min_p", 1.25),
        ("repetition_penalty", 0.0),
        ("repetition_penalty", -1.0),
        ("min_tokens", -2),
        ("min_tokens", 300),
    ],
)
def test_sampling_params_validation(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=rf"{field}.*{re.escape(str(value))}"):
        SamplingParams(**{field: value})  # type: ignore[arg-type]


def test_sampling_params_normalises_stops() -> None:
    assert SamplingParams(stop="END").stop == ("END",)  # type: ignore[arg-type]
    assert SamplingParams(stop=["a", "b"], stop_token_ids=[3]).stop_token_ids == (3,)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        SamplingParams(stop=("ok", ""))


def test_slot_compaction_after_cache_growth_keeps_outputs(make_engine: MakeEngine) -> None:
    # The cache grows past its first 256 positions inside a decode step; then a request in
    # a low slot finishes and the last row moves into its place. The others must not notice.
    lengths = [280, 20, 300, 290]  # slot 0 frees after the growth; slot 2 moves into it
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in lengths]
    alone = [solo(make_engine(), p, sp) for p, sp in zip(PROMPTS, params, strict=True)]
    engine = make_engine()  # fresh: its cache first grows during this batch's decode
    together = engine.generate(PROMPTS, params)
    assert [c.token_ids for c in together] == alone
    assert [len(ids) for ids in alone] == lengths
    assert engine.runner.slots.used == 0
    assert engine.runner.cache.capacity > 256


def test_packed_projections_decode_the_same(make_engine: MakeEngine) -> None:
    from gen.engine import packed
    from tests.fakes import tiny_llama

    model = tiny_llama()
    swapped = packed.pack_linears(model) if packed.available() else 0
    assert swapped in (0, 4 * len(model.layers) + 1)  # qkv, o, gate_up, down; lm_head
    plain = make_engine().generate(PROMPTS, GREEDY)
    fused = make_engine(model=model).generate(PROMPTS, GREEDY)
    assert [c.token_ids for c in fused] == [c.token_ids for c in plain]


@pytest.mark.parametrize("bias", [False, True])
def test_a_checkpoint_s_separate_projections_load_stacked(bias: bool) -> None:
    """Hugging Face checkpoints keep q/k/v and gate/up apart; the model has one form, so
    fuse_checkpoint stacks them (q, k, v and gate, up, in that order) before loading."""
    import dataclasses

    from gen.engine.llama import LlamaModel, fuse_checkpoint
    from tests.fakes import ByteTokenizer, tiny_config

    cfg = dataclasses.replace(tiny_config(ByteTokenizer().vocab_size), attention_bias=bias)
    torch.manual_seed(5)
    model = LlamaModel(cfg)
    h, kvh, hd = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim, cfg.head_dim
    assert hd and h > kvh
    hf: dict[str, torch.Tensor] = {}
    for key, value in model.state_dict().items():
        prefix, _, kind = key.rpartition(".")
        if prefix.endswith("qkv_proj"):
            base = prefix.removesuffix("qkv_proj")
            q, k, v = value.split([h, kvh, kvh])
            hf |= {f"{base}q_proj.{kind}": q, f"{base}k_proj.{kind}": k, f"{base}v_proj.{kind}": v}
        elif prefix.endswith("gate_up_proj"):
            base = prefix.removesuffix("gate_up_proj")
            gate, up = value.chunk(2)
            hf |= {f"{base}gate_proj.{kind}": gate, f"{base}up_proj.{kind}": up}
        else:
            hf[key] = value
    assert "layers.0.self_attn.q_proj.weight" in hf and "layers.1.mlp.up_proj.weight" in hf
    assert ("layers.0.self_attn.k_proj.bias" in hf) == bias
    fused = fuse_checkpoint(hf)
    assert fused.keys() == model.state_dict().keys()
    for key, value in model.state_dict().items():
        assert torch.equal(fused[key], value), key
    assert fuse_checkpoint(fused).keys() == fused.keys()  # already fused: passed through


def test_requests_over_the_kv_budget_wait_then_complete(make_engine: MakeEngine) -> None:
    probe = make_engine()
    per_token = probe.runner.cache.bytes_per_token()
    # room for two rows of 256 positions: of four requests, at most two hold KV at once
    engine = make_engine(kv_budget_bytes=2 * 256 * per_token)
    params = SamplingParams(temperature=0, max_tokens=100, ignore_eos=True)
    alone = [solo(make_engine(), p, params) for p in PROMPTS]
    ids = [engine.add_request(p, params) for p in PROMPTS]
    done: dict[str, list[int]] = {rid: [] for rid in ids}
    most = 0
    while engine.has_unfinished():
        for out in engine.step():
            done[out.request_id] += out.token_ids
        most = max(most, engine.runner.slots.used)
        assert engine.runner.cache.nbytes() <= 2 * 256 * per_token
    assert most == 2
    assert [done[rid] for rid in ids] == alone


def test_a_request_larger_than_the_kv_budget_is_refused(make_engine: MakeEngine) -> None:
    probe = make_engine()
    engine = make_engine(kv_budget_bytes=256 * probe.runner.cache.bytes_per_token())
    with pytest.raises(ValueError, match="KV memory"):
        engine.add_request(PROMPTS[0], SamplingParams(max_tokens=300))


def test_a_long_prompt_runs_in_chunks_while_others_keep_decoding(
    make_engine: MakeEngine,
) -> None:
    model = tiny_llama()
    long_prompt = tok.encode("长的提示词，" * 20 + " 🎉 end")
    params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    alone = make_engine(model=model, prefix_cache_bytes=0).generate([long_prompt], params)

    engine = make_engine(model=model, prefix_cache_bytes=0, prefill_chunk=64)
    runner = engine.runner
    chunks: list[int] = []
    real_prefill = runner.prefill

    def prefill(seq: Any, limit: int | None = None) -> Any:
        chunks.append(min(len(seq.pending_ids()), limit or 10**9))
        return real_prefill(seq, limit)

    runner.prefill = prefill  # type: ignore[method-assign]
    busy = engine.add_request(PROMPTS[0], SamplingParams(temperature=0, max_tokens=40))
    engine.step()  # "busy" is decoding from now on
    chunks.clear()
    late = engine.add_request(long_prompt, params)
    busy_tokens_per_step = []
    got: list[int] = []
    while engine.has_unfinished():
        outs = engine.step()
        busy_tokens_per_step.append(sum(len(o.token_ids) for o in outs if o.request_id == busy))
        got += [t for o in outs if o.request_id == late for t in o.token_ids]
    full, rest = divmod(len(long_prompt), 64)
    assert chunks == [64] * full + [rest]  # 64 prompt tokens a step
    steps = len(chunks)
    assert all(n == 1 for n in busy_tokens_per_step[:steps])  # never stalled by the prefill
    assert got == alone[0].token_ids


def test_a_prompt_longer_than_the_step_budget_still_completes(make_engine: MakeEngine) -> None:
    model = tiny_llama()
    prompt = tok.encode("ภาษาไทย " * 20)  # 400 bytes
    params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
    whole = make_engine(model=model).generate([prompt], params)[0]
    chunked = make_engine(model=model, max_prefill_tokens=96).generate([prompt], params)[0]
    assert chunked.token_ids == whole.token_ids
    assert chunked.prompt_tokens == len(prompt)


def test_a_resumed_round_over_the_kv_budget_waits_for_memory(make_engine: MakeEngine) -> None:
    probe = make_engine()
    per_token = probe.runner.cache.bytes_per_token()
    budget = 2 * 256 * per_token  # two rows of 256 positions
    engine = make_engine(kv_budget_bytes=budget)
    short = SamplingParams(temperature=0, max_tokens=20, ignore_eos=True)
    held = engine.add_request(PROMPTS[0], short, hold=True)
    other = engine.add_request(PROMPTS[3], SamplingParams(temperature=0, max_tokens=120))
    parked = False
    while not parked:
        parked = any(o.parked for o in engine.step() if o.request_id == held)
    # another 300 tokens: 2 rows of 512 positions would pass the budget, so the round
    # waits while `other` runs, then goes on alone
    engine.resume(held, 300)
    finished_at: dict[str, int] = {}
    first_resumed_token = None
    for step in range(1000):
        for out in engine.step():
            if out.request_id == held and out.token_ids and first_resumed_token is None:
                first_resumed_token = step
            if out.finished:
                finished_at[out.request_id] = step
        assert engine.runner.cache.nbytes() <= budget
        if not engine.has_unfinished():
            break
    assert first_resumed_token is not None and other in finished_at
    assert first_resumed_token > finished_at[other]
    assert held in finished_at


def test_a_resumed_round_larger_than_the_whole_budget_is_refused(
    make_engine: MakeEngine,
) -> None:
    per_token = make_engine().runner.cache.bytes_per_token()
    engine = make_engine(kv_budget_bytes=256 * per_token)
    rid = engine.add_request(PROMPTS[0], SamplingParams(max_tokens=8, temperature=0), hold=True)
    while not any(o.parked for o in engine.step()):
        pass
    with pytest.raises(ValueError, match="whole budget"):
        engine.resume(rid, 400)
    assert engine.release(rid) is not None  # still parked, still releasable


def test_a_waiting_resume_does_not_stall_a_prompt_being_prefilled(
    make_engine: MakeEngine,
) -> None:
    """A resumed round waits for memory while a long prompt is still running in chunks:
    the prompt goes on, finishes, and then the round runs (no deadlock)."""
    per_token = make_engine().runner.cache.bytes_per_token()
    engine = make_engine(kv_budget_bytes=3 * 256 * per_token, prefill_chunk=32)
    held = engine.add_request(
        PROMPTS[0], SamplingParams(temperature=0, max_tokens=12, ignore_eos=True), hold=True
    )
    while not any(o.parked for o in engine.step() if o.request_id == held):
        pass
    # keep one request decoding so the long prompt is chunked, then park the round again
    busy = engine.add_request(PROMPTS[1], SamplingParams(temperature=0, max_tokens=30))
    engine.step()
    long_prompt = tok.encode("分块预填充 " * 12)  # 192 bytes: six chunks of 32
    late = engine.add_request(long_prompt, SamplingParams(temperature=0, max_tokens=40))
    engine.step()  # the long prompt has started, 32 tokens a step
    assert engine.requests[late].slot is not None and not engine.requests[late].prefilled
    engine.resume(held, 300)  # 3 rows x 512 would pass the budget: the round waits
    finished: set[str] = set()
    for _ in range(2000):
        finished |= {o.request_id for o in engine.step() if o.finished}
        if not engine.has_unfinished():
            break
    assert finished == {held, busy, late}
