"""The data version: the token every load bumps, watched without a query per request."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path


class DataVersion:
    """The data token the loader bumps, cached without a query per request.

    The files are looked at no more than every ``STAT_SECONDS``; when the database or
    its WAL file changed on disk, or a second passed, the token is read again. Every
    query also returns the token of its own snapshot.
    """

    STAT_SECONDS = 0.1

    def __init__(
        self, db_path: str | Path, token: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._files = (Path(db_path), Path(f"{db_path}-wal"))
        self._clock = clock
        self.token = token
        self._signature = self._looked = self._stat()
        self._checked = self._statted = clock()

    def _stat(self) -> tuple[int, ...]:
        signature: list[int] = []
        for file in self._files:
            try:
                st = os.stat(file)
                signature += [st.st_mtime_ns, st.st_size, st.st_ino]
            except OSError:
                signature += [0, 0, 0]
        return tuple(signature)

    def is_stale(self) -> bool:
        """Whether the cached token may be out of date (the files or the clock moved)."""
        now = self._clock()
        if now - self._statted < self.STAT_SECONDS:
            return False
        self._statted = now
        self._looked = self._stat()
        return self._signature != self._looked or now - self._checked > 1.0

    def update(self, token: str) -> None:
        """Record a token just read from the database, with the files as they were at the
        last look, before the read: a load committed meanwhile changed them since, so the
        next look reads the token again (the files as they are after the read would hide
        that load until the second's re-read)."""
        self.token = token
        self._signature = self._looked
        self._checked = self._statted = self._clock()
