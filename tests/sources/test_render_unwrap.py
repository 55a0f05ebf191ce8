"""The block a prompt carries writes each paragraph on one line (a model shown wrapped lines
writes wrapped lines), keeps list items, headings and table rows on their own lines, and
joins Chinese without a space."""

from __future__ import annotations

from gen.sources.render import unwrap


def test_paragraphs_are_unwrapped_and_blocks_keep_their_lines() -> None:
    text = (
        "Kessling runs the\nnetwork of the city.\n\n- one\n- two\n| a | b |\n| c | d |\n"
        "## Heading\n上海的\n电车很快。"
    )
    assert unwrap(text) == (
        "Kessling runs the network of the city.\n\n- one\n- two\n| a | b |\n| c | d |\n"
        "## Heading\n上海的电车很快。"
    )
