"""A GGUF file checked from its header before anything else: the bundled model passes; an
architecture, tensor type, tensor or metadata gen does not run is named and the file
refused, before any conversion, by `gen validate`, `gen run` and `gen generate` alike."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf import GGMLQuantizationType

import gen.backends
from gen.cli import main
from gen.engine.quantised import runs
from gen.errors import ModelError
from gen.models import check, prepare, resolve, store
from gen.models.gguf_header import read_header
from gen.models.gguf_support import ARCHITECTURES, dequantisable, problems
from tests.models.ggufs import write_gguf


def problems_of(path: Path) -> list[str]:
    return problems(read_header(path))


def test_the_bundled_model_and_a_tiny_llama_pass(tmp_path: Path) -> None:
    assert problems_of(store.bundled_gguf()) == []
    assert problems_of(write_gguf(tmp_path / "tiny.gguf", layers=2)) == []
    assert problems_of(write_gguf(tmp_path / "tied.gguf", extra=["output.weight"])) == []


def test_a_real_gemma3_file_is_checked_in_under_a_second(gemma_gguf: Path) -> None:
    start = time.perf_counter()
    assert problems_of(gemma_gguf) == []  # (its 262,144-token vocabulary stepped over)
    assert time.perf_counter() - start < 1.0


def test_an_unknown_architecture_is_refused_in_under_a_second_before_any_conversion(
    tmp_path: Path, gen_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_gguf(tmp_path / "falcon.gguf", arch="falcon")
    monkeypatch.setattr(store, "convert_gguf", lambda *a, **k: pytest.fail("converted"))
    start = time.perf_counter()
    with pytest.raises(ModelError) as info:
        prepare(str(path))
    assert time.perf_counter() - start < 1.0
    message = str(info.value)
    assert message.startswith(f"{path}: gen cannot run this file: ")
    assert f"the architecture 'falcon' is not one gen runs ({', '.join(ARCHITECTURES)})" in message
    assert not (gen_home / "models").exists()


def test_an_unknown_architecture_names_what_runs(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "falcon.gguf", arch="falcon")
    with pytest.raises(ModelError, match="the architecture 'falcon' is not one gen runs"):
        check(resolve(str(path)))


def test_tensor_types_gguf_py_cannot_read_are_counted(tmp_path: Path) -> None:
    types: dict[str, Any] = {"blk.0.attn_q.weight": np.int32, "blk.1.attn_q.weight": np.int32,
                             "blk.0.attn_k.weight": np.float64}  # fmt: skip
    path = write_gguf(tmp_path / "ints.gguf", layers=2, types=types)
    assert problems_of(path) == ["tensor types gen cannot read: I32 (2 tensors), F64 (1 tensor)"]


def test_a_type_the_gguf_package_does_not_know_is_named(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "new.gguf")
    data = bytearray(path.read_bytes())
    at = data.index(b"token_embd.weight") + len(b"token_embd.weight")
    dims = int.from_bytes(data[at : at + 4], "little")
    kind = at + 4 + 8 * dims
    data[kind : kind + 4] = (99).to_bytes(4, "little")  # a type from a newer llama.cpp
    path.write_bytes(bytes(data))
    with pytest.raises(ModelError) as info:
        check(resolve(str(path)))
    assert str(info.value) == (
        f"{path}: gen cannot read this file: the tensor 'token_embd.weight' has ggml type 99, "
        "which the gguf package does not know (a newer llama.cpp's type?)"
    )


def test_every_type_a_kernel_reads_is_dequantisable_so_never_refused() -> None:
    assert all(dequantisable(kind) for kind in GGMLQuantizationType if runs(kind))
    for kind in ("F32", "F16", "BF16", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K", "Q8_0"):
        assert dequantisable(GGMLQuantizationType[kind]), kind
    assert not dequantisable(GGMLQuantizationType.I32)


def test_quantised_tensors_pass(tmp_path: Path) -> None:
    types = {"blk.0.attn_q.weight": GGMLQuantizationType.Q4_1,
             "blk.0.attn_k.weight": GGMLQuantizationType.Q5_0,
             "token_embd.weight": GGMLQuantizationType.Q8_0}  # fmt: skip
    assert problems_of(write_gguf(tmp_path / "q.gguf", types=types)) == []


def test_tensors_gen_does_not_read_and_missing_tensors_are_named(tmp_path: Path) -> None:
    llama3 = write_gguf(tmp_path / "llama3.gguf", extra=["rope_freqs.weight"])
    assert problems_of(llama3) == []  # Llama 3's rope scaling, as llama.cpp stores it
    qwen = write_gguf(tmp_path / "qwen.gguf", arch="qwen2", extra=["rope_freqs.weight"],
                      layer_tensors=ARCHITECTURES["qwen2"].layer)  # fmt: skip
    assert problems_of(qwen) == ["tensors gen does not read: rope_freqs.weight"]
    phi = write_gguf(tmp_path / "long.gguf", extra=["rope_factors_long.weight"])
    assert problems_of(phi) == ["tensors gen does not read: rope_factors_long.weight"]
    cut = write_gguf(tmp_path / "cut.gguf", layers=3, missing=["blk.2.ffn_down.weight"])
    assert problems_of(cut) == ["tensors missing: blk.2.ffn_down.weight"]
    qwen2 = write_gguf(tmp_path / "qwen2.gguf", arch="qwen2", layers=3)  # llama's tensors
    assert problems_of(qwen2) == [
        "tensors missing: blk.0.attn_k.bias, blk.0.attn_q.bias, blk.0.attn_v.bias, "
        "blk.1.attn_k.bias and 5 more"
    ]


@pytest.mark.parametrize(
    ("metadata", "problem"),
    [
        ({"{arch}.attn_logit_softcapping": 50.0, "{arch}.final_logit_softcapping": 30.0},
         "metadata gen does not know: llama.attn_logit_softcapping, "
         "llama.final_logit_softcapping"),
        ({"{arch}.rope.scaling.type": "longrope", "{arch}.rope.scaling.factor": 4.0},
         "rope scaling 'longrope' (factor 4.0) is not one gen applies"),
        ({"{arch}.rope.scaling.type": "yarn", "{arch}.rope.scaling.factor": 4.0,
          "{arch}.rope.scaling.yarn_log_multiplier": 0.1},
         "metadata gen does not know: llama.rope.scaling.yarn_log_multiplier"),
        ({"{arch}.expert_count": 8, "{arch}.expert_used_count": 2},
         "llama.expert_count is 8: gen runs no mixture of experts"),
        ({"{arch}.attention.causal": False}, "its attention is not causal"),
        ({"{arch}.rope.dimension_count": 8}, "llama.rope.dimension_count is 8, not the head "
         "width 16"),
        ({"split.count": 3}, "it is one of 3 split files (gen reads a model in one file)"),
        ({"general.type": "adapter"}, "it is a LoRA adapter, not a model"),
        ({"tokenizer.ggml.model": "bert"}, "its tokenizer 'bert' is not one gen converts "
         "(llama, gpt2)"),
    ],
    ids=["softcapping", "longrope", "yarn's own numbers", "experts", "not causal",
         "partial rotary", "split", "adapter", "tokenizer"],
)  # fmt: skip
def test_metadata_that_changes_the_arithmetic_is_refused(
    tmp_path: Path, metadata: dict[str, object], problem: str
) -> None:
    found = problems_of(write_gguf(tmp_path / "m.gguf", metadata=metadata))
    assert problem in found, found


@pytest.mark.parametrize(
    "metadata",
    [{"{arch}.rope.scaling.type": "none", "{arch}.rope.scaling.factor": 4.0},
     {"{arch}.rope.scaling.factor": 1.0},
     {"{arch}.rope.scaling.factor": 8.0},  # llama.cpp reads it as linear, which gen applies
     {"{arch}.attention.sliding_window": 4096},  # no shorter than the context: no window
     {"{arch}.expert_count": 0, "{arch}.attention.causal": True},
     # an explicit head width (Mistral Nemo's 128 over 5120 / 32): transformers reads
     # llama's from rope.dimension_count
     {"{arch}.rope.dimension_count": 8, "{arch}.attention.key_length": 8,
      "{arch}.attention.value_length": 8},
     {"general.name": "x", "quantize.imatrix.file": "y", "tokenizer.ggml.pre": "smollm"}],
    ids=["scaling none", "factor 1", "linear", "long window", "zeros", "own head width",
         "harmless"],
)  # fmt: skip
def test_metadata_that_changes_nothing_passes(tmp_path: Path, metadata: dict[str, object]) -> None:
    assert problems_of(write_gguf(tmp_path / "m.gguf", metadata=metadata)) == []


@pytest.mark.parametrize(("arch", "runs"), [("llama", True), ("mistral", True), ("smollm3", False)])
def test_a_sliding_window_runs_where_the_engine_applies_it(
    tmp_path: Path, arch: str, runs: bool
) -> None:
    """Llama and Mistral files: on every layer, as Mistral's (gguf_config applies it);
    SmolLM3's converter writes none, and one there would run approximately."""
    path = write_gguf(tmp_path / "w.gguf", arch=arch,
                      metadata={"{arch}.attention.sliding_window": 16})  # fmt: skip
    refusal = f"sliding-window attention (16 tokens) is not one gen runs for {arch}"
    assert problems_of(path) == ([] if runs else [refusal])


def test_qwen2s_head_width_is_embedding_over_heads(tmp_path: Path) -> None:
    qwen = {"{arch}.rope.dimension_count": 8}  # transformers' qwen2 config has no head_dim
    path = write_gguf(tmp_path / "q.gguf", arch="qwen2", metadata=qwen,
                      layer_tensors=ARCHITECTURES["qwen2"].layer)  # fmt: skip
    assert problems_of(path) == ["qwen2.rope.dimension_count is 8, not the head width 16"]


def test_every_problem_is_in_one_message(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "bad.gguf",
        extra=["rope_factors_long.weight"],
        metadata={"{arch}.expert_count": 4},
        types={"output_norm.weight": np.int8},
    )
    with pytest.raises(ModelError) as info:
        check(resolve(str(path)))
    assert str(info.value) == (
        f"{path}: gen cannot run this file: tensor types gen cannot read: I8 (1 tensor); "
        "tensors gen does not read: rope_factors_long.weight; llama.expert_count is 4: gen runs no "
        "mixture of experts"
    )


def test_gen_validate_run_and_generate_refuse_before_loading(
    tmp_path: Path,
    gen_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = write_gguf(tmp_path / "bad.gguf", extra=["rope_factors_long.weight"])
    opened: list[Any] = []
    monkeypatch.setattr(store, "convert_gguf", lambda *a, **k: opened.append(a))
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(f"model: {bad}\nsections:\n  - {{id: a, prompt: Hi}}\n", "utf-8")
    reason = "gen cannot run this file: tensors gen does not read: rope_factors_long.weight"
    assert main(["validate", str(pipeline)]) == 2
    assert capsys.readouterr().err.startswith(f"{pipeline}:1:8: model: {bad}: {reason}")
    monkeypatch.setattr(gen.backends, "open_backend", lambda *a, **k: opened.append(a))
    assert main(["run", str(pipeline), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.startswith(f"{pipeline}:1:8: model: {bad}: {reason}")
    assert opened == []
    monkeypatch.undo()
    monkeypatch.setenv("GEN_HOME", str(gen_home))
    monkeypatch.setattr(store, "convert_gguf", lambda *a, **k: opened.append(a))
    assert main(["generate", "-m", str(bad), "你好 🌊"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: {reason}" in err and "Traceback" not in err
    assert opened == [] and not (gen_home / "models").exists()
