"""A Markdown document as one standalone HTML page: CSS inlined, nothing fetched from a
network (an image becomes a link to it), raw HTML in the text escaped, never run. With
`toc=True` headings get anchors and a linked table of contents; a citation marker's numbers
link to their References entries. The PDF is printed from this."""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from html import escape
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from gen.export.references import anchor, find_references, split_markers
from gen.text.markdown import Heading, headings, parser

_STYLE = """
body{font:17px/1.6 system-ui,-apple-system,"Segoe UI","Noto Sans","DejaVu Sans",
"Noto Sans CJK SC","Noto Sans Thai",sans-serif;max-width:46rem;
margin:2rem auto;padding:0 1rem;color:#1d1f23;background:#fff}
h1,h2,h3{line-height:1.25}pre,code{background:#f3f4f6;border-radius:4px}
pre{padding:.75rem;overflow:auto}table{border-collapse:collapse}
td,th{border:1px solid #d0d4da;padding:.3rem .6rem}
blockquote{margin:1rem 0;padding:0 1rem;border-left:3px solid #d0d4da;color:#50555e}
nav.toc{border:1px solid #d0d4da;border-radius:6px;padding:.25rem 1.25rem;margin:1.5rem 0}
a.cite{text-decoration:none}
nav.toc h2{font-size:1rem;margin:.5rem 0}nav.toc ol{list-style:none;padding-left:1.1rem;
margin:.15rem 0}nav.toc>ol{padding-left:0}nav.toc a{text-decoration:none}
@media screen and (prefers-color-scheme:dark){body{background:#16181c;color:#e4e6ea}
pre,code{background:#23262c}a{color:#8ab4f8}blockquote{color:#a8adb6}}
@page{size:A4;margin:2cm 2cm 2.2cm;
@bottom-center{content:counter(page);font:9pt sans-serif;color:#666}}
@media print{body{font-size:11pt;max-width:none;margin:0;padding:0}a{color:inherit}
h1,h2,h3,h4{break-after:avoid}pre{white-space:pre-wrap}
nav.toc a::after{content:leader('.') target-counter(attr(href),page)}}
"""

_CONTENTS = {"zh": "目录", "ja": "目次", "ko": "목차", "th": "สารบัญ"}


def markdown_html(markdown: str, title: str, *, toc: bool = False, lang: str | None = None) -> str:
    """The page for `markdown`; `lang` is guessed from the text when not given."""
    lang = lang or guess_lang(markdown)
    md = _renderer()
    env: MutableMapping[str, Any] = {}
    tokens = md.parse(markdown, env)
    _link_citations(tokens)
    if toc:
        body = _with_contents(md, tokens, env, _CONTENTS.get(lang, "Contents"))
    else:
        body = md.renderer.render(tokens, md.options, env)
    return (
        f'<!doctype html>\n<html lang="{escape(lang)}"><head><meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>{_STYLE}</style></head>\n"
        f"<body>\n{body}</body></html>\n"
    )


def guess_lang(text: str) -> str:
    """A BCP 47 tag for the script most of the text is in (an alphabetic word spans a few
    letters, a Han character is about a word, so letters count a third)."""
    counts = {"zh": 0.0, "ja": 0.0, "ko": 0.0, "th": 0.0, "en": 0.0}
    for ch in text:
        o = ord(ch)
        if 0x3040 <= o <= 0x30FF:
            counts["ja"] += 1
        elif 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF:
            counts["zh"] += 1
        elif 0xAC00 <= o <= 0xD7AF:
            counts["ko"] += 1
        elif 0x0E00 <= o <= 0x0E7F:
            counts["th"] += 1 / 3
        elif ch.isalpha():
            counts["en"] += 1 / 3
    if counts["ja"]:  # kana mean Japanese, whatever share of the text is Han
        counts["ja"] += counts.pop("zh")
    return max(counts, key=lambda k: counts[k]) if any(counts.values()) else "en"


def _renderer() -> MarkdownIt:
    md = parser()
    md.add_render_rule("image", _image_as_link)
    return md


def _image_as_link(
    self: Any, tokens: Sequence[Token], idx: int, options: Any, env: MutableMapping[str, Any]
) -> str:
    """An image would be fetched when the page opens: link to it instead (data: URIs, which
    fetch nothing, stay images)."""
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = escape(self.renderInlineAsText(token.children or [], options, env))
    if src.startswith("data:image/"):
        return f'<img src="{escape(src)}" alt="{alt}">'
    return f'<a href="{escape(src)}">{alt or escape(src)}</a>'


def _link_citations(tokens: list[Token]) -> None:
    """Each References entry gets its anchor and each marker before them (outside code and
    links) becomes `[<a href="#ref-2">2</a>, <a href="#ref-5">5</a>]`."""
    refs = find_references(tokens)
    if not refs.entries:
        return
    for number, index in refs.entries.items():
        tokens[index].attrSet("id", anchor(number))
    for token in tokens[: refs.body]:
        if token.type == "inline" and token.children:
            token.children = _linked(token.children, refs.entries)


def _linked(children: list[Token], known: dict[int, int]) -> list[Token]:
    out: list[Token] = []
    links = 0  # inside a link's text: no link in a link
    for child in children:
        links += {"link_open": 1, "link_close": -1}.get(child.type, 0)
        if child.type != "text" or links:
            out.append(child)
            continue
        for piece in split_markers(child.content, known):
            if isinstance(piece, str):
                out.append(Token("text", "", 0, content=piece))
                continue
            out.append(Token("text", "", 0, content="["))
            for i, number in enumerate(piece):
                if i:
                    out.append(Token("text", "", 0, content=", "))
                link = Token("link_open", "a", 1)
                link.attrs = {"class": "cite", "href": f"#{anchor(number)}"}
                out.append(link)
                out.append(Token("text", "", 0, content=str(number)))
                out.append(Token("link_close", "a", -1))
            out.append(Token("text", "", 0, content="]"))
    return out


def _with_contents(
    md: MarkdownIt, tokens: list[Token], env: MutableMapping[str, Any], label: str
) -> str:
    """Anchors on every heading; the table of contents after the title (a lone first `#`
    heading, which it does not list) or else at the top."""
    found = headings(tokens)
    opens = [t for t in tokens if t.type == "heading_open"]
    for token, heading in zip(opens, found, strict=True):
        token.attrSet("id", heading.anchor)
    titled = bool(tokens) and tokens[0].type == "heading_open" and tokens[0].tag == "h1"
    titled = titled and sum(h.level == 1 for h in found) == 1
    head, rest = (tokens[:3], tokens[3:]) if titled else ([], tokens)
    entries = found[1:] if titled else found
    render = md.renderer.render
    contents = _contents(entries, label) if entries else ""
    return render(head, md.options, env) + contents + render(rest, md.options, env)


def _contents(entries: list[Heading], label: str) -> str:
    """Nested lists, one per heading level below the shallowest listed (a heading more than
    one level below the one before it nests one level deeper, so the lists stay valid)."""
    top = min(h.level for h in entries)
    lines = [f'<nav class="toc" id="contents">\n<h2>{escape(label)}</h2>\n<ol>']
    depth = top
    for i, h in enumerate(entries):
        level = max(top, min(h.level, depth + 1)) if i else top
        if i and level > depth:
            lines.append("<ol>")
        elif i:
            lines.append("</li>" + "</ol></li>" * (depth - level))
        depth = level
        lines.append(f'<li><a href="#{escape(h.anchor)}">{escape(h.text)}</a>')
    lines.append("</li>" + "</ol></li>" * (depth - top) + "</ol>\n</nav>\n")
    return "\n".join(lines)
