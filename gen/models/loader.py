"""Load a prepared model directory into the engine's LlamaModel plus its tokenizer."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from gen.engine import LlamaModel, ModelConfig, kernels
from gen.engine import packed as packed_linears
from gen.engine.config import EngineConfig
from gen.engine.llama import fuse_checkpoint, offset_norms
from gen.errors import ModelError
from gen.models import tokenizer as own_tokenizer
from gen.models.convert import DONE_MARKER
from gen.models.gguf_weights import gguf_config, load_gguf_model
from gen.models.store import ModelSpec, prepare, resolve

log = logging.getLogger(__name__)


@dataclass(slots=True)
class LoadedModel:
    name: str
    path: Path
    config: ModelConfig
    model: LlamaModel
    tokenizer: Any  # a transformers tokenizer: decode(), encode(), apply_chat_template()
    dtype: str = "float32"

    @property
    def context_window(self) -> int:
        return self.config.max_position_embeddings


def load_tokenizer(path: Path) -> Any:
    """The folder's tokenizer. A folder gen converted from a GGUF file whose tokenizer is the
    plain fast backend is read with the tokenizers library alone (gen.models.tokenizer: no
    transformers import; 0.7 s of Gemma 3's load). Another converted folder, or one that
    names transformers' own fast backend, is loaded as the class its tokenizer_config.json
    names (the one AutoTokenizer chose at the conversion) straight away: AutoTokenizer
    would first read the model's config to choose it, importing about 1.5 s of
    transformers' modelling code for a class it then does not change."""
    try:
        settings = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        settings = {}
    converted = (path / DONE_MARKER).is_file()
    if converted and isinstance(settings, dict) and own_tokenizer.plain(settings):
        try:
            return own_tokenizer.Tokenizer.from_folder(path)
        except Exception as exc:
            raise ModelError(f"{path}: cannot load the tokenizer: {exc}") from exc
    import transformers

    named = settings.get("tokenizer_class") if isinstance(settings, dict) else None
    ours = converted or named == "TokenizersBackend"
    direct = getattr(transformers, named, None) if isinstance(named, str) and ours else None
    if "auto_map" in settings or not isinstance(direct, type):
        direct = None
    loader: Any = direct or transformers.AutoTokenizer
    try:
        return loader.from_pretrained(path, local_files_only=True)
    except Exception as exc:
        raise ModelError(f"{path}: cannot load the tokenizer: {exc}") from exc


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"{path}: cannot read: {exc}") from exc
    if not isinstance(data, dict):
        raise ModelError(f"{path}: expected a JSON object")
    return data


# the special tokens chat templates close a turn with (Gemma, Llama 3, ChatML, Phi): where
# the model's own template writes one, a reply ends there, as llama.cpp ends generation at
# its end-of-generation tokens. A GGUF's metadata often names only the text's end (Gemma 3's
# <eos>), and a chat reply would otherwise run on past its turn.
TURN_ENDS = ("<end_of_turn>", "<|eot_id|>", "<|im_end|>", "<|end|>")


def turn_ends(tokenizer: Any) -> list[int]:
    """The ids of TURN_ENDS that the tokenizer's chat template writes and its vocabulary
    holds as one special token."""
    template = getattr(tokenizer, "chat_template", None)
    if not isinstance(template, str):
        return []
    found = []
    for text in TURN_ENDS:
        if text not in template:
            continue
        ids = tokenizer.convert_tokens_to_ids([text])
        if ids and isinstance(ids[0], int) and ids[0] != getattr(tokenizer, "unk_token_id", None):
            found.append(ids[0])
    return found


def read_config(path: Path, tokenizer: Any) -> ModelConfig:
    cfg = _read_json(path / "config.json")
    extra: list[int] = []
    gen_cfg = path / "generation_config.json"
    if gen_cfg.is_file():
        eos = _read_json(gen_cfg).get("eos_token_id")
        extra += eos if isinstance(eos, list) else ([eos] if eos is not None else [])
    if getattr(tokenizer, "eos_token_id", None) is not None:
        extra.append(int(tokenizer.eos_token_id))
    extra += turn_ends(tokenizer)
    try:
        return ModelConfig.from_hf(cfg, tuple(extra))
    except KeyError as exc:
        raise ModelError(f"{path / 'config.json'}: missing the key {exc.args[0]!r}") from exc
    except ValueError as exc:
        raise ModelError(f"{path}: {exc}") from exc


def load_weights(path: Path, cfg: ModelConfig, dtype: torch.dtype) -> LlamaModel:
    from safetensors.torch import load_file

    files = sorted(path.glob("*.safetensors"))
    state: dict[str, torch.Tensor] = {}
    try:
        for f in files:
            state.update(load_file(str(f)))
    except Exception as exc:
        raise ModelError(f"{path}: cannot read the weights: {exc}") from exc
    state = fuse_checkpoint(text_weights({k: v.to(dtype) for k, v in state.items()}))
    if cfg.offset_norms:
        state = offset_norms(state)
    if cfg.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    with torch.device("meta"):
        model = LlamaModel(cfg, init=False)
    try:
        model.load_state_dict(state, strict=not cfg.tie_word_embeddings, assign=True)
    except RuntimeError as exc:
        raise ModelError(f"{path}: weights do not match the architecture: {exc}") from exc
    if cfg.tie_word_embeddings:
        model.lm_head.weight = model.embed_tokens.weight
    leftover = [n for n, p in model.named_parameters() if p.is_meta]
    if leftover:
        raise ModelError(f"{path}: weights missing for {', '.join(leftover[:5])}")
    return model.eval()


# where a checkpoint keeps its decoder's weights: a causal LM's under model., a multimodal
# Gemma 3's under model.language_model. (transformers 5) or language_model.model.
TEXT_PREFIXES = ("model.language_model.", "language_model.model.", "language_model.", "model.")
VISION = ("vision_tower.", "multi_modal_projector.")  # a multimodal Gemma 3's other parts


def text_weights(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The decoder's weights under the engine's names (layers..., norm, lm_head), the
    prefixes gone and a multimodal checkpoint's vision weights left out."""
    out = {}
    for key, value in state.items():
        name = next((key.removeprefix(p) for p in TEXT_PREFIXES if key.startswith(p)), key)
        if not name.startswith(VISION):
            out[name] = value
    return out


def q8_cache(path: Path) -> Path:
    """Where the Q8_0 blocks made from the weights in `path` are kept: keyed by the
    directory and each weight file's name, size and modification time."""
    from gen.home import gen_home

    parts = [str(path.resolve())]
    for f in sorted(path.glob("*.safetensors")):
        stat = f.stat()
        parts.append(f"{f.name}:{stat.st_size}:{stat.st_mtime_ns}")
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    return gen_home() / "q8" / f"{path.name}-{key}.safetensors"


def q8_model(model: LlamaModel, path: Path, compiled: ModuleType) -> None:
    """`dtype q8`: the linear layers on Q8_0 blocks made from the float weights (gguf-py's
    rounding), cached in $GEN_HOME/q8 after the first load; the embedding lookups stay
    float32."""
    from safetensors.torch import load_file, save_file

    from gen.engine.quantised import q8_linears

    cache = q8_cache(path)
    blocks: dict[str, torch.Tensor] = {}
    if cache.is_file():
        try:
            blocks = load_file(str(cache))
        except Exception as exc:  # a torn or foreign file: made again below
            log.warning("gen: %s: unreadable (%s); making the Q8_0 blocks again", cache, exc)
    used = q8_linears(model, compiled, blocks)
    if any(blocks.get(name) is not made for name, made in used.items()):  # some made now
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        save_file(used, str(tmp))
        os.replace(tmp, cache)
    model.use_kernels(compiled)


@contextmanager
def one_thread() -> Iterator[None]:
    """PyTorch's operations on one thread for a while: packing blocks at load is bound by
    memory, one thread does it as fast, and where other processes keep the cores busy
    every parallel step waits for its second thread (the bundled model's packing: 0.1 s on
    one thread, 0.3 to 1.1 s on two, on a shared 2-core machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def own_dtype(spec: ModelSpec, config: EngineConfig) -> str:
    """The dtype a model runs in when none is asked for: a GGUF file's own blocks (gguf)
    where the kernels can run them (turned on, and kernels.supported(): nothing is built
    to answer), float32 otherwise. A GGUF whose kernels then fail to build runs float32
    (load_model)."""
    gguf = spec.kind == "gguf" and config.kernels and kernels.supported()
    return "gguf" if gguf else "float32"


def trim_heap() -> None:
    """Hand the C heap's free pages back to the system (glibc's malloc_trim). Parsing a large
    tokenizer frees most of what it allocates (Gemma 3's: 290 MB taken, 100 MB kept), and
    glibc would otherwise keep the rest resident for the life of the process."""
    with contextlib.suppress(OSError, AttributeError):  # not glibc: its allocator decides
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def load_model(
    spec: str | ModelSpec, config: EngineConfig | None = None, packed: bool = True
) -> LoadedModel:
    """The model in config's dtype, or where none is given in own_dtype's (gguf for a
    GGUF file, float32 otherwise): float32; gguf (a GGUF file's own
    quantised blocks, read in place by the kernels: the same weights as float32 on that
    file, from a sixth of the bytes; Q4 blocks summed in their own order); q8 (Q8_0
    blocks made from float weights at load, cached in $GEN_HOME/q8: a Hugging Face
    directory in about a quarter of the bytes); or int8
    (int8 weights and dynamically quantised activations in the linear layers, but the
    MLP's down projection on prompts; the embedding, norms, attention and KV cache stay
    float32).
    packed: run the engine's compiled kernels (gen.engine.kernels, unless config.kernels
    is off; where they cannot be built, oneDNN's packed linear layers). Faster; float32
    results stay within rounding of the plain PyTorch model, and batch-invariant."""
    config = config or EngineConfig()
    ms = resolve(spec) if isinstance(spec, str) else spec
    dtype = config.dtype or own_dtype(ms, config)
    if dtype == "int8" and not packed_linears.int8_available():
        raise ModelError("dtype int8 needs PyTorch's fbgemm quantized engine (x86 CPUs)")
    if dtype == "gguf" and ms.kind != "gguf":
        raise ModelError(
            f"{ms.name}: dtype gguf runs a GGUF file's own blocks, and this model is not a "
            ".gguf file (float32 or int8 run it)"
        )
    path = prepare(ms, weights=dtype != "gguf")
    tokenizer = load_tokenizer(path)
    trim_heap()
    cfg = read_config(path, tokenizer)
    if dtype == "gguf":
        compiled = kernels.load() if config.kernels else None
        if compiled is not None and ms.path is not None:
            with one_thread():  # (it completes cfg from the file it maps: gguf_config)
                model, _ = load_gguf_model(ms.path, cfg, compiled)
            return LoadedModel(ms.name, path, model.cfg, model, tokenizer, dtype)
        # (asked for, it is said; the default falls back quietly: the kernels' own warning
        # has said why they are not there)
        log.log(
            logging.WARNING if config.dtype == "gguf" else logging.DEBUG,
            "gen: dtype gguf needs the CPU kernels (%s); running float32 on the same weights",
            kernels.error() or "turned off",
        )
        dtype = "float32"
        path = prepare(ms)
    if ms.kind == "gguf" and ms.path is not None:  # what transformers' config leaves out
        cfg = gguf_config(ms.path, cfg)
    model = load_weights(path, cfg, torch.float32)
    if dtype == "q8":
        compiled = kernels.load() if config.kernels else None
        if compiled is not None:
            q8_model(model, path, compiled)
            return LoadedModel(ms.name, path, cfg, model, tokenizer, dtype)
        log.warning(
            "gen: dtype q8 needs the CPU kernels (%s); running float32", kernels.error() or "off"
        )
        dtype = "float32"
    if dtype == "int8" or packed:
        compiled = kernels.load() if config.kernels else None
        if dtype == "int8" or compiled is not None or packed_linears.available():
            packed_linears.pack_linears(model, int8=dtype == "int8", kernels=compiled)
            model.use_kernels(compiled)
            model.split_prompts = dtype == "int8"
    return LoadedModel(ms.name, path, cfg, model, tokenizer, dtype)
