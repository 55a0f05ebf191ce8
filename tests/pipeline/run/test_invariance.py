"""Round-size invariance: the same text streamed in kv rounds of any size gives the same
section, the same cut (kind and place) and the same retries. The fake writes each
request's text a round's max_tokens characters at a time (tokens are characters), so only
the round size differs between the runs compared."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gen.pipeline.run.rounds import RETRY_TOKENS
from tests.pipeline.fake_backend import FakeBackend, pipeline_from, run

BUDGET = 1200  # max_rounds x max_tokens, the same for every round size
SIZES = [1200, 240, 48, 16]  # characters (tokens) a round

SOUND_EN = (
    "Railway signalling began with flags and lamps. Engineers later built mechanical "
    "levers in tall cabins beside the junctions. "
)
SOUND_ZH = "铁路信号最早使用旗子和灯。工程师后来在高高的信号楼里安装了机械杠杆。"
REFRAIN = " ".join(
    f"The station {what} every morning at {hour} o'clock."
    for what, hour in [
        ("opened", "six"),
        ("sold tickets", "seven"),
        ("filled with clerks", "eight"),
        ("heard the bells", "nine"),
        ("emptied slowly", "ten"),
        ("closed its gates", "eleven"),
    ]
)
# one long sentence that says its few words over and over, in no fixed order
COLLAPSE = (
    "The city grew and the city grew and the people came and the city grew and the trains "
    "came and the city grew and the people came and the trains came and the city grew and "
    "the people came and the city grew and the trains came and the people came and the city "
    "grew and the trains came and the people came and the city grew and the people came and "
    "the trains came and the city grew and the people came and the city grew and the trains "
    "came and the people came and the city grew."
)
SLIP = (
    "Then the story went on in English for a long while, and the writer kept adding "
    "words about signals, levers, lamps, cabins, wires and bells, about the men who "
    "pulled them and the trains that waited, until the window held far more English words "
    "than Chinese ones, which is exactly what this check is there to notice in time."
)
RETRY_EN = " Today computers watch the whole line from one room. 😀 The end."
RETRY_ZH = "如今，电脑在一个房间里监视整条线路。😀 完。"
# longer than RETRY_TOKENS: the retry's stronger settings end inside it, a new request
# with the section's own settings writes the rest
LONG_RETRY = (
    " Colour lights replaced the semaphore arms on busy lines, and track circuits told the "
    "signalman where each train stood. Radio links came later, then computers. 中文也行。"
)

# (name, prompt, each request's text, the kind of the cut, the text the retry goes on from)
CASES: list[tuple[str, str, list[str], str, str]] = [
    (
        "refrain",
        "Write about railway signalling.",
        [SOUND_EN + REFRAIN, RETRY_EN],
        "refrain",
        SOUND_EN + REFRAIN.split(" The station sold")[0],
    ),
    (
        "repeated sentence, Chinese",
        "写一篇关于铁路信号的文章，讲讲它的历史。",
        [SOUND_ZH + "每个车站都有自己的信号员。" + SOUND_ZH[:13] + "后来又有了电报。", RETRY_ZH],
        "sentence",
        SOUND_ZH + "每个车站都有自己的信号员。",
    ),
    (
        "collapse, and a retry past its stronger settings",
        "Write about railway signalling.",
        [SOUND_EN + COLLAPSE, LONG_RETRY, " 😀 The end."],
        "collapse",
        SOUND_EN.rstrip(),  # the collapsing sentence goes whole
    ),
    (
        "a row of junk",
        "Write about railway signalling.",
        [SOUND_EN + "\n😀😀😀\n🎉🎉🎉\n✨✨✨\n🚂🚂🚂\nMore text.", RETRY_EN],
        "junk",
        SOUND_EN.rstrip(),
    ),
    (
        "a language slip",
        "写一篇关于铁路信号的文章，讲讲它的历史。",
        [SOUND_ZH + "每个车站都有自己的信号员。" + SLIP, RETRY_ZH],
        "language",
        SOUND_ZH + "每个车站都有自己的信号员。",
    ),
]


def run_in_rounds(tmp_path: Path, prompt: str, texts: list[str], size: int) -> dict[str, Any]:
    """One section's run whose requests write `texts`, in kv rounds of `size` tokens."""
    yaml = f"""
name: inv
defaults:
  temperature: 0.7
  seed: 3
  continuation: kv
  max_tokens: {size}
  max_rounds: {BUDGET // size}
sections:
  - id: s
    prompt: "[s] {prompt}"
"""
    backend = FakeBackend(streams={"s": list(texts)}, chunk=5)
    manifest, prepared = run(pipeline_from(yaml), backend, tmp_path / str(size))
    (sec,) = manifest["sections"]
    requests = [
        (c.messages, c.continue_final, dataclasses.replace(c.params, max_tokens=BUDGET))
        for c in backend.calls
    ]
    # the tokens each request wrote: its rounds' (a request's first round is not "kv")
    written: list[int] = []
    for r in sec["rounds"]:
        if r["strategy"] == "kv":
            written[-1] += r["completion_tokens"]
        else:
            written.append(r["completion_tokens"])
    return {
        "text": (prepared.run_dir.sections_dir / "s.md").read_text("utf-8"),
        "cuts": [r["repetition"]["kind"] for r in sec["rounds"] if r.get("repetition")],
        "requests": requests,
        "written": written,
        "reasons": sec["reasons"],
        "degenerate": sec["degenerate"],
        "rounds": len(sec["rounds"]),
    }


@pytest.mark.parametrize(
    ("prompt", "texts", "kind", "kept"), [pytest.param(*c[1:], id=c[0]) for c in CASES]
)
def test_rounds_of_any_size_write_the_same_section(
    tmp_path: Path, prompt: str, texts: list[str], kind: str, kept: str
) -> None:
    runs = {size: run_in_rounds(tmp_path, prompt, texts, size) for size in SIZES}
    one = runs[SIZES[0]]
    assert one["cuts"] == [kind], one["cuts"]
    retry_from = one["requests"][1][0][-1]["content"]  # the retry's open assistant message
    assert retry_from == kept
    assert one["text"].startswith(retry_from)
    assert runs[SIZES[-1]]["rounds"] > one["rounds"] + 2  # really cut into more rounds
    for size in SIZES[1:]:
        other = runs[size]
        for field in ("text", "cuts", "requests", "reasons", "degenerate"):
            assert other[field] == one[field], (size, field)


def test_a_retry_samples_with_its_stronger_settings_for_retry_tokens_in_all(
    tmp_path: Path,
) -> None:
    _, prompt, texts, _, _ = CASES[2]
    for size in SIZES:
        got = run_in_rounds(tmp_path, prompt, texts, size)
        first, retry, own = (params for _, _, params in got["requests"])
        assert retry.dry_multiplier > first.dry_multiplier == own.dry_multiplier
        assert retry.temperature > first.temperature == own.temperature
        assert got["written"][1] == RETRY_TOKENS  # then a new request, the same text
        retry_text = LONG_RETRY[:RETRY_TOKENS]
        assert got["requests"][2][0][-1]["content"].endswith(retry_text.rstrip())
        assert got["text"].endswith(retry_text + " 😀 The end.")
