"""The files and commands the README (and the docs it links) show, read from
the documents themselves.

Every fenced block is marked on the line before its fence:
``<!-- tested: NAME -->`` is a file or command a test runs exactly as written
(each section's tests read their own section's blocks, by name);
``<!-- by hand: WHY -->`` needs a person's values (a path, a digest, a GPU),
and tests/python/test_readme.py checks its shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
README = REPOSITORY / "README.md"
# The manual host's program, which the README links.
MANUAL_HOST = REPOSITORY / "docs" / "manual-host.md"
BLOCK = re.compile(
    r"^(?P<indent>[ \t]*)<!-- tested: (?P<name>[^ ]+) -->\n"
    r"(?P=indent)```[a-z]*\n(?P<body>.*?)^(?P=indent)```$",
    re.MULTILINE | re.DOTALL,
)
# Any fenced block, with the line before it (its marker, if any).
FENCED = re.compile(
    r"^(?P<before>[^\n]*)\n"
    r"(?P<indent>[ \t]*)```(?P<language>[a-z]*)\n(?P<body>.*?)^(?P=indent)```$",
    re.MULTILINE | re.DOTALL,
)
MARKER = re.compile(r"<!-- (?P<kind>tested|by hand): (?P<what>[^\n]+?) -->")


@dataclass(frozen=True)
class Fenced:
    """One fenced block: its language, its marker (``tested`` or ``by hand``,
    or None when unmarked), what the marker says, its body (indentation
    removed) and the section (``## `` heading) it lies in."""

    language: str
    kind: str | None
    what: str
    body: str
    section: str


def _section(text: str, section: str, document: Path) -> str:
    heading = f"\n## {section}\n"
    assert text.count(heading) == 1, f"{document.name} has no single section {section!r}"
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def _unindented(body: str, indent: str) -> str:
    return "".join(
        f"{line.removeprefix(indent)}\n" if line.strip() else "\n" for line in body.splitlines()
    )


def readme_files(section: str, document: Path = README) -> dict[str, str]:
    """Each tested block of ``document``'s ``## {section}`` (up to the next
    ``## `` heading), by name, its indentation removed."""
    body = _section(document.read_text(encoding="utf-8"), section, document)
    return {
        match["name"]: _unindented(match["body"], match["indent"]) for match in BLOCK.finditer(body)
    }


def fenced_blocks(document: Path) -> list[Fenced]:
    """Every fenced block of ``document``, in order."""
    text = document.read_text(encoding="utf-8")
    blocks: list[Fenced] = []
    for match in FENCED.finditer(text):
        headings = re.findall(r"^## (.+)$", text[: match.start("indent")], re.MULTILINE)
        marker = MARKER.fullmatch(match["before"].strip())
        blocks.append(
            Fenced(
                language=match["language"],
                kind=None if marker is None else marker["kind"],
                what="" if marker is None else marker["what"],
                body=_unindented(match["body"], match["indent"]),
                section=headings[-1] if headings else "",
            )
        )
    return blocks
