"""A finished document as the runs API answers it: the Markdown as written, or one
standalone HTML page (CommonMark with tables; raw HTML in the text is escaped, never run)."""

from __future__ import annotations

from html import escape

from markdown_it import MarkdownIt

_STYLE = """
body{font:17px/1.6 system-ui,-apple-system,"Segoe UI",sans-serif;max-width:46rem;
margin:2rem auto;padding:0 1rem;color:#1d1f23;background:#fff}
h1,h2,h3{line-height:1.25}pre,code{background:#f3f4f6;border-radius:4px}
pre{padding:.75rem;overflow:auto}table{border-collapse:collapse}
td,th{border:1px solid #d0d4da;padding:.3rem .6rem}
@media (prefers-color-scheme:dark){body{background:#16181c;color:#e4e6ea}
pre,code{background:#23262c}}
"""


def _renderer() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False}).enable("table").enable("strikethrough")


def markdown_html(markdown: str, title: str) -> str:
    body = _renderer().render(markdown)
    return (
        '<!doctype html>\n<html><head><meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>{_STYLE}</style></head>\n"
        f"<body>\n{body}</body></html>\n"
    )


def wants_html(accept: str) -> bool:
    """Whether an Accept header prefers text/html to Markdown (q-values honoured)."""
    best: dict[str, float] = {}
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        best[media.lower()] = max(q, best.get(media.lower(), 0.0))
    html = best.get("text/html", 0.0)
    markdown = max(best.get("text/markdown", 0.0), best.get("text/plain", 0.0))
    return html > 0 and html > markdown
