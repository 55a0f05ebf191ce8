"""A text concludes once. A paragraph that opens as a second conclusion ends the section
where it begins (no retry: the text had concluded); one written where the text may not
conclude (a planned section's earlier point, a section the document's conclusion follows)
does the same; a paragraph in capitals is cut and retried; and a section short of its
target that has concluded is not pushed on past its conclusion. Scripted backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.pipeline.fake_backend import FakeBackend, Reply, pipeline_from, run

from .test_reader import cuts, run_section

BODY = (
    "Harvard admitted 1,950 students in 2019 from more than 43,000 applicants. Legacy "
    "applicants were admitted at 33.6% against 5.9% for others, a gap the court examined."
)
MORE = (
    "Recruited athletes were 0.67% of applicants but a larger share of the admitted class, "
    "because coaches submit lists that the committee reads with care."
)
CLOSE = "In conclusion, the figures show how much weight each group carries in the process."
CLOSE_AGAIN = "In conclusion, admissions at Harvard weigh many factors at once, and always will."
SHOUT = (
    "THE COMMITTEE READS EVERY FILE TWICE AND VOTES ON EACH APPLICANT IN A FULL MEETING OF "
    "ITS MEMBERS."
)
PROMPT = "Write a report on admissions at Harvard."


def test_a_second_conclusion_ends_the_section_where_it_begins(tmp_path: Path) -> None:
    reply = f"{BODY}\n\n{CLOSE}\n\n{MORE}\n\n{CLOSE_AGAIN} It is a careful process."
    sec, text, backend, _ = run_section(tmp_path, PROMPT, [(reply, "stop")])
    assert text == f"{BODY}\n\n{CLOSE}\n\n{MORE}"
    assert len(backend.calls) == 1 and cuts(sec) == ["conclusion"]
    assert sec["rounds"][0]["stop_reason"] == "conclusion"
    assert sec["rounds"][0]["repetition"]["detail"].startswith("concluded again: In conclusion")
    assert not sec["degenerate"] and sec["reasons"] == []


def test_a_chinese_second_conclusion_ends_it_too(tmp_path: Path) -> None:
    first = "茶起源于中国，已有数千年的历史。人们最早把茶叶当作药材使用，后来才逐渐成为日常饮品。"
    close = "总之，茶已经成为中国人生活中不可缺少的一部分，也是中国文化的重要象征。"
    again = "综上所述，茶文化源远流长，值得我们一代又一代地传承下去，并介绍给世界。"
    reply = f"{first}\n\n{close}\n\n{again}"
    sec, text, _, _ = run_section(tmp_path, "请写一篇关于茶的文章。", [(reply, "stop")])
    assert text == f"{first}\n\n{close}" and cuts(sec) == ["conclusion"]


def test_a_paragraph_in_capitals_is_cut_and_retried(tmp_path: Path) -> None:
    replies: list[Reply] = [(f"{BODY}\n\n{SHOUT}", "stop"), (MORE, "stop")]
    sec, text, backend, _ = run_section(tmp_path, PROMPT, replies)
    assert SHOUT not in text and text.startswith(BODY) and text.endswith(MORE)
    assert cuts(sec) == ["shout", None] and len(backend.calls) == 2


def test_a_section_that_concluded_short_writes_on_before_its_conclusion_once(
    tmp_path: Path,
) -> None:
    """Short of its target after concluding: the conclusion (not shown yet) goes, the text
    is written on from before it; concluded short again, the section ends there."""
    replies: list[Reply] = [
        (f"{BODY}\n\n{CLOSE}", "stop"),
        (f"{MORE}\n\n{CLOSE_AGAIN}", "stop"),
        ("Never asked for.", "stop"),
    ]
    _, text, backend, _ = run_section(
        tmp_path, PROMPT, replies, strategy="prefix", target_words=200, plan="false"
    )
    assert text == f"{BODY}\n\n{MORE}\n\n{CLOSE_AGAIN}"
    assert len(backend.calls) == 2  # no push after the second conclusion
    retry = backend.calls[1]
    assert retry.continue_final and retry.messages[-1]["content"] == BODY + "\n\n"


def test_a_section_the_documents_conclusion_follows_does_not_conclude(tmp_path: Path) -> None:
    yaml = (
        "name: closing\n"
        "defaults: {max_tokens: 400, temperature: 0.7, seed: 3}\n"
        "sections:\n"
        '  - {id: body, prompt: "[body] Write about admissions."}\n'
        '  - {id: conclusion, title: Conclusion, prompt: "[conclusion] Conclude."}\n'
    )
    backend = FakeBackend(
        {"body": [(f"{BODY}\n\n{CLOSE}", "stop")], "conclusion": [(CLOSE_AGAIN, "stop")]},
        chunk=5,
    )
    manifest, prepared = run(pipeline_from(yaml), backend, tmp_path)
    sections: dict[str, Any] = {s["id"]: s for s in manifest["sections"]}
    body = (prepared.run_dir.sections_dir / "body.md").read_text("utf-8")
    assert body == BODY and cuts(sections["body"]) == ["conclusion"]
    assert "a conclusion before its end" in sections["body"]["rounds"][0]["repetition"]["detail"]
    ending = (prepared.run_dir.sections_dir / "conclusion.md").read_text("utf-8")
    assert ending == CLOSE_AGAIN


def test_a_section_short_of_its_target_that_concludes_again_writes_on_before_it(
    tmp_path: Path,
) -> None:
    """Concluded twice in one answer, far short of its target: the second conclusion is
    cut, the first (not shown yet) goes too, and the text is written on from before it."""
    replies: list[Reply] = [
        (f"{BODY}\n\n{CLOSE}\n\n{CLOSE_AGAIN}", "stop"),
        (f"{MORE}\n\n{CLOSE_AGAIN}", "stop"),
    ]
    sec, text, backend, _ = run_section(
        tmp_path, PROMPT, replies, strategy="prefix", target_words=200, plan="false"
    )
    assert text == f"{BODY}\n\n{MORE}\n\n{CLOSE_AGAIN}"
    assert cuts(sec)[0] == "conclusion" and len(backend.calls) == 2


def test_a_heading_the_text_had_already_starts_it_over_and_is_cut(tmp_path: Path) -> None:
    """A paper that writes its 研究现状 and 分析 again, numbered or not, starts over."""
    first = "### 一、研究现状\n\n近年来，关于媒体多任务的研究越来越多，学者们关注它对注意力的影响。"
    second = "### 分析\n\n多任务让注意力在不同信息之间频繁切换，学习效率因此下降。"
    again = "### 研究现状\n\n媒体多任务已经成为大学生日常学习的一部分，它带来了新的挑战。"
    other = "### 对策\n\n学生可以在学习时关闭通知，把手机放在另一个房间。"
    replies: list[Reply] = [(f"{first}\n\n{second}\n\n{again}", "stop"), ("\n\n" + other, "stop")]
    sec, text, backend, _ = run_section(tmp_path, "请写一篇短论文：媒体多任务。", replies)
    assert text == f"{first}\n\n{second}\n\n{other}"
    assert cuts(sec) == ["restart", None] and len(backend.calls) == 2
    assert (
        "starts over at a heading it had: ### 研究现状" in sec["rounds"][0]["repetition"]["detail"]
    )
