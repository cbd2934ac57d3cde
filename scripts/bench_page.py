"""The benchmark's report written into a docs page, between two markers.

``make bench`` keeps its last table in docs/performance.md, between the lines
``<!-- bench:start -->`` and ``<!-- bench:end -->``; everything else on the page is prose
that a run never touches.
"""

from __future__ import annotations

from pathlib import Path

START = "<!-- bench:start -->"
END = "<!-- bench:end -->"


def write_between_markers(page: Path, report: str) -> None:
    """Replace what stands between the page's markers with ``report``, and nothing else."""
    text = page.read_text(encoding="utf-8")
    if text.count(START) != 1 or text.count(END) != 1 or text.index(START) > text.index(END):
        raise ValueError(f"{page}: needs one {START} line before one {END} line")
    head, rest = text.split(START)
    _, tail = rest.split(END)
    # Blank lines around the report: a table must not run into a marker.
    page.write_text(f"{head}{START}\n\n{report.strip()}\n\n{END}{tail}", encoding="utf-8")


def publish(page: Path, report: str, *, smoke: bool, rows: str, clean: bool) -> bool:
    """Write the report into the page when it is a full run's without errors (not the smoke
    run's, not a few rows'); whether it was written."""
    if smoke or rows or not clean:
        return False
    write_between_markers(page, report)
    return True
