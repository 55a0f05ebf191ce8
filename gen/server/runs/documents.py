"""A finished document as the runs API answers it: the Markdown as written, or one
standalone HTML page (gen.export.html's, without the table of contents)."""

from __future__ import annotations

from gen.export.html import markdown_html

__all__ = ["markdown_html", "wants_html"]


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
