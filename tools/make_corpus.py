"""Writes the example corpus's PDF and DOCX (pipelines/sources/tramways/), which are committed;
run it again only to change them: `python tools/make_corpus.py`. The PDF has the finances on
page 1 and the fleet and depot on page 2, so a citation's page can be checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import docx
from weasyprint import HTML

CORPUS = Path(__file__).resolve().parents[1] / "pipelines" / "sources" / "tramways"

REVIEW = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>KRT annual review 2025</title>
<style>
@page { size: A5; margin: 18mm; }
body { font-family: serif; font-size: 10pt; line-height: 1.35; }
h1 { font-size: 15pt; } h2 { font-size: 12pt; margin-top: 1.2em; }
table { border-collapse: collapse; } td, th { border: 1px solid #888; padding: 2px 6px; }
.page { page-break-after: always; }
</style></head><body>
<div class="page">
<h1>Kessling Regional Tramways: annual review 2025</h1>
<h2>Finances</h2>
<p>Operating revenue was EUR 84.2 million in 2025, of which fares brought in EUR 61.9 million,
advertising EUR 4.8 million and other income EUR 17.5 million. The public subsidy from the
Kessling Transport Authority was EUR 37.5 million, down from EUR 39.0 million in 2024, as
fare income grew faster than costs.</p>
<p>Operating costs were EUR 118.6 million. Staff costs were the largest part at EUR 71.3
million; electricity cost EUR 9.6 million, and maintenance of track and trams EUR 21.2 million.</p>
<table>
<tr><th>Item</th><th>2024</th><th>2025</th></tr>
<tr><td>Operating revenue (EUR m)</td><td>78.9</td><td>84.2</td></tr>
<tr><td>Public subsidy (EUR m)</td><td>39.0</td><td>37.5</td></tr>
<tr><td>Operating costs (EUR m)</td><td>114.7</td><td>118.6</td></tr>
</table>
</div>
<div>
<h2>Fleet</h2>
<p>KRT ran 62 trams at the end of 2025. Eight new Lindqvist T9 low-floor trams were
delivered between July and November; the first entered passenger service on
2 September 2025 on Line 3. The T9 carries 246 passengers, 38 more than the oldest trams
it replaces, which date from 1998.</p>
<h2>Saltmarsh depot</h2>
<p>Construction of the new Saltmarsh depot began in November 2025. The depot will hold 40
trams and is due to open in 2027, at a budgeted cost of EUR 94 million. It will let KRT
retire the cramped Depot Road site, in use since 1931.</p>
</div>
</body></html>
"""


def review_pdf(path: Path) -> None:
    HTML(string=REVIEW).write_pdf(path)


def workforce_docx(path: Path) -> None:
    document = docx.Document()
    document.add_heading("Workforce report 2025", level=0)
    document.add_heading("Staff", level=1)
    document.add_paragraph(
        "Kessling Regional Tramways employed 1,140 people at the end of 2025, of whom 612 were "
        "tram drivers. 86 new drivers finished their training during the year, the largest "
        "intake since the network opened."
    )
    document.add_heading("Training", level=1)
    document.add_paragraph(
        "Driver training takes 14 weeks. From April 2025 it includes a day on the driving "
        "simulator bought for EUR 420,000, which the training manager Leena Sarpo says has cut "
        "the share of trainees who repeat the final test from 18% to 9%."
    )
    table = document.add_table(rows=1, cols=3)
    for cell, text in zip(table.rows[0].cells, ("Group", "2024", "2025"), strict=True):
        cell.text = text
    for row in (("Drivers", "571", "612"), ("Maintenance", "244", "251"), ("Other", "270", "277")):
        for cell, text in zip(table.add_row().cells, row, strict=True):
            cell.text = text
    document.add_heading("Absence", level=1)
    document.add_paragraph(
        "Sickness absence fell to 5.2% of working days in 2025, from 6.0% in 2024."
    )
    # the default template's thumbnail and second style sheet are most of its size; Word
    # needs neither
    _drop(document.part.package.rels, "/thumbnail")
    _drop(document.part.rels, "/stylesWithEffects")
    document.save(str(path))


def _drop(rels: dict[str, Any], kind: str) -> None:
    for key, rel in list(rels.items()):
        if rel.reltype.endswith(kind):
            del rels[key]


if __name__ == "__main__":
    review_pdf(CORPUS / "annual-review-2025.pdf")
    workforce_docx(CORPUS / "workforce.docx")
    for name in ("annual-review-2025.pdf", "workforce.docx"):
        print(name, (CORPUS / name).stat().st_size, "bytes")
