"""`gen models show`: a GGUF file's architecture, sizes and tensor types, whether each runs
in the kernels or becomes float32 (and the memory that takes), and what is missing when gen
cannot run it: the bundled model, the real Gemma 3 file and files written here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf import GGMLQuantizationType

from gen.cli import main
from gen.engine import kernels
from gen.models import store
from gen.models.inventory import inventory
from tests.models.ggufs import CONTEXT, FFN, VOCAB, WIDTH, write_gguf


def by_type(path: Path) -> dict[str, tuple[int, int, str, int]]:
    return {
        t.name: (t.tensors, t.file_bytes, t.runs_as, t.resident_bytes)
        for t in inventory(path).types
    }


def test_the_bundled_models_inventory() -> None:
    inv = inventory(store.bundled_gguf())
    assert (inv.architecture, inv.context_length, inv.layers) == ("llama", 8192, 30)
    assert 134e6 < inv.parameters < 136e6
    assert inv.chat_template == "the file's" and inv.problems == ()
    types = by_type(store.bundled_gguf())
    assert set(types) == {"Q4_1", "Q8_0", "F32"}
    assert types["Q4_1"][0] == 210 and types["F32"][2] == "float32"
    native = "kernel" if kernels.supported() else "dequantised"
    assert types["Q4_1"][2] == types["Q8_0"][2] == native
    # 2 (keys, values) x 30 layers x 3 key/value heads x 64 wide x 4 bytes
    assert inv.kv_bytes_per_token == 2 * 30 * 3 * 64 * 4


def test_types_with_and_without_a_kernel_and_unreadable_ones(
    tmp_path: Path,
) -> None:
    types: dict[str, Any] = {"blk.0.ffn_up.weight": GGMLQuantizationType.Q5_0,
             "blk.0.ffn_down.weight": np.float16, "blk.0.attn_q.weight": np.int32}  # fmt: skip
    path = write_gguf(tmp_path / "mixed.gguf", types=types)
    found = by_type(path)
    elements = FFN * WIDTH
    native = "kernel" if kernels.supported() else "dequantised"
    held = {"kernel": 1, "dequantised": 0}  # in place: as the file holds it; else float32
    q5 = elements // 32 * 22
    assert found["Q5_0"] == (1, q5, native, q5 if held[native] else 4 * elements)
    f16 = 2 * elements
    assert found["F16"] == (1, f16, native, f16 if held[native] else 4 * elements)
    assert found["I32"] == (1, 4 * WIDTH * WIDTH, "refused", 0)
    inv = inventory(path)
    assert inv.context_length == CONTEXT
    assert inv.problems == ("tensor types gen cannot read: I32 (1 tensor)",)
    assert inv.chat_template == "none (chat prompts need one)"


def test_gen_models_show_lists_what_runs_and_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "show", "smollm2-135m"]) == 0
    out = capsys.readouterr().out
    assert "architecture   llama" in out and "context        8192 tokens" in out
    assert "Q4_1" in out and "resident       about" in out and "KV cache a token" in out
    bad = write_gguf(tmp_path / "long.gguf", extra=["rope_factors_long.weight"])
    assert main(["models", "show", str(bad)]) == 1
    out = capsys.readouterr().out
    assert out.rstrip().endswith(
        "gen cannot run this file:\n  - tensors gen does not read: rope_factors_long.weight"
    )


def test_gemmas_inventory(gemma_gguf: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inv = inventory(gemma_gguf)
    assert (inv.architecture, inv.context_length, inv.layers) == ("gemma3", 32768, 18)
    assert inv.chat_template == "none in the file: gen's for gemma3"
    assert {t.name: t.tensors for t in inv.types} == {
        "F32": 109, "Q5_0": 81, "Q4_K": 27, "Q8_0": 10, "Q6_K": 9
    }  # fmt: skip
    assert sum(t.file_bytes for t in inv.types) < gemma_gguf.stat().st_size
    # 2 x 18 layers x 1 key/value head x 256 wide x 4 bytes
    assert inv.kv_bytes_per_token == 2 * 18 * 256 * 4
    assert main(["models", "show", str(gemma_gguf)]) == (1 if inv.problems else 0)
    assert "Q6_K" in capsys.readouterr().out


def test_vocab_rows_are_counted(tmp_path: Path) -> None:
    inv = inventory(write_gguf(tmp_path / "m.gguf", extra=["output.weight"]))
    layer = 4 * WIDTH * WIDTH + 3 * FFN * WIDTH + 2 * WIDTH
    assert inv.parameters == layer + 2 * VOCAB * WIDTH + WIDTH
