from __future__ import annotations

from gen.sources.document import Location
from gen.sources.formats.html import blocks

PAGE = """<!DOCTYPE html>
<html><head><title>Minutes</title><style>p { color: red }</style>
<script>var tracking = "do not read";</script></head>
<body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<h1>Board minutes</h1>
<div>Loose <b>bold</b> text<br>on two lines<p>A paragraph with <a href="#">a link</a>.</p></div>
<h2>Fares</h2>
<ul><li>Single: €2.10</li><li>Passes<ul><li>Monthly: €49</li></ul></li></ul>
<h3>Table</h3>
<table><tr><th>Line</th><th>Riders</th></tr><tr><td>3</td><td>15.2 m</td></tr></table>
<h2>Energy</h2>
<!-- a comment -->
<p>Halden Wind from 1 July 2025.<script>alert(1)</script></p>
<form><p>Sign up for news</p></form>
</body></html>
"""


def test_text_under_its_heading_path_without_scripts_styles_or_navigation() -> None:
    got = [(b.text, b.location.heading) for b in blocks(PAGE.encode())]
    board = ("Board minutes",)
    fares, table = (*board, "Fares"), (*board, "Fares", "Table")
    assert got == [
        ("Loose bold text on two lines", board),
        ("A paragraph with a link.", board),
        ("Single: €2.10", fares),
        ("Passes", fares),
        ("Monthly: €49", fares),
        ("Line | Riders", table),
        ("3 | 15.2 m", table),
        ("Halden Wind from 1 July 2025.", ("Board minutes", "Energy")),
    ]
    assert all(b.location == Location(heading=b.location.heading) for b in blocks(PAGE.encode()))


def test_a_declared_encoding_is_honoured() -> None:
    page = '<html><head><meta charset="windows-1252"></head><body><p>Prix: 2,10 €</p></body></html>'
    (block,) = blocks(page.encode("cp1252"))
    assert block.text == "Prix: 2,10 €"


def test_utf8_without_a_declaration_and_an_xml_declaration() -> None:
    page = '<?xml version="1.0" encoding="utf-8"?><html><body><h1>报告</h1><p>第一段。</p></body>'
    (block,) = blocks(page.encode())
    assert (block.text, block.location.heading) == ("第一段。", ("报告",))


def test_an_empty_page_has_no_blocks() -> None:
    assert blocks(b"") == [] and blocks(b"<html><body><nav>menu</nav></body></html>") == []
