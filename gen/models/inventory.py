"""What a GGUF file holds and how gen would run it, from its header alone (`gen models
show`): the architecture and sizes, each tensor type with its count and bytes, whether the
kernels read it in place or it becomes float32 at load (and the memory that takes), and
what the file asks for that gen does not run."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from gen.models.chat_templates import CHAT_TEMPLATES
from gen.models.gguf_header import read_header
from gen.models.gguf_support import dequantisable, problems, type_name

FLOAT32 = 0  # ggml's type number of F32


@dataclass(frozen=True, slots=True)
class TypeUse:
    """The tensors of one ggml type: how many, their bytes in the file, how they run
    ("kernel": read in place by the kernels; "float32": as stored; "dequantised":
    float32 made at load; "refused") and the bytes they then hold."""

    name: str
    tensors: int
    file_bytes: int
    runs_as: str
    resident_bytes: int


@dataclass(frozen=True, slots=True)
class Inventory:
    path: Path
    architecture: str
    context_length: int | None
    parameters: int
    layers: int | None
    kv_bytes_per_token: int | None  # float32 keys and values, every layer
    chat_template: str  # the file's, gen's for its architecture, or none
    types: tuple[TypeUse, ...]
    problems: tuple[str, ...]  # empty: gen runs it

    @property
    def resident_bytes(self) -> int:
        return sum(t.resident_bytes for t in self.types)


def inventory(path: Path) -> Inventory:
    """The file's inventory; `runs_as` by the kernels this machine takes (where it takes
    none, every quantised type is dequantised)."""
    from gen.engine import kernels
    from gen.engine.quantised import runs

    header = read_header(path)
    meta = header.metadata
    arch = str(meta.get("general.architecture", ""))
    native = kernels.supported()
    counts: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])  # tensors, bytes, elements
    for t in header.tensors:
        elements = 1
        for n in t.shape:
            elements *= n
        entry = counts[t.kind]
        entry[0], entry[1], entry[2] = entry[0] + 1, entry[1] + t.nbytes, entry[2] + elements
    types = []
    for kind, (n, size, elements) in sorted(counts.items(), key=lambda kv: -kv[1][1]):
        if kind == FLOAT32:
            use = TypeUse(type_name(kind), n, size, "float32", size)
        elif native and runs(kind):
            use = TypeUse(type_name(kind), n, size, "kernel", size)
        elif dequantisable(kind):
            use = TypeUse(type_name(kind), n, size, "dequantised", 4 * elements)
        else:
            use = TypeUse(type_name(kind), n, size, "refused", 0)
        types.append(use)
    return Inventory(
        path=path,
        architecture=arch,
        context_length=header.context_length,
        parameters=sum(e for _, _, e in counts.values()),
        layers=_int(meta.get(f"{arch}.block_count")),
        kv_bytes_per_token=_kv_bytes(meta, arch),
        chat_template=_template(meta, arch),
        types=tuple(types),
        problems=tuple(problems(header)),
    )


def _template(meta: dict[str, object], arch: str) -> str:
    if isinstance(meta.get("tokenizer.chat_template"), str):
        return "the file's"
    if arch in CHAT_TEMPLATES:
        return f"none in the file: gen's for {arch}"
    return "none (chat prompts need one)"


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _kv_bytes(meta: dict[str, object], arch: str) -> int | None:
    layers = _int(meta.get(f"{arch}.block_count"))
    heads = _int(meta.get(f"{arch}.attention.head_count"))
    kv = _int(meta.get(f"{arch}.attention.head_count_kv")) or heads
    width = _int(meta.get(f"{arch}.attention.key_length"))
    embedding = _int(meta.get(f"{arch}.embedding_length"))
    if width is None and embedding and heads:
        width = embedding // heads
    if not (layers and kv and width):
        return None
    return 2 * layers * kv * width * 4
