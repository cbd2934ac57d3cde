"""Several server processes on one port (contract.md 15): gunicorn runs aiohttp's worker.

gunicorn's arbiter forks ``workers`` processes and restarts any that dies; with
``reuse_port`` each worker binds its own SO_REUSEPORT socket, so the kernel spreads
new connections over the workers instead of one worker accepting most of them. Each
worker builds the application itself and serves it through ``make_runner``, the same
runner a single process uses: parser errors stay problem+json and the access log is
the same. SIGTERM and SIGINT let requests in flight finish, then everything exits 0.
SIGHUP is gunicorn's reload: new workers start, the old ones stop as on SIGTERM. A worker
keeps the arbiter's handler for it (aiohttp's worker sets none), which only queues it in
the worker's unread copy of the arbiter's queue: a SIGHUP to every process (a closed
terminal) ends no worker mid-request.
"""

from __future__ import annotations

import asyncio
import logging
import math
import socket
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.worker import GunicornWebWorker
from gunicorn import glogging
from gunicorn.app.base import BaseApplication

from ..config import Config, base_url
from .connections import quiet_resource_errors
from .gunicorn_shim import inherited_signal_queue, stop_signal_in
from .server import make_runner

log = logging.getLogger("app.server")


class Worker(GunicornWebWorker):
    """aiohttp's gunicorn worker, starting its graceful shutdown as soon as SIGTERM comes."""

    _inherited: Any = None

    def init_process(self) -> None:
        """Keep the arbiter's queue the inherited handler feeds until ours are set.

        A stop signal arriving in between lands there (app/web/gunicorn_shim.py says why).
        """
        self._inherited = inherited_signal_queue()
        super().init_process()

    def init_signals(self) -> None:
        """Our handlers; then a stop signal that came before them is obeyed too."""
        super().init_signals()
        stop = stop_signal_in(self._inherited)
        if stop is not None:  # serve nothing: stop as the signal asked
            self.loop.call_soon(self.handle_quit, stop, None)

    def handle_exit(self, sig: int, frame: Any) -> None:
        """Like SIGQUIT/SIGINT here: stop now, not at the worker loop's next one-second tick."""
        self.handle_quit(sig, frame)

    def handle_quit(self, sig: int, frame: Any) -> None:
        """Stop serving; the runner then lets requests in flight finish (as ``serve`` does).

        Ctrl-C reaches the worker and the arbiter both, and the arbiter passes it on: the
        line is written once.
        """
        if self.alive:
            log.info("shutting down: finishing requests in flight")
        super().handle_quit(sig, frame)


class GunicornLogger(glogging.Logger):
    """gunicorn's own messages through the app's logging: one format, one stream."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for handler in list(self.error_log.handlers):
            self.error_log.removeHandler(handler)
        self.error_log.propagate = True

    def info(self, msg: object, *args: object, **kwargs: Any) -> None:
        """With ``reuse_port`` the arbiter opens no socket (each worker binds its own), so
        its "Listening at: %s (%s)" names none: name the configured address instead."""
        if str(msg).startswith("Listening at:") and args and not args[0]:
            args = (",".join(f"http://{bind}" for bind in self.cfg.bind), *args[1:])
        super().info(msg, *args, **kwargs)


class Arbiter(BaseApplication):
    """gunicorn, configured from our Config rather than from its command line."""

    def __init__(
        self,
        config: Config,
        factory: Callable[[], web.Application],
        on_started: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self.factory = factory
        self.on_started = on_started
        super().__init__()

    def load_config(self) -> None:
        host = f"[{self.config.host}]" if ":" in self.config.host else self.config.host
        settings: dict[str, Any] = {
            "bind": [f"{host}:{self.config.port}"],
            "workers": self.config.workers,
            "worker_class": Worker,
            "reuse_port": True,
            # the runner's own shutdown time comes first
            "graceful_timeout": math.ceil(self.config.shutdown_timeout) + 1,
            "accesslog": None,  # the runner writes the access log
            "logger_class": GunicornLogger,
            "loglevel": self.config.log_level.lower(),
            "proc_name": "reporting-api",
            "post_worker_init": self.worker_started,
        }
        if "control_socket_disable" in self.cfg.settings:  # gunicorn >= 25 opens one
            settings["control_socket_disable"] = True
        for name, value in settings.items():
            self.cfg.set(name, value)

    def worker_started(self, worker: Any) -> None:
        """In the first worker, whose socket is bound by now: say where the API is served."""
        if worker.age == 1 and self.on_started is not None:
            self.on_started()

    def load(self) -> Callable[[], Any]:  # type: ignore[override]
        """What each worker serves: a coroutine function returning our runner.

        aiohttp's worker accepts that (it then serves through this runner); gunicorn's
        type stubs know only WSGI and ASGI applications.
        """
        return self.runner

    async def runner(self) -> web.AppRunner:
        """Build the app in this worker and the runner aiohttp's worker will start."""
        quiet_resource_errors(asyncio.get_running_loop())  # as ``serve`` does
        return make_runner(self.factory())


def check_port(host: str, port: int) -> None:
    """Raise OSError if the port is taken: SO_REUSEPORT alone would share it silently."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds
        probe.bind((host, port))


def serve_workers(
    config: Config,
    factory: Callable[[], web.Application],
    on_started: Callable[[], None] | None = None,
) -> None:
    """Run ``config.workers`` processes until SIGTERM or SIGINT (gunicorn exits the process).

    ``on_started`` runs once, in the first worker, once its socket is bound.
    """
    check_port(config.host, config.port)
    log.info("starting %d workers on %s", config.workers, base_url(config.host, config.port))
    Arbiter(config, factory, on_started).run()
