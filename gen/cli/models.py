"""`gen models`: list the bundled and converted models, show what a GGUF file needs, or
prepare one."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from gen.cli.common import default_model
from gen.errors import GenError

if TYPE_CHECKING:
    from gen.models.inventory import Inventory

EXAMPLES = """examples:
  gen models                                   the bundled model and the converted ones
  gen models show smollm2-135m                 what a GGUF file holds and how gen runs it
  gen models show hf:ORG/REPO/FILE.gguf        a file from the local Hugging Face cache
  gen models prepare ~/models/model.gguf       convert its tokenizer (and weights) now
"""

RUNS_AS = {
    "kernel": "read in place by the kernels",
    "float32": "float32, as stored",
    "dequantised": "dequantised to float32 at load",
    "refused": "gen cannot read it",
}


def add_command(sub: Any) -> None:
    m = sub.add_parser(
        "models",
        help="list, show or prepare models",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    m.add_argument("action", nargs="?", choices=["list", "show", "prepare"], default="list")
    m.add_argument(
        "spec",
        nargs="?",
        default=None,
        help="model spec for show and prepare (default: $GEN_MODEL)",
    )
    m.set_defaults(handler=cmd_models)


def cmd_models(args: argparse.Namespace) -> int:
    from gen.models import BUNDLED_NAME, gen_home, prepare, resolve
    from gen.models.store import cached_models

    if args.action == "show":
        return show(args.spec or default_model())
    if args.action == "prepare":
        spec = args.spec or default_model()
        print(
            f"preparing {spec} (a GGUF is converted once; this can take a minute) ...",
            file=sys.stderr,
        )
        path = prepare(resolve(spec))
        print(path)
        return 0
    try:
        bundled = str(resolve(BUNDLED_NAME).path)
    except GenError as exc:
        bundled = f"unavailable: {exc}"
    print(f"{BUNDLED_NAME}\t(bundled) {bundled}")
    for path in cached_models():
        print(f"{path.name}\t(converted) {path}")
    print(f"# cache: {gen_home() / 'models'}", file=sys.stderr)
    return 0


def show(spec: str) -> int:
    """Print what the GGUF file `spec` names holds and how gen would run it; 1 when gen
    cannot run it."""
    from gen.errors import ModelError
    from gen.models import resolve
    from gen.models.inventory import inventory

    ms = resolve(spec)
    if ms.kind != "gguf" or ms.path is None:
        raise ModelError(f"{spec}: `gen models show` reads GGUF files; this is a {ms.kind} model")
    found = inventory(ms.path)
    print("\n".join(report(found)))
    return 1 if found.problems else 0


def report(inv: Inventory) -> list[str]:
    lines = [
        f"file           {inv.path}",
        f"architecture   {inv.architecture or '(none)'}",
        f"context        {inv.context_length or 'not given'} tokens",
        f"parameters     {_count(inv.parameters)}"
        + (f" in {inv.layers} layers" if inv.layers else ""),
        f"chat template  {inv.chat_template}",
        "",
        f"{'type':<8}{'tensors':>8}{'in the file':>14}{'held':>12}  runs as",
    ]
    for t in inv.types:
        held = _bytes(t.resident_bytes) if t.runs_as != "refused" else "-"
        lines.append(
            f"{t.name:<8}{t.tensors:>8}{_bytes(t.file_bytes):>14}{held:>12}  {RUNS_AS[t.runs_as]}"
        )
    kv = (
        f" + {_bytes(inv.kv_bytes_per_token)} of KV cache a token" if inv.kv_bytes_per_token else ""
    )
    lines += ["", f"resident       about {_bytes(inv.resident_bytes)}{kv}"]
    if inv.problems:
        lines += ["", "gen cannot run this file:"] + [f"  - {p}" for p in inv.problems]
    else:
        lines.append("runs           yes")
    return lines


def _bytes(n: int) -> str:
    for unit, size in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _count(n: int) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"
