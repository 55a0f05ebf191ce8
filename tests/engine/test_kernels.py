"""The compiled float32 CPU kernels (gen.engine.kernels) against the PyTorch forms they
replace: accuracy, batch invariance (bit for bit), in-place effects, the tiny model with
and without them, and the fallback where they cannot run."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import torch
import torch.nn.functional as F

from gen.engine import Engine, SamplingParams, kernels
from gen.engine import packed as packed_linears
from gen.engine.kv_cache import KVCache
from gen.engine.llama import LlamaModel, RMSNorm, apply_rotary
from gen.engine.rope import rotary_tables
from tests.fakes import ByteTokenizer, tiny_config, tiny_llama

tok = ByteTokenizer()
PROMPTS = ["你好，世界", "สวัสดีครับ 🎉", "🚀 日本語のテキスト"]


@pytest.fixture(scope="module")
def k() -> ModuleType:
    if not kernels.supported():
        pytest.skip("not an AVX2 x86-64 CPU: the engine runs without them")
    loaded = kernels.load()  # a supported machine with g++ (this project's) must build them
    assert loaded is not None, f"the kernels did not build: {kernels.error()}"
    return loaded


def close(got: torch.Tensor, want: torch.Tensor, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    torch.testing.assert_close(got, want.to(got.dtype), rtol=rtol, atol=atol)


@pytest.mark.parametrize(("K", "N"), [(5, 7), (64, 48), (67, 13), (300, 101), (1000, 50)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_matmul_and_is_batch_invariant(
    k: ModuleType, isa: str, K: int, N: int, bias: bool
) -> None:
    """On AVX2 and, where the CPU has it, AVX-512 (two outputs a register), with the same
    bits on both."""
    torch.manual_seed(K * N)
    x, w = torch.randn(70, K), torch.randn(N, K)
    b = torch.randn(N) if bias else None
    full = k.linear(x, w, b)
    want = x.double() @ w.double().T + (b.double() if b is not None else 0)
    close(full, want, atol=1e-5 * K**0.5)
    k.use_isa("avx2")
    assert torch.equal(k.linear(x, w, b), full)
    k.use_isa(isa)
    for m in (1, 2, 3, 5, 33, 70):  # the first m rows, and m rows further in
        assert torch.equal(k.linear(x[:m], w, b), full[:m])
        assert torch.equal(k.linear(x[70 - m :], w, b), full[70 - m :])
    for i in (0, 1, 6, 37, 69):
        assert torch.equal(k.linear(x[i : i + 1], w, b), full[i : i + 1])
    strided = torch.randn(2 * K, 70)[::2].T  # (70, K), not contiguous
    assert not strided.is_contiguous()
    assert torch.equal(k.linear(strided, w, b), k.linear(strided.contiguous(), w, b))


@pytest.mark.parametrize("dim", [64, 67])
def test_rms_norms_match_the_reference(k: ModuleType, dim: int) -> None:
    torch.manual_seed(dim)
    norm = RMSNorm(dim, 1e-6)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(dim))
    x, r = torch.randn(3, 5, dim) * 3, torch.randn(3, 5, dim)
    with torch.inference_mode():
        got = k.rms_norm(x, norm.weight, norm.eps)
        close(got, norm(x))
        for i in range(3):
            assert torch.equal(k.rms_norm(x[i, 2:4], norm.weight, norm.eps), got[i, 2:4])
        summed, moved = x + r, x.clone()
        fused = k.add_rms_norm_(moved, r, norm.weight, norm.eps)
        assert torch.equal(moved, summed)  # x += r, exactly the torch add
        close(fused, norm(summed))
        assert torch.equal(fused, k.rms_norm(summed, norm.weight, norm.eps))
        row = x[1, 3:4].clone()
        assert torch.equal(k.add_rms_norm_(row, r[1, 3:4], norm.weight, norm.eps), fused[1, 3:4])


@pytest.mark.parametrize("half", [64, 69, 3])
def test_silu_mul_matches_torch_over_a_wide_range(k: ModuleType, half: int) -> None:
    torch.manual_seed(half)
    g = torch.linspace(-100, 100, 4 * half).view(4, half)
    g[1] = torch.randn(half) * 3
    gu = torch.cat([g, torch.randn(4, half)], dim=-1)
    got = k.silu_mul(gu)
    assert got.shape == (4, half)
    close(got, F.silu(g) * gu[:, half:], atol=1e-30)  # relative only
    assert torch.equal(k.silu_mul(gu[2:3]), got[2:3])
    assert torch.equal(k.silu_mul(gu.view(2, 2, 2 * half)), got.view(2, 2, half))


@pytest.mark.parametrize("head_dim", [16, 64])
def test_rotary_is_the_torch_form_bit_for_bit(k: ModuleType, head_dim: int) -> None:
    cfg = dataclasses.replace(tiny_config(tok.vocab_size), head_dim=head_dim)
    cos, sin = rotary_tables(cfg, 300)
    torch.manual_seed(head_dim)
    t, positions = torch.randn(7, 6, head_dim), torch.tensor([0, 299, 5, 5, 17, 128, 1])
    rotated = t.clone()
    k.rotary_(rotated, positions, cos, sin, 4)
    want = apply_rotary(t[:, :4], cos[positions][:, None], sin[positions][:, None])
    assert torch.equal(rotated[:, :4], want)
    assert torch.equal(rotated[:, 4:], t[:, 4:])  # heads past `heads`: untouched
    wide = torch.randn(7, 8, head_dim)  # rows strided past the rotated tensor's heads
    view = wide[:, :6]
    view.copy_(t)
    k.rotary_(view, positions, cos, sin, 4)
    assert torch.equal(view, rotated)
    for bad in (300, -1):
        with pytest.raises(RuntimeError, match="out of range"):
            k.rotary_(t.clone(), torch.tensor([0, 1, 2, bad, 4, 5, 6]), cos, sin, 4)


def reference_attention(
    qkv: torch.Tensor, ck: torch.Tensor, cv: torch.Tensor, slot: int, pos: int, h: int, kvh: int
) -> torch.Tensor:
    """One row's attention over its updated cache row, positions 0..pos (SDPA, HF's repeat_kv)."""
    keys = ck[slot, :, : pos + 1].repeat_interleave(h // kvh, dim=0)  # (H, L, D)
    values = cv[slot, :, : pos + 1].repeat_interleave(h // kvh, dim=0)
    out = F.scaled_dot_product_attention(qkv[:h, None], keys, values)  # (H, 1, D)
    return out.reshape(-1)


@pytest.mark.parametrize(("H", "KVH", "D"), [(8, 2, 64), (4, 2, 16), (6, 3, 32), (4, 4, 128)])
def test_attention_of_decoding_rows_matches_sdpa(k: ModuleType, H: int, KVH: int, D: int) -> None:
    torch.manual_seed(H * D)
    S, C = 5, 40
    cache_k, cache_v = torch.randn(S, KVH, C, D), torch.randn(S, KVH, C, D)
    qkv = torch.randn(4, H + 2 * KVH, D) * 2
    slots, positions = torch.tensor([3, 0, 4, 1]), torch.tensor([0, 7, 39, 20])
    ck, cv = cache_k.clone(), cache_v.clone()
    out = k.attention(qkv, ck, cv, slots, positions, H, KVH)
    assert out.shape == (4, H * D)
    want_k, want_v = cache_k.clone(), cache_v.clone()
    for b, (s, p) in enumerate(zip(slots.tolist(), positions.tolist(), strict=True)):
        want_k[s, :, p] = qkv[b, H : H + KVH]
        want_v[s, :, p] = qkv[b, H + KVH :]
    assert torch.equal(ck, want_k) and torch.equal(cv, want_v)  # only the new rows changed
    for b, (s, p) in enumerate(zip(slots.tolist(), positions.tolist(), strict=True)):
        close(out[b], reference_attention(qkv[b], ck, cv, s, p, H, KVH))
        alone_k, alone_v = cache_k.clone(), cache_v.clone()
        row = slice(b, b + 1)
        one = k.attention(qkv[row], alone_k, alone_v, slots[row], positions[row], H, KVH)
        assert torch.equal(one[0], out[b])


def test_attention_of_a_ragged_batch_is_causal_and_split_independent(k: ModuleType) -> None:
    """A prompt piece of 5 tokens (slot 2, positions 3..7, after 3 cached ones) beside a
    decoding row (slot 0, position 9): each token sees its own row up to itself. The
    piece's tokens come out the same bits as when run one at a time, as decoding does,
    and on any number of threads."""
    torch.manual_seed(7)
    H, KVH, D, C = 6, 2, 64, 16
    cache_k, cache_v = torch.randn(3, KVH, C, D), torch.randn(3, KVH, C, D)
    qkv = torch.randn(6, H + 2 * KVH, D)
    slots = torch.tensor([2, 2, 2, 2, 2, 0])
    positions = torch.tensor([3, 4, 5, 6, 7, 9])
    ck, cv = cache_k.clone(), cache_v.clone()
    out = k.attention(qkv, ck, cv, slots, positions, H, KVH)
    for i, (s, p) in enumerate(zip(slots.tolist(), positions.tolist(), strict=True)):
        assert torch.equal(ck[s, :, p], qkv[i, H : H + KVH])
        # only positions up to p count: later tokens of the piece are hidden from it
        hidden_k, hidden_v = ck.clone(), cv.clone()
        hidden_k[s, :, p + 1 :] = float("nan")
        hidden_v[s, :, p + 1 :] = float("nan")
        close(out[i], reference_attention(qkv[i], hidden_k, hidden_v, s, p, H, KVH))
    one_k, one_v = cache_k.clone(), cache_v.clone()
    for i in range(6):
        row = slice(i, i + 1)
        one = k.attention(qkv[row], one_k, one_v, slots[row], positions[row], H, KVH)
        assert torch.equal(one[0], out[i])
    # the (token, head) tasks in pieces taken by however many threads come free: the same
    threads = torch.get_num_threads()
    try:
        for n in (1, 3, 5):
            torch.set_num_threads(n)
            again = k.attention(qkv, cache_k.clone(), cache_v.clone(), slots, positions, H, KVH)
            assert torch.equal(again, out)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("half", [64, 69, 3])
def test_gelu_tanh_mul_matches_torch_over_a_wide_range(k: ModuleType, half: int) -> None:
    torch.manual_seed(half)
    g = torch.linspace(-30, 30, 4 * half).view(4, half)
    g[1] = torch.randn(half) * 3
    g[2] = torch.randn(half) * 1e-3  # tanh near 0
    gu = torch.cat([g, torch.randn(4, half)], dim=-1)
    got = k.gelu_tanh_mul(gu)
    close(got, F.gelu(g, approximate="tanh") * gu[:, half:], rtol=1e-5, atol=1e-6)
    assert torch.equal(k.gelu_tanh_mul(gu[2:3]), got[2:3])
    assert torch.equal(k.gelu_tanh_mul(gu.view(2, 2, 2 * half)), got.view(2, 2, half))


def test_qk_norm_norms_each_query_and_key_head_in_place(k: ModuleType) -> None:
    """RMSNorm over each head (q's weight on the queries, k's on the keys) of the rows of
    a q/k/v product, strided; the values untouched; a row alone gives the same bits."""
    torch.manual_seed(5)
    H, KVH, D = 4, 2, 32
    qkv = torch.randn(6, H + 2 * KVH, D) * 3
    qw, kw = torch.randn(D), torch.randn(D)
    q_norm, k_norm = RMSNorm(D, 1e-6), RMSNorm(D, 1e-6)
    with torch.no_grad():
        q_norm.weight.copy_(qw)
        k_norm.weight.copy_(kw)
    normed = qkv.clone()
    k.qk_norm_(normed, qw, kw, H, KVH, 1e-6)
    with torch.inference_mode():
        close(normed[:, :H], q_norm(qkv[:, :H]))
        close(normed[:, H : H + KVH], k_norm(qkv[:, H : H + KVH]))
    assert torch.equal(normed[:, H + KVH :], qkv[:, H + KVH :])
    row = qkv[3:4].clone()
    k.qk_norm_(row, qw, kw, H, KVH, 1e-6)
    assert torch.equal(row, normed[3:4])


def windowed_reference(
    qkv: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, h: int, kvh: int,
    window: int, scale: float | None,
) -> torch.Tensor:  # fmt: skip
    """One token's attention over its own last `window` keys (L, KVH, D) (SDPA)."""
    keys = keys[-window:].transpose(0, 1).repeat_interleave(h // kvh, dim=0)  # (H, W, D)
    values = values[-window:].transpose(0, 1).repeat_interleave(h // kvh, dim=0)
    out = F.scaled_dot_product_attention(qkv[:h, None], keys, values, scale=scale)
    return out.reshape(-1)


@pytest.mark.parametrize("capacity", [64, 23], ids=["whole", "ring"])
def test_attention_with_a_window_sees_its_last_positions(k: ModuleType, capacity: int) -> None:
    """A 40-token prompt run in chunks of 8, window 16, scale 0.2: each token sees the
    16 positions up to itself. In a row of 64 positions, or a ring of 23 (16 + 8 - 1),
    position p at p % 23: the same bits; a call that would overwrite a window in use is
    refused."""
    torch.manual_seed(11)
    H, KVH, D, W, N = 4, 2, 32, 16, 40
    qkv = torch.randn(N, H + 2 * KVH, D)
    ck, cv = torch.zeros(1, KVH, capacity, D), torch.zeros(1, KVH, capacity, D)
    outs = []
    for start in range(0, N, 8):
        piece = slice(start, start + 8)
        positions = torch.arange(start, start + 8)
        outs.append(k.attention(qkv[piece], ck, cv, torch.zeros(8, dtype=torch.long),
                                positions, H, KVH, W, 0.2))  # fmt: skip
    got = torch.cat(outs)
    for p in (0, 7, 15, 16, 30, 39):
        want = windowed_reference(qkv[p], qkv[: p + 1, H : H + KVH], qkv[: p + 1, H + KVH :],
                                  H, KVH, W, 0.2)  # fmt: skip
        close(got[p], want)
    whole = torch.zeros(1, KVH, 64, D), torch.zeros(1, KVH, 64, D)
    row = torch.zeros(1, dtype=torch.long)
    one_by_one = [
        k.attention(qkv[p : p + 1], *whole, row, torch.tensor([p]), H, KVH, W, 0.2)
        for p in range(N)
    ]
    assert torch.equal(torch.cat(one_by_one), got)  # split- and layout-independent
    if capacity < N:
        with pytest.raises(RuntimeError, match="cannot hold a window of 16"):
            k.attention(qkv[:9], ck, cv, torch.zeros(9, dtype=torch.long),
                        torch.arange(30, 39), H, KVH, W)  # fmt: skip
    with pytest.raises(RuntimeError, match="out of range"):  # no window: no ring
        k.attention(qkv[:1], ck, cv, torch.zeros(1, dtype=torch.long), torch.tensor([64]), H, KVH)


def with_kernels(model: LlamaModel, k: ModuleType) -> LlamaModel:
    fast = copy.deepcopy(model)
    packed_linears.pack_linears(fast, kernels=k)
    fast.use_kernels(k)
    return fast


@torch.inference_mode()
def test_tiny_model_logits_agree_with_and_without_kernels(k: ModuleType) -> None:
    plain = tiny_llama()
    fast = with_kernels(plain, k)
    caches = [KVCache(plain.cfg, max_slots=3, max_len=64) for _ in range(2)]
    for cache in caches:
        cache.reserve(3, 64)
    prompts = [tok.encode(p) for p in PROMPTS]
    slots = [2, 0, 1]
    last = []
    for ids, slot in zip(prompts, slots, strict=True):
        args = (torch.tensor([ids]), torch.arange(len(ids))[None], torch.tensor([slot]))
        want = plain(*args, caches[0], all_logits=True)
        got = fast(*args, caches[1], all_logits=True)
        close(got, want, rtol=1e-4, atol=1e-4)
        last.append(int(want[0, -1].argmax()))
    lengths = [len(ids) for ids in prompts]
    for _ in range(6):  # rows at different positions, in non-ordered slots
        args = (torch.tensor(last)[:, None], torch.tensor(lengths)[:, None], torch.tensor(slots))
        want = plain(*args, caches[0])
        close(fast(*args, caches[1]), want, rtol=1e-4, atol=1e-4)
        last = want.argmax(-1).tolist()
        lengths = [n + 1 for n in lengths]
    for layer in range(plain.cfg.num_layers):
        close(caches[1].k[layer], caches[0].k[layer], rtol=1e-4, atol=1e-4)
        close(caches[1].v[layer], caches[0].v[layer], rtol=1e-4, atol=1e-4)


def test_engine_greedy_tokens_agree_with_and_without_kernels(
    k: ModuleType, make_engine: Callable[..., Engine]
) -> None:
    plain = tiny_llama()
    params = SamplingParams(temperature=0, max_tokens=16, ignore_eos=True)
    prompts = [tok.encode(p) for p in PROMPTS]
    want = [c.token_ids for c in make_engine(model=plain).generate(prompts, params)]
    fast = make_engine(model=with_kernels(plain, k))
    assert [c.token_ids for c in fast.generate(prompts, params)] == want
    alone = [fast.generate([p], params)[0].token_ids for p in prompts]
    assert alone == want
    assert all(len(ids) == 16 for ids in want)


def test_an_unsupported_cpu_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "supported", lambda: False)
    monkeypatch.setattr(kernels, "_tried", False)
    monkeypatch.setattr(kernels, "_loaded", None)
    monkeypatch.setattr(kernels, "_error", None)
    assert kernels.load() is None
    assert "not an AVX2 x86-64 CPU" in (kernels.error() or "")
    assert kernels.load() is None  # tried once, remembered


def test_a_head_size_the_attention_kernel_cannot_take_runs_the_pytorch_forms(
    k: ModuleType, make_engine: Callable[..., Engine]
) -> None:
    torch.manual_seed(3)
    cfg = dataclasses.replace(tiny_config(tok.vocab_size), num_heads=16, head_dim=4)
    plain = LlamaModel(cfg).eval()
    fast = with_kernels(plain, k)
    assert not fast.takes_tokens(KVCache(cfg, max_slots=1, max_len=8))
    params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    prompts = [tok.encode(p) for p in PROMPTS]
    want = [c.token_ids for c in make_engine(model=plain).generate(prompts, params)]
    assert [c.token_ids for c in make_engine(model=fast).generate(prompts, params)] == want


def test_int8_keeps_prompt_pieces_apart_from_decoding_rows(
    k: ModuleType, make_engine: Callable[..., Engine]
) -> None:
    fast = with_kernels(tiny_llama(), k)
    assert make_engine(model=fast).runner.ragged()
    fast.split_prompts = True  # what load_model sets for int8
    assert not make_engine(model=fast).runner.ragged()


def test_a_build_lock_left_by_a_killed_build_is_cleared(tmp_path: Path) -> None:
    (tmp_path / "lock").write_text("")  # PyTorch's baton file, never removed after a kill
    with kernels._build_lock(tmp_path):
        assert not (tmp_path / "lock").exists()


def test_a_failed_build_is_remembered_and_said_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import torch.utils.cpp_extension

    monkeypatch.setattr(kernels, "build_dir", lambda: tmp_path / "key")
    monkeypatch.setattr(kernels, "supported", lambda: True)
    builds: list[str] = []

    def broken(**kwargs: object) -> None:
        builds.append(str(kwargs["name"]))
        raise RuntimeError("error: g++: command not found")

    monkeypatch.setattr(torch.utils.cpp_extension, "load", broken)

    def fresh_process() -> None:  # what a new process starts with
        monkeypatch.setattr(kernels, "_tried", False)
        monkeypatch.setattr(kernels, "_loaded", None)
        monkeypatch.setattr(kernels, "_error", None)

    fresh_process()
    with caplog.at_level("WARNING", logger="gen.engine.kernels"):
        assert kernels.load() is None
    assert len(builds) == 1 and "g++: command not found" in (kernels.error() or "")
    assert any("not tried again" in r.message for r in caplog.records)
    caplog.clear()
    fresh_process()
    with caplog.at_level("WARNING", logger="gen.engine.kernels"):
        assert kernels.load() is None  # not built again, and nothing said
    assert len(builds) == 1 and caplog.records == []
    assert "g++: command not found" in (kernels.error() or "")
    fresh_process()
    assert kernels.load(retry=True) is None  # `python -m gen.engine.kernels` tries again
    assert len(builds) == 2


@torch.inference_mode()
def test_the_layers_call_gives_the_python_loops_bits(k: ModuleType) -> None:
    """forward_tokens runs every layer in one `layers` call where each product has a
    kernel; the same kernels in the same order as its Python loop, so the logits and the
    cache come out bit for bit the same (a ragged batch: a prompt piece beside decoding
    rows)."""
    plain = tiny_llama()
    one, other = with_kernels(plain, k), with_kernels(plain, k)
    assert one.stack() is not None
    other._stack = False  # the Python loop over the plans
    assert other.stack() is None
    caches = [KVCache(one.cfg, max_slots=3, max_len=64) for _ in range(2)]
    for cache in caches:
        cache.reserve(3, 64)
    ids = tok.encode("灯塔 🗼 สวัสดี, a lighthouse")
    n = len(ids)
    got = []
    for model, cache in ((one, caches[0]), (other, caches[1])):
        first = model.forward_tokens(
            torch.tensor(ids), torch.arange(n), torch.full((n,), 1), cache, torch.tensor([n - 1])
        )
        mixed = model.forward_tokens(  # the next token of row 1 beside a new prompt in row 0
            torch.tensor([7, *ids[:5]]),
            torch.tensor([n, 0, 1, 2, 3, 4]),
            torch.tensor([1, 0, 0, 0, 0, 0]),
            cache,
            torch.tensor([0, 5]),
        )
        got.append((first, mixed))
    assert torch.equal(got[0][0], got[1][0]) and torch.equal(got[0][1], got[1][1])
    for layer in range(one.cfg.num_layers):
        assert torch.equal(caches[0].k[layer], caches[1].k[layer])
        assert torch.equal(caches[0].v[layer], caches[1].v[layer])
