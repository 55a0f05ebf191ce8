from __future__ import annotations

from gen.sources.document import Location
from gen.sources.formats.markdown import blocks

TEXT = """# Handbook

Intro line one
and line two.

## Pricing **tiers**

### Tiers

- Basic: €9
- Pro: €29

```
# not a heading
```

## Support

Mail us.

Setext title
------------
Under it.
"""


def test_blocks_keep_their_heading_path_and_lines() -> None:
    got = [(b.text, b.location) for b in blocks(TEXT.encode())]
    assert got == [
        ("Intro line one\nand line two.", Location(None, ("Handbook",), "line", 3, 4)),
        (
            "- Basic: €9\n- Pro: €29",
            Location(None, ("Handbook", "Pricing tiers", "Tiers"), "line", 10, 11),
        ),
        (
            "```\n# not a heading\n```",
            Location(None, ("Handbook", "Pricing tiers", "Tiers"), "line", 13, 15),
        ),
        ("Mail us.", Location(None, ("Handbook", "Support"), "line", 19, 19)),
        ("Under it.", Location(None, ("Handbook", "Setext title"), "line", 23, 23)),
    ]
    assert got[1][1].label() == '"Handbook > Pricing tiers > Tiers", lines 10-11'


def test_windows_line_ends_and_a_bom_keep_the_line_numbers() -> None:
    data = "\ufeff# 标题\r\n\r\n第一段。\r\n第二行。\r\n".encode()
    (block,) = blocks(data)
    assert block.text == "第一段。\n第二行。"
    assert block.location == Location(None, ("标题",), "line", 3, 4)


def test_text_before_any_heading_has_no_heading_path() -> None:
    (block,) = blocks(b"Just a note.\n")
    assert block.location.heading == () and block.location.label() == "line 1"
