"""The README and the docs/ pages, read as a user reads them: sections, code blocks, links.

A snippet is found by the title of the `## ` section that holds it, wherever that section
lives (the README or a docs/ page), so moving a section between pages moves nothing in
the tests that run its snippets.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
DOCS = [README, *PAGES]  # every page a user reads
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def read(path: Path) -> str:
    """A page's text."""
    return path.read_text(encoding="utf-8")


def section(title: str) -> str:
    """The text of the one `## title` section among the README and the docs pages."""
    pattern = rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)"
    found = [m.group(1) for page in DOCS for m in re.finditer(pattern, read(page), re.M | re.S)]
    assert len(found) == 1, (title, len(found))
    return found[0]


def blocks(text: str, lang: str) -> list[str]:
    """The fenced code blocks of one language in `text`."""
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.M | re.S)


def prose(text: str) -> str:
    """`text` without its fenced code blocks."""
    return FENCE.sub("", text)


def headings(text: str) -> list[str]:
    """The titles of a page's headings (not the comments of its code blocks)."""
    return re.findall(r"^#+ (.+)$", prose(text), re.M)


def anchors(text: str) -> set[str]:
    """The fragment each heading of a page gets on GitHub and most Markdown viewers."""
    return {re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-") for title in headings(text)}


def links(text: str) -> list[str]:
    """The targets of a page's Markdown links, outside code blocks."""
    return re.findall(r"\]\(([^)\s]+)\)", prose(text))
