"""A throwaway PostgreSQL cluster: its own directory, 127.0.0.1, a free port.

The benchmark (``--postgresql auto``) and the tests both start theirs here, so it needs
only the standard library: the serving install runs the benchmark without the test
extras. As root the server must run as the ``postgres`` user (PostgreSQL refuses root),
so initdb and postgres run through ``runuser``; the cluster is stopped by PID.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from benchlib import free_port

START_SECONDS = 60.0


def server_bin() -> Path | None:
    """The newest installed PostgreSQL's bin directory (Debian's layout), if any."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name)
    )
    return found[-1].parent if found else None


def _as_server_user(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


def _bin() -> Path:
    bin_dir = server_bin()
    if bin_dir is None:
        raise FileNotFoundError("PostgreSQL is not installed (apt-get install postgresql)")
    return bin_dir


def _scratch() -> Path:
    root = Path(tempfile.mkdtemp(prefix="reporting-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    return root


@contextlib.contextmanager
def cluster() -> Iterator[str]:
    """Start a cluster; yield a superuser URL; stop it (by PID) and delete it."""
    bin_dir, root = _bin(), _scratch()
    initdb = [str(bin_dir / "initdb"), "-D", str(root / "data"), "-U", "postgres"]
    initdb += ["--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync"]
    subprocess.run(_as_server_user(initdb), check=True, capture_output=True)
    with _running(bin_dir, root) as port:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"


@contextlib.contextmanager
def standby(primary_url: str) -> Iterator[str]:
    """A hot standby of the cluster at ``primary_url`` (streaming replication); its URL."""
    bin_dir, root = _bin(), _scratch()
    primary_port = primary_url.rsplit(":", 1)[1].split("/")[0]
    backup = [str(bin_dir / "pg_basebackup"), "-D", str(root / "data"), "-R", "-X", "stream"]
    backup += ["-h", "127.0.0.1", "-p", primary_port, "-U", "postgres", "--no-sync"]
    backup += ["--checkpoint=fast"]  # a spread checkpoint would make the copy wait minutes
    subprocess.run(_as_server_user(backup), check=True, capture_output=True)
    with _running(bin_dir, root, "hot_standby=on") as port:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"


@contextlib.contextmanager
def _running(bin_dir: Path, root: Path, *extra: str) -> Iterator[int]:
    """Run the server of ``root/data`` on a free port until the block ends."""
    data, port = root / "data", free_port()
    settings = ["fsync=off", "synchronous_commit=off", "full_page_writes=off"]
    settings += ["listen_addresses=127.0.0.1", f"port={port}", f"unix_socket_directories={root}"]
    settings += ["max_connections=200", "shared_buffers=64MB", *extra]
    args = [str(bin_dir / "postgres"), "-D", str(data)]
    for setting in settings:
        args += ["-c", setting]
    log = (root / "server.log").open("wb")
    if os.geteuid() == 0:
        shutil.chown(root / "server.log", "postgres", "postgres")
    process = subprocess.Popen(_as_server_user(args), stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_ready(bin_dir, port, process)
        yield port
    finally:
        _stop(process, data)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def _wait_ready(bin_dir: Path, port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("the throwaway PostgreSQL server exited at start")
        ready = subprocess.run(
            [str(bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port), "-q"], check=False
        )
        if ready.returncode == 0:
            return
        time.sleep(0.1)
    raise RuntimeError("the throwaway PostgreSQL server did not start")


def _stop(process: subprocess.Popen[bytes], data: Path) -> None:
    """Fast shutdown, signalled to the postmaster's own PID (runuser does not pass it on)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        pid = int((data / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
