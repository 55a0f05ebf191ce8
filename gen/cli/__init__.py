"""`gen` commands, one module per command group. The only package that prints for the user
or exits the process."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gen.cli.common import quiet_libraries
from gen.errors import GenError

EPILOG = """examples:
  gen run pipelines/quickstart.yaml --stream
  gen run pipelines/tech-report.yaml --set topic="The printing press"
  gen validate pipelines/zh-article.yaml
  gen batch pipelines/quickstart.yaml --inputs topics.csv
  gen batch --openai requests.jsonl
  gen export outputs/quickstart/RUN_ID --to html,docx,pdf
  gen generate "Translate to Chinese: Good morning." --temperature 0
  gen models prepare smollm2-135m
  gen serve --port 8000
"""


def build_parser() -> argparse.ArgumentParser:
    from gen.cli import batch, bench, export, generate, models, pipeline, serve

    p = argparse.ArgumentParser(
        prog="gen",
        description="Declarative long-document generation with a built-in decode engine.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (pipeline, batch, export, generate, serve, models, bench):
        module.add_command(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    quiet_libraries()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except GenError as exc:
        print(f"error: {exc}" if not getattr(exc, "location", "") else str(exc), file=sys.stderr)
        return exc.exit_code
    except ValueError as exc:  # invalid settings from the command line
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
