"""Incremental detokenization: never half a character, never prompt text, joined == decode."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from gen.engine import Detokenizer
from tests.fakes import ByteTokenizer, CountingTokenizer

REPLACEMENT = "\ufffd"

TEXTS = {
    "chinese": "你好，世界。今天天气很好！我们去公园散步吧。",
    "emoji_zwj": "Family 👩‍👩‍👧‍👦 and coder 🧑‍💻, again 👩‍👩‍👧‍👦🧑‍💻!",
    "variation_selectors": "I ❤️ you ☺︎ and ❤ plain, ✌🏽 toned.",
    "thai": "สวัสดีครับ ภาษาไทยเขียนยากไหม",
    "burmese": "မင်္ဂလာပါ မြန်မာဘာသာ",
    "mixed": "Hello 世界! 🎉 ok ภาษา, ပါ and ❤️ done.",
}
CHUNKS = [1, 2, 3, 7]


def run(
    tokenizer: Any,
    ids: Sequence[int],
    chunk: int,
    prompt: Sequence[int] = (),
    skip: bool = True,
) -> tuple[list[str], str]:
    detok = Detokenizer(tokenizer, prompt, skip_special_tokens=skip)
    pushes = [detok.push(ids[i : i + chunk]) for i in range(0, len(ids), chunk)]
    return pushes, detok.flush()


def check(
    tokenizer: Any,
    ids: Sequence[int],
    chunk: int,
    prompt: Sequence[int] = (),
    skip: bool = True,
) -> list[str]:
    """Run the detokenizer and assert its contract; returns the pushes."""
    full = tokenizer.decode(list(ids), skip_special_tokens=skip)
    pushes, tail = run(tokenizer, ids, chunk, prompt, skip)
    assert "".join(pushes) + tail == full
    offset = 0
    for text in pushes:
        for j, ch in enumerate(text):
            if ch == REPLACEMENT:  # only where the full decode has one
                assert full[offset + j] == REPLACEMENT, (pushes, full)
        offset += len(text)
    if REPLACEMENT not in full:
        assert not any(REPLACEMENT in p for p in pushes), pushes
    return pushes


# -- byte tokenizer ----------------------------------------------------------------------


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("name", sorted(TEXTS))
def test_byte_tokenizer_texts(byte_tokenizer: ByteTokenizer, name: str, chunk: int) -> None:
    ids = byte_tokenizer.encode(TEXTS[name])
    pushes = check(byte_tokenizer, ids, chunk)
    assert "".join(pushes) == TEXTS[name]  # valid text: everything is out before the flush


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("name", ["chinese", "emoji_zwj", "mixed"])
def test_byte_tokenizer_prompt_does_not_leak(
    byte_tokenizer: ByteTokenizer, name: str, chunk: int
) -> None:
    prompt = byte_tokenizer.encode("User: say it 🧑‍💻 你好\nAssistant:")
    ids = byte_tokenizer.encode(TEXTS[name])
    pushes = check(byte_tokenizer, ids, chunk, prompt=prompt)
    assert "".join(pushes) == TEXTS[name]


@pytest.mark.parametrize("chunk", CHUNKS)
def test_byte_tokenizer_prompt_ending_inside_a_character(
    byte_tokenizer: ByteTokenizer, chunk: int
) -> None:
    """The prompt holds the first bytes of a character (a continuation): text still streams."""
    t = byte_tokenizer
    ids = t.encode("说：👩‍👩‍👧‍👦 好的, all right then")
    cut = len(t.encode("说：")) + 2
    pushes = check(t, ids[cut:], chunk, prompt=ids[:cut])
    assert "".join(pushes).endswith("all right then")  # not all held back for the flush


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("skip", [True, False])
def test_byte_tokenizer_special_tokens_in_the_middle(
    byte_tokenizer: ByteTokenizer, skip: bool, chunk: int
) -> None:
    t = byte_tokenizer
    ids = [
        t.BOS,
        *t.encode("你好"),
        t.SEP,
        *t.encode("👩‍👩‍👧‍👦"),
        t.SEP,
        t.SEP,
        *t.encode(" ok ❤️"),
        t.EOS,
        *t.encode("ภาษา"),
    ]
    check(t, ids, chunk, prompt=[*t.encode("prompt <sep>"), t.SEP], skip=skip)
    full = t.decode(ids, skip_special_tokens=skip)
    assert ("<sep>" in full) is not skip


@pytest.mark.parametrize("skip", [True, False])
def test_special_token_inside_a_character(byte_tokenizer: ByteTokenizer, skip: bool) -> None:
    """A special id between the bytes of one character: skipped, the bytes join up again."""
    t = byte_tokenizer
    zhong = t.encode("中")
    ids = [zhong[0], t.SEP, *zhong[1:], *t.encode("!")]
    pushes = check(t, ids, 1, skip=skip)
    if skip:
        assert "".join(pushes) == "中!"
    else:
        assert pushes[1] == REPLACEMENT + "<sep>"  # the full decode has it there too


@pytest.mark.parametrize("chunk", CHUNKS)
def test_invalid_bytes(byte_tokenizer: ByteTokenizer, chunk: int) -> None:
    """Genuinely invalid UTF-8 decodes to U+FFFD in the deltas, where the full decode has it."""
    t = byte_tokenizer
    ids = [
        *t.encode("ab"),
        0xFF,
        *t.encode("cd中"),
        0x80,
        0x80,
        *t.encode("e"),
        *t.encode("中")[:2],
    ]
    full = t.decode(ids)
    assert full == f"ab{REPLACEMENT}cd中{REPLACEMENT}{REPLACEMENT}e{REPLACEMENT}"
    pushes = check(t, ids, chunk)
    # the truncated character at the very end is only settled by the flush
    assert full[:-1].startswith("".join(pushes))
    if chunk == 1:
        assert "".join(pushes) == full[:-1]


def test_truncated_character_is_only_flushed(byte_tokenizer: ByteTokenizer) -> None:
    t = byte_tokenizer
    detok = Detokenizer(t)
    emoji = t.encode("🛑")
    assert detok.push(t.encode("go ")) == "go "
    assert [detok.push([b]) for b in emoji[:3]] == ["", "", ""]
    assert detok.flush() == REPLACEMENT


def test_empty_push_returns_nothing(byte_tokenizer: ByteTokenizer) -> None:
    detok = Detokenizer(byte_tokenizer)
    assert detok.push([]) == ""
    assert detok.push(byte_tokenizer.encode("x")) == "x"
    assert detok.push([]) == ""
    assert detok.flush() == ""


# -- work per push -----------------------------------------------------------------------


def decoded_ids(ids: Sequence[int], prompt: Sequence[int] = (), chunk: int = 1) -> int:
    counting = CountingTokenizer(ByteTokenizer())
    pushes, tail = run(counting, ids, chunk, prompt)
    assert "".join(pushes) + tail == counting.inner.decode(list(ids), skip_special_tokens=True)
    return counting.ids_decoded


@pytest.mark.parametrize(
    "unit",
    [
        "abc ",  # ascii
        "你好。",  # 3-byte characters, two pushes held back out of three
        "👩‍👩‍👧‍👦",  # a long ZWJ cluster
    ],
)
def test_work_per_push_is_linear(unit: str) -> None:
    t = ByteTokenizer()
    small = t.encode(unit * 50)
    large = t.encode(unit * 200)
    work_small, work_large = decoded_ids(small), decoded_ids(large)
    assert work_large <= 4.4 * work_small  # 4x the tokens: about 4x the work, not 16x
    assert work_large <= 12 * len(large)  # a few ids per push, however long the text


def test_work_does_not_depend_on_the_prompt_length() -> None:
    t = ByteTokenizer()
    ids = t.encode("some generated text")
    short = decoded_ids(ids, prompt=t.encode("hi"))
    long = decoded_ids(ids, prompt=t.encode("a long prompt " * 500))
    assert long <= short + 16


def test_work_is_linear_through_a_run_of_skipped_special_tokens() -> None:
    """ignore_eos with skip_special_tokens: invisible ids must not pile up in the window."""
    t = ByteTokenizer()
    small = [*t.encode("start "), *[t.EOS] * 100, *t.encode(" end")]
    large = [*t.encode("start "), *[t.EOS] * 400, *t.encode(" end")]
    work_small, work_large = decoded_ids(small), decoded_ids(large)
    assert work_large <= 4.4 * work_small
    assert work_large <= 12 * len(large)


# -- the real SmolLM2 tokenizer ----------------------------------------------------------


@pytest.mark.real_model
@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("name", sorted(TEXTS))
@pytest.mark.parametrize("prompt", ["", "Réponds 🧑‍💻 en 中文:"], ids=["no-prompt", "prompt"])
def test_real_tokenizer_texts(real_model: Any, name: str, chunk: int, prompt: str) -> None:
    tok = real_model.tokenizer
    ids = tok.encode(TEXTS[name], add_special_tokens=False)
    pushes = check(tok, ids, chunk, prompt=tok.encode(prompt, add_special_tokens=False))
    assert "".join(pushes) == TEXTS[name]


@pytest.mark.real_model
@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("skip", [True, False])
def test_real_tokenizer_prompt_and_special_tokens(real_model: Any, skip: bool, chunk: int) -> None:
    tok = real_model.tokenizer
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "Say hi 👋 in Chinese"}],
        add_generation_prompt=True,
        tokenize=True,
        return_dict=False,
    )
    im_start, im_end = tok.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>"])
    ids = [
        *tok.encode("你好！👩‍👩‍👧‍👦 ok", add_special_tokens=False),
        im_end,
        im_start,
        *tok.encode("ภาษาไทย 🧑‍💻 ❤️", add_special_tokens=False),
        im_end,
    ]
    pushes = check(tok, ids, chunk, prompt=list(prompt), skip=skip)
    joined = "".join(pushes)
    assert "Say hi" not in joined and "user" not in joined
    assert ("<|im_end|>" in joined) is not skip


@pytest.mark.real_model
@pytest.mark.parametrize("chunk", CHUNKS)
def test_real_tokenizer_prompt_ending_inside_a_character(real_model: Any, chunk: int) -> None:
    tok = real_model.tokenizer
    ids = tok.encode("说：👩‍👩‍👧‍👦 好的, all right then", add_special_tokens=False)
    cut = next(k for k in range(1, len(ids)) if tok.decode(ids[:k]).endswith(REPLACEMENT))
    pushes = check(tok, ids[cut:], chunk, prompt=ids[:cut])
    assert "".join(pushes).endswith("all right then")
