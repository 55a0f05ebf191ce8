"""TextOffsets: a text completion's tokens against the text sent in pieces, with text held
back (a possible stop string's start) and characters split across byte tokens."""

from __future__ import annotations

from gen.sampling import TokenLogprob
from gen.server.openai.logprobs import TextOffsets, completion_logprobs


def token_bytes(token_id: int) -> bytes:
    return bytes([token_id])


def items(text: str) -> list[TokenLogprob]:
    return [TokenLogprob(b, -0.5) for b in text.encode()]


def test_held_back_text_holds_its_tokens_back_and_offsets_stay_right() -> None:
    offsets = TextOffsets(token_bytes, offset=3)  # after an echo of three characters
    # the engine's steps: "a", "\n" (held: it may start the stop "\n\n"), "b" (releases it)
    first = offsets.take("a", items("a"))
    held = offsets.take("", items("\n"))
    released = offsets.take("\nb", items("b"))
    assert [(p[0].token_id, p[1]) for p in first] == [(ord("a"), 3)]
    assert held == []
    assert [(chr(p[0].token_id), p[1]) for p in released] == [("\n", 4), ("b", 5)]
    assert offsets.rest() == []


def test_a_stop_strings_tokens_go_out_at_the_end() -> None:
    offsets = TextOffsets(token_bytes)
    assert offsets.take("x", items("x")) and offsets.take("", items("\n")) == []
    rest = offsets.rest()  # the stop string "\n\n" completed: its text is cut
    assert [(chr(p[0].token_id), p[1]) for p in rest] == [("\n", 1)]


def test_a_character_split_across_tokens() -> None:
    offsets = TextOffsets(token_bytes)
    pieces = offsets.take("", items("天")[:2]) + offsets.take("天🌸", items("天")[2:] + items("🌸"))
    assert [p[1] for p in pieces] == [0, 0, 0, 1, 1, 1, 1]  # each byte in its character
    lp = completion_logprobs(pieces, token_bytes)
    assert b"".join(bytes([p[0].token_id]) for p in pieces).decode() == "天🌸"
    assert lp.text_offset == [0, 0, 0, 1, 1, 1, 1]


def test_a_token_the_text_leaves_out_goes_out_at_once() -> None:
    def spelled(token_id: int) -> bytes:
        return b"<eos>" if token_id == 0 else bytes([token_id])

    offsets = TextOffsets(spelled)
    placed = offsets.take("ab", [TokenLogprob(97, -1), TokenLogprob(0, -1), TokenLogprob(98, -1)])
    assert [(p[0].token_id, p[1]) for p in placed] == [(97, 0), (0, 1), (98, 1)]
