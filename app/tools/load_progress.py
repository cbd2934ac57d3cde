"""What a writer shows while it runs: one progress bar per table on a terminal (tqdm), plain
lines when stderr is not a terminal (a log, CI), nothing when progress is off. Rows are
whole numbers everywhere, rates too (tqdm's own units show ``1.00 rows`` for one row).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any, TextIO

from tqdm import tqdm

from .cli import plural, printable

PLAIN_EVERY = 10.0  # seconds between two plain lines about the same table
BAR = "{desc}: {percentage:3.0f}%|{bar}| {rows} [{elapsed}<{remaining}, {per_second}]"
COUNTER = "{desc}: {rows} [{elapsed}, {per_second}]"


class RowBar(tqdm):  # type: ignore[type-arg]  # tqdm is generic only in its stubs
    """A tqdm bar that counts whole rows: its own fields ``rows`` and ``per_second``."""

    @property
    def format_dict(self) -> MutableMapping[str, Any]:
        shown = super().format_dict
        rate = shown["rate"]
        shown["rows"] = plural(int(shown["n"]), "row")
        shown["per_second"] = "? rows/s" if rate is None else f"{rate:,.0f} rows/s"
        return shown


class Meter:
    """Counts rows per step (reading one table, writing one table) and shows the rate."""

    def __init__(self, enabled: bool, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.terminal = enabled and self.stream.isatty()
        self.label = ""
        self.rows = 0
        self.started = self.said = 0.0
        self.bar: RowBar | None = None

    def tick(self, label: str, rows: int) -> None:
        """``rows`` more rows of the step ``label`` (a new label ends the previous step)."""
        if not self.enabled or not label:
            return
        if label != self.label:
            self.close()
            self._open(label)
        self.rows += rows
        now = time.perf_counter()
        if self.bar is not None:
            self.bar.update(rows)
        elif now - self.said >= PLAIN_EVERY:
            self._say("...")
            self.said = now

    @contextmanager
    def step(self, label: str, rows: int) -> Iterator[None]:
        """A step done in one go (checking and writing a table): shown when it ends."""
        if self.enabled:
            self.close()
            self._open(label, rows)
        yield
        self.tick(label, rows)
        self.close()

    def close(self) -> None:
        """Close the current step: its bar, or its plain line."""
        if not self.label:
            return
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        else:
            self._say("done")
        self.label = ""

    def _open(self, label: str, total: int | None = None) -> None:
        self.label, self.rows = printable(label), 0
        self.started = self.said = time.perf_counter()
        if self.terminal:
            bar_format = COUNTER if total is None else BAR
            self.bar = RowBar(desc=self.label, total=total, file=self.stream, bar_format=bar_format)

    def _say(self, state: str) -> None:
        seconds = time.perf_counter() - self.started
        rate = f" ({self.rows / seconds:,.0f} rows/s)" if seconds > 0 else ""
        print(f"{self.label}: {plural(self.rows, 'row')} in {seconds:.1f} s{rate} {state}",
              file=self.stream, flush=True)  # fmt: skip
