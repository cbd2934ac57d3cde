"""The one module that relies on gunicorn's private API, and why.

A new worker keeps, until it sets its own handlers, the handler it inherited through
the fork: gunicorn's ``Arbiter.signal``, which only puts the signal in the arbiter's
``SIG_QUEUE``, whose copy in the worker nobody reads. A SIGTERM that came just as the
arbiter forked would be lost, and the worker would serve on until gunicorn's graceful
timeout killed it (seen: a stop taking 31 s and exiting non-zero). gunicorn offers no
public way to see that queue. ``check_private_api`` runs at import (and in
tests/test_shims.py), and pyproject.toml caps gunicorn below its next major release
(its internals change at majors: the queue was a list before 25): an upgrade that
moves these names fails at once, loudly, instead of silently losing a stop signal.
"""

from __future__ import annotations

import contextlib
import queue
import signal
from typing import Any

import gunicorn
from gunicorn.arbiter import Arbiter

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)
QUEUE = "SIG_QUEUE"  # the arbiter's attribute its handler puts signals in


def check_private_api(arbiter: type[Any] = Arbiter) -> None:
    """Fail with one clear error if this gunicorn's arbiter lacks what the module relies on.

    The arbiter installs ``signal`` as its handler, and that handler puts the signal in
    ``SIG_QUEUE``: a list (class attribute) or a queue made in ``__init__``.
    """
    missing = []
    handler = getattr(arbiter, "signal", None)
    if not callable(handler) or QUEUE not in handler.__code__.co_names:
        missing.append(f"Arbiter.signal putting signals in {QUEUE}")
    init_signals = getattr(arbiter, "init_signals", None)
    if not callable(init_signals) or "signal" not in init_signals.__code__.co_names:
        missing.append("Arbiter.init_signals installing Arbiter.signal")
    made = QUEUE in arbiter.__init__.__code__.co_names
    if not made and not isinstance(getattr(arbiter, QUEUE, None), list):
        missing.append(f"Arbiter.{QUEUE}")
    if missing:
        raise RuntimeError(
            f"gunicorn {gunicorn.__version__} lacks {', '.join(missing)}: "
            "update app/web/gunicorn_shim.py"
        )


check_private_api()


def inherited_signal_queue() -> Any:
    """The queue of gunicorn's arbiter that this new worker's signal handler still feeds.

    None when the SIGTERM handler is not an arbiter's (the worker set its own already).
    """
    arbiter = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
    return getattr(arbiter, QUEUE, None) if isinstance(arbiter, Arbiter) else None


def stop_signal_in(pending: Any) -> int | None:
    """The last stop signal in such a queue (a list before gunicorn 25), if any."""
    signals: list[Any] = []
    if isinstance(pending, list):
        signals = list(pending)
    elif pending is not None:
        with contextlib.suppress(queue.Empty):
            while True:
                signals.append(pending.get_nowait())
    return next((int(sig) for sig in reversed(signals) if sig in STOP_SIGNALS), None)
