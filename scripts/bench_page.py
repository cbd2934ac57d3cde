"""The benchmark's report written into a docs page, between two markers.

``make bench`` keeps its last table in docs/performance.md, between the lines
``<!-- bench:start -->`` and ``<!-- bench:end -->``, and ``make bench-large`` its own
between ``<!-- bench-large:start -->`` and ``<!-- bench-large:end -->``; everything else on
the page is prose that a run never touches.
"""

from __future__ import annotations

from pathlib import Path


def markers(name: str) -> tuple[str, str]:
    """The start and end lines of a report's place on the page."""
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


START, END = markers("bench")


def write_between_markers(page: Path, report: str, name: str = "bench") -> None:
    """Replace what stands between the page's ``name`` markers with ``report``, and nothing
    else."""
    start, end = markers(name)
    text = page.read_text(encoding="utf-8")
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise ValueError(f"{page}: needs one {start} line before one {end} line")
    head, rest = text.split(start)
    _, tail = rest.split(end)
    # Blank lines around the report: a table must not run into a marker.
    page.write_text(f"{head}{start}\n\n{report.strip()}\n\n{end}{tail}", encoding="utf-8")


def publish(
    page: Path, report: str, *, smoke: bool, rows: str, clean: bool, name: str = "bench"
) -> bool:
    """Write the report into the page when it is a full run's without errors (not the smoke
    run's, not a few rows'); whether it was written."""
    if smoke or rows or not clean:
        return False
    write_between_markers(page, report, name)
    return True


def keep(root: Path, report: str, *, name: str, smoke: bool, rows: str, clean: bool) -> None:
    """Print the report, keep it in bench-data/last-NAME.md (but the smoke run's) and, by
    :func:`publish`'s rule, on the docs page."""
    print(report)
    if not smoke:
        out = root / "bench-data" / f"last-{name}.md"
        out.parent.mkdir(exist_ok=True)
        out.write_text(report, encoding="utf-8")
        print(f"(written to {out.relative_to(root)})")
    page = root / "docs" / "performance.md"
    if publish(page, report, smoke=smoke, rows=rows, clean=clean, name=name):
        print(f"(and into {page.relative_to(root)})")
