"""`gen models`: list the bundled and converted models, or prepare one."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gen.cli.common import default_model
from gen.errors import GenError


def add_command(sub: Any) -> None:
    m = sub.add_parser("models", help="list or prepare models")
    m.add_argument("action", nargs="?", choices=["list", "prepare"], default="list")
    m.add_argument("spec", nargs="?", default=None, help="model spec for prepare")
    m.set_defaults(handler=cmd_models)


def cmd_models(args: argparse.Namespace) -> int:
    from gen.models import BUNDLED_NAME, gen_home, prepare, resolve
    from gen.models.store import cached_models

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
