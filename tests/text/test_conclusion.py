"""Conclusions and shouting: paragraphs that open as a conclusion (a phrase that sums up, a
heading that names one) and ones that do not ("Finally, …", "最后，…", a report's
"Summary"); paragraphs in capitals, and acronyms or a heading in capitals that are not."""

from __future__ import annotations

import pytest

from gen.text.conclusion import concludes, shouting

CONCLUSIONS = [
    "**Conclusion** The detailed analysis of other applicants shows the gap.",
    "**结论：**录取过程中的差距依然明显。",
    "In conclusion, the figures point one way.",
    "To conclude, the pool grew but did not broaden.",
    "In summary, three groups gained and two lost.",
    "To sum up: the lens changed navigation.",
    "In short, the plan works if you rest.",
    "Overall, revenue rose 8.3% on online sales.",
    "All in all, it was a good year for the bookstore.",
    "Ultimately, the choice is the board's.",
    "**In conclusion**, slow reading is worth the time.",
    "总之，坚持是一种力量。",
    "综上所述，农产品电商仍有很大的发展空间。",
    "总而言之，读书要慢。",
    "总的来说，新能源汽车市场继续增长。",
    "## Conclusion\n\nThe data show a larger pool, not a broader one.",
    "## 5. Conclusions and Recommendations",
    "### 结论\n\n媒体多任务与注意力控制的关系仍有争议。",
    "## 五、结语",
    "结语\n这条老街会变，但记忆不会。",
    "总结",
]

NOT_CONCLUSIONS = [
    "The **conclusion** of the trial surprised the court.",
    "Finally, remember to check the batteries every autumn.",
    "最后，记得每年秋天检查电池。",
    "Overall revenue rose 8.3%, led by online sales.",
    "In the end, she sold the house to a fisherman's son.",
    "In short order the keeper climbed the stairs.",
    "Conclusions drawn from one survey are never final.",
    "The conclusion of the treaty took three years.",
    "## Summary\n\nRevenue rose 8.3% to $12.7 million.",
    "总结经验，是每个新人都要学会的事。",
    "The lighthouse stood for a century. In conclusion, the keeper said, it was worth it.",
]

SHOUTING = [
    "THIS IS A VERY IMPORTANT ANNOUNCEMENT ABOUT THE SCHOOL BUSES TOMORROW.",
    "WE CHOOSE TO STAY. WE CHOOSE TO LISTEN. WE CHOOSE TO CARE FOR EVERY PATIENT.",
    "## Closing\nTHANK YOU ALL FOR COMING TONIGHT AND FOR EVERYTHING YOU HAVE DONE.",
]

NOT_SHOUTING = [
    "NASA and ESA shared GDP data with the IMF and the WHO in 2020, and HK$20 buys a map.",
    "The IMF, WTO, NATO, OECD and UN met in NYC with the EU and ASEAN.",
    "# THE LIGHTHOUSE KEEPER AND THE LAST NIGHT OF THE OLD LIGHT",
    "THE LIGHTHOUSE KEEPER",
    "WARNING: keep the thermostat away from direct sunlight and open windows.",
    "2023年GDP增长5.2%，NASA和ESA都发布了新的计划。",
]


@pytest.mark.parametrize("paragraph", CONCLUSIONS)
def test_a_conclusion_is_told(paragraph: str) -> None:
    assert concludes(paragraph)


@pytest.mark.parametrize("paragraph", NOT_CONCLUSIONS)
def test_a_last_point_or_a_finding_is_no_conclusion(paragraph: str) -> None:
    assert not concludes(paragraph)


@pytest.mark.parametrize("paragraph", SHOUTING)
def test_capitals_throughout_are_shouting(paragraph: str) -> None:
    assert shouting(paragraph)


@pytest.mark.parametrize("paragraph", NOT_SHOUTING)
def test_acronyms_and_a_heading_in_capitals_are_not(paragraph: str) -> None:
    assert not shouting(paragraph)
