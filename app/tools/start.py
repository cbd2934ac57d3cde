"""The tools' commands: each holds SIGINT and SIGTERM before it imports its tool.

Importing a tool (the database drivers, marshmallow, ...) takes about 0.3 s, before the
tool's own handlers exist (:func:`app.tools.cli.ctrl_c_interrupts`). A stop that came
then was lost when SIGINT was inherited ignored, as a script's background job has it
(the tool ran to the end, exit 0), and otherwise ended the tool with a traceback. Here
such a stop is held, and the tool acts on it as soon as its handlers are in place: one
line, exit 130 or 143, nothing written. This module imports nothing heavy on purpose.
"""

from __future__ import annotations

import importlib
import signal
from functools import partial
from types import FrameType

STOPS = (signal.SIGINT, signal.SIGTERM)
held: list[int] = []  # the stops that came while the tool was imported, in order


def _hold(signum: int, frame: FrameType | None) -> None:
    held.append(signum)


def first_held() -> int | None:
    """The first stop held while the tool was imported, if any (then forgotten: the tool
    acts on it once)."""
    first = held[0] if held else None
    held.clear()
    return first


def run(tool: str) -> int:
    """Import ``app.tools.<tool>`` with stops held, then run its ``main``."""
    for signum in STOPS:
        signal.signal(signum, _hold)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)
    main = importlib.import_module(f"app.tools.{tool}").main
    return int(main())


# The console scripts (pyproject.toml); scripts/*.py call run() the same way.
load = partial(run, "loader")
keys = partial(run, "keytool")
generate = partial(run, "generator")
import_gophish = partial(run, "gophish")
swap = partial(run, "swap")
export = partial(run, "export")
reclassify = partial(run, "reclassify")
webhooks = partial(run, "webhooks")
