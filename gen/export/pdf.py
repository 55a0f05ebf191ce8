"""The HTML export printed to PDF by WeasyPrint (Pango lays the text out, so Chinese, Thai and
emoji come out as text with whatever fonts fontconfig finds). Nothing is fetched: only data:
URLs are read."""

from __future__ import annotations

from gen.export.errors import ExportError

INSTALL = (
    "PDF export needs WeasyPrint and the Pango libraries: `pip install weasyprint`, and on "
    "Debian/Ubuntu `apt-get install libpango-1.0-0 libpangoft2-1.0-0 fonts-noto-cjk` "
    "(`make install` does both)"
)


def pdf_bytes(html: str) -> bytes:
    try:
        from weasyprint import HTML
        from weasyprint.urls import URLFetcher
    except (ImportError, OSError) as exc:  # OSError: a shared library Pango needs is missing
        raise ExportError(f"{INSTALL} ({type(exc).__name__}: {exc})") from None
    fetcher = URLFetcher(allowed_protocols=("data",))
    return HTML(string=html, url_fetcher=fetcher).write_pdf()  # no target: the bytes
