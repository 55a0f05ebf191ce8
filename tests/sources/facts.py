"""The facts planted in the example corpus (pipelines/sources/), each with a question that asks
for it, the words a text must hold to state it, and the file that holds it: for measuring
whether a report written from the corpus carries them, and which file it should cite."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[2] / "pipelines" / "sources"


@dataclass(frozen=True, slots=True)
class Fact:
    question: str
    says: tuple[str, ...]  # every one of these appears in a text that states the fact
    file: str  # relative to CORPUS


TRAMWAYS = {
    "line4_opening": Fact(
        "When did the Line 4 extension to Orrin Quay open?",
        ("14 March 2025",),
        "tramways/line4-extension.md",
    ),
    "line4_length": Fact(
        "How long is the Orrin Quay extension and how many new stops does it have?",
        ("3.2 km", "four new stops"),
        "tramways/line4-extension.md",
    ),
    "line4_cost": Fact(
        "What did the Line 4 extension cost against its budget?",
        ("€61.4 million",),
        "tramways/line4-extension.md",
    ),
    "ridership": Fact(
        "How many boardings did the trams carry in 2025?",
        ("48.7 million", "45.9 million"),
        "tramways/overview.md",
    ),
    "chief_executive": Fact(
        "Who is the chief executive of Kessling Regional Tramways?",
        ("Marta Ilves",),
        "tramways/overview.md",
    ),
    "punctuality": Fact(
        "What share of trams ran on time (punctuality) in 2025?",
        ("91.4%",),
        "tramways/operations.md",
    ),
    "heatwave": Fact(
        "What happened in the heatwave at Brannock Junction and how long was Line 2 halted?",
        ("27 June 2025", "5 hours and 40 minutes"),
        "tramways/operations.md",
    ),
    "collisions": Fact(
        "How many collisions with cars were there in 2025?",
        ("3 collisions",),
        "tramways/operations.md",
    ),
    "single_fare": Fact(
        "What is the single fare in 2025 and what was it before?",
        ("€2.10", "€1.90"),
        "tramways/board-minutes.html",
    ),
    "electricity": Fact(
        "Who supplies the renewable traction electricity and from when?",
        ("Halden Wind", "1 July 2025"),
        "tramways/board-minutes.html",
    ),
    "revenue": Fact(
        "What was the operating revenue and the public subsidy in 2025?",
        ("EUR 84.2 million", "EUR 37.5 million"),
        "tramways/annual-review-2025.pdf",
    ),
    "new_trams": Fact(
        "When did the new Lindqvist T9 trams enter service?",
        ("Lindqvist T9", "2 September 2025"),
        "tramways/annual-review-2025.pdf",
    ),
    "depot": Fact(
        "When did construction of the Saltmarsh depot begin and when will it open?",
        ("November 2025", "2027"),
        "tramways/annual-review-2025.pdf",
    ),
    "busiest_line": Fact(
        "Which line had the most boardings in 2025?",
        ("boardings_2025_millions: 15.2",),
        "tramways/ridership-by-line.csv",
    ),
    "drivers": Fact(
        "How many people does KRT employ and how many new drivers were trained?",
        ("1,140", "86 new drivers"),
        "tramways/workforce.docx",
    ),
}

CUSTOMERS = {
    "c101": Fact(
        "What caused the till outage and how long did it last?",
        ("3 February 2025", "3 hours and 15 minutes"),
        "customers/c101/incidents.md",
    ),
    "c102": Fact(
        "What happened when the scanners stopped syncing?",
        ("19 May 2025", "420"),
        "customers/c102/notes.txt",
    ),
    "c103": Fact(
        "What happened in the phishing attack?",
        ("8 August 2025", "64 staff mailboxes"),
        "customers/c103/incidents.md",
    ),
}
