from __future__ import annotations

import pytest

from gen.sources.document import Location, Unreadable
from gen.sources.formats.jsonl import blocks


def test_each_record_is_a_block_at_its_line() -> None:
    data = (
        '{"id": 7, "note": "Till outage", "tags": ["pos", "certs"], "empty": null}\n'
        '\n"a bare string"\n{"城市": "凯斯林"}\n'
    )
    got = [(b.text, b.location) for b in blocks(data.encode())]
    assert got == [
        ('id: 7; note: Till outage; tags: ["pos", "certs"]', Location(None, (), "line", 1, 1)),
        ("a bare string", Location(None, (), "line", 3, 3)),
        ("城市: 凯斯林", Location(None, (), "line", 4, 4)),
    ]


def test_a_line_that_is_not_json_is_named() -> None:
    with pytest.raises(Unreadable) as raised:
        blocks(b'{"a": 1}\n{"a": \n')
    assert raised.value.line == 2
    assert raised.value.message.startswith("not JSON: Expecting value")
