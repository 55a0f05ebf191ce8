"""`gen export RUN_DIR --to html,docx,pdf`: a finished run's document.md in other formats,
written beside it; each written path is printed on stdout."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

EXAMPLES = """examples:
  gen export outputs/quickstart/20250101-120000-abc123 --to html
  gen export RUN_DIR --to html,docx,pdf
  gen export RUN_DIR --to docx --to pdf
"""


def add_command(sub: Any) -> None:
    from gen.export import FORMATS

    e = sub.add_parser(
        "export",
        help="write a run's document as html, docx or pdf",
        description="Write RUN_DIR/document.md as document.<format> beside it (atomically).\n"
        "HTML is one standalone page with a table of contents that fetches nothing;\n"
        "the PDF is printed from it.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    e.add_argument("run_dir", metavar="RUN_DIR", type=Path, help="a run directory of gen run")
    e.add_argument(
        "--to",
        "-t",
        action="append",
        required=True,
        metavar="FORMATS",
        help=f"formats, comma-separated or the option repeated: {', '.join(FORMATS)} "
        "(md is the document itself)",
    )
    e.set_defaults(handler=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from gen.export import FORMATS, ExportError, export_document, parse_formats

    if not parse_formats(args.to):
        raise ExportError(f"--to names no format; choose from {', '.join(FORMATS)}", exit_code=2)
    for path in export_document(args.run_dir, args.to):
        print(path)
    return 0
