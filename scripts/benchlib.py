"""Benchmark plumbing: wrk runs and their output, server processes, floors, the machine.

Kept apart from ``bench.py`` (which holds the scenarios and the table) so that each
piece is small enough to read and check on its own.
"""

from __future__ import annotations

import http.client
import os
import platform
import re
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

# Counts every status wrk sees; used for the short warm-up pass only, because a
# response hook makes wrk buffer each body and costs it 10-30% of its request rate.
STATUS_LUA = """
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) statuses = {} end
function response(status, headers, body) statuses[status] = (statuses[status] or 0) + 1 end
function done(summary, latency, requests)
  for _, t in ipairs(threads) do
    for code, n in pairs(t:get("statuses")) do
      io.write(string.format("status %d %d\\n", code, n))
    end
  end
end
"""

# Every request a URL no earlier one had: the parameter NAME (in the query already
# ending the path) takes another day each time, so no total is known yet (a first
# request), whatever the answer.
VARY_LUA = """
local n = 0
function request()
  n = n + 1
  return wrk.format(nil, wrk.path .. "&NAME=" .. os.date("!%Y-%m-%d", 1735689600 + n * 86400))
end
"""

# The ceiling: the least an aiohttp server can do per request on this machine.
CEILING_APP = """
import sys
from aiohttp import web

BODY = b'{"status":"ok","service":"ceiling"}'

async def constant(request):
    return web.Response(body=BODY, content_type="application/json")

app = web.Application()
app.router.add_get("/", constant)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""

_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}
_TIME = r"([\d.]+)(us|ms|s|m|h)"


@dataclass
class WrkResult:
    """What one wrk run measured; ``errors`` counts statuses >= 400 and socket errors."""

    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    non_2xx_3xx: int
    socket_errors: dict[str, int]
    statuses: dict[int, int] = field(default_factory=dict)

    @property
    def errors(self) -> int:
        return self.non_2xx_3xx + sum(self.socket_errors.values())


def parse_wrk(text: str) -> WrkResult:
    """Read wrk's ``--latency`` report (and the status lines of STATUS_LUA)."""

    def latency(percent: str) -> float:
        found = re.search(rf"^\s*{percent}%\s+{_TIME}\s*$", text, re.M)
        if not found:
            raise ValueError(f"no {percent}% latency in wrk output:\n{text}")
        return float(found.group(1)) * _UNITS_MS[found.group(2)]

    rps = re.search(r"^Requests/sec:\s+([\d.]+)", text, re.M)
    requests = re.search(r"^\s*(\d+) requests in", text, re.M)
    if not rps or not requests:
        raise ValueError(f"unexpected wrk output:\n{text}")
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    sockets = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text
    )
    socket_errors = {}
    if sockets:
        names = ("connect", "read", "write", "timeout")
        socket_errors = {n: int(v) for n, v in zip(names, sockets.groups(), strict=True) if int(v)}
    return WrkResult(
        rps=float(rps.group(1)),
        p50_ms=latency("50"),
        p99_ms=latency("99"),
        requests=int(requests.group(1)),
        non_2xx_3xx=int(non_2xx.group(1)) if non_2xx else 0,
        socket_errors=socket_errors,
        statuses={int(c): int(n) for c, n in re.findall(r"^status (\d+) (\d+)$", text, re.M)},
    )


def run_wrk(
    url: str,
    headers: dict[str, str],
    conns: int,
    seconds: float,
    *,
    count_statuses: bool = False,
    vary: str = "",
) -> WrkResult:
    """Drive ``url`` with one wrk thread for ``seconds``; a hard timeout bounds the run.

    ``vary`` names a parameter that takes a new value on every request (VARY_LUA)."""
    args = ["wrk", "-t1", f"-c{conns}", f"-d{max(1, round(seconds))}s", "--latency"]
    args += ["--timeout", "30s"]
    for name, value in headers.items():
        args += ["-H", f"{name}: {value}"]
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(STATUS_LUA if count_statuses else "")
        script.write(VARY_LUA.replace("NAME", vary) if vary else "")
    try:
        if count_statuses or vary:
            args += ["-s", script.name]
        done = subprocess.run(
            [*args, url], capture_output=True, text=True, timeout=seconds + 60, check=False
        )
    finally:
        os.unlink(script.name)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr or done.stdout}")
    return parse_wrk(done.stdout)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Process:
    """A server subprocess on 127.0.0.1, started and always stopped by its own PID."""

    def __init__(self, args: Sequence[str], port: int, log_path: Path, cwd: Path) -> None:
        self.port = port
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, cwd=cwd)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def wait_ready(self, path: str, timeout: float = 60.0) -> None:
        """Poll ``path`` until it answers 200; raise with the server's log if it never does."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                break
            try:
                if get(self.port, path, {})[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        log = self.log_path.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"server on port {self.port} did not become ready:\n{log}")

    def stop(self, timeout: float = 15.0) -> None:
        """Terminate, then kill after ``timeout`` seconds."""
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout)
        self._log.close()


def server_args(db: str, port: int, keep_answers: bool = False) -> list[str]:
    """The server as the benchmark starts it: on 127.0.0.1, the rate limit raised (every
    request of the load passes) and the per-address limit too (wrk is one address).

    A row asks one URL again and again: unless ``keep_answers``, the server keeps no
    answer to send again from memory, so every request runs its view (the read path is
    what the rows measure against their floors)."""
    args = [sys.executable, "-m", "app", "--db", db, "--host", "127.0.0.1", "--port", str(port)]
    args += ["--rate-burst", "1000000000", "--rate-per-second", "1000000000"]
    args += [] if keep_answers else ["--answer-memory-mb", "0"]
    return [*args, "--max-connections-per-address", "100000", "--bootstrap", "false"]


def get(port: int, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """One GET on 127.0.0.1: status, lower-cased headers, body (3xx-5xx raise nothing)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        headers = {name.lower(): value for name, value in response.getheaders()}
        return response.status, headers, response.read()
    finally:
        conn.close()


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process below it (gunicorn's arbiter and its workers)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        try:
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:  # it exited meanwhile
            continue
        queue += [int(child) for child in children]
    return found


def wait_for_children(pid: int, count: int, timeout: float = 60.0) -> list[int]:
    """``pid`` and its ``count`` children once all are there (gunicorn forks one by one)."""
    deadline = time.monotonic() + timeout
    while len(tree := process_tree(pid)) < 1 + count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"process {pid} has {len(tree) - 1} of {count} workers")
        time.sleep(0.05)
    return tree


def cpu_seconds(pids: Sequence[int]) -> float:
    """User plus system CPU time the processes have used so far (/proc/PID/stat)."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return ticks / os.sysconf("SC_CLK_TCK")


def start_redis(work: Path) -> Process | None:
    """A redis-server on a free local port without persistence, or None when not installed."""
    if not shutil.which("redis-server"):
        return None
    port = free_port()
    args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    args += ["--appendonly", "no", "--dir", str(work)]
    server = Process(args, port, work / "redis.log", work)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and server.popen.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return server
        except OSError:
            time.sleep(0.05)
    server.stop()
    raise RuntimeError(f"redis-server did not answer:\n{server.log_path.read_text()[-2000:]}")


def proc_status_kib(pid: int, name: str) -> int:
    """A field of /proc/PID/status in KiB (VmRSS: now, VmHWM: peak since the last reset)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {name} in /proc/{pid}/status")


def reset_peak_rss(pid: int) -> None:
    """Reset VmHWM to the current RSS (``echo 5 > /proc/PID/clear_refs``)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def floor_seconds(
    conn: sqlite3.Connection, sqls: Sequence[str], params: Sequence[object], budget: float
) -> list[tuple[float, str]]:
    """Median in-process time of each SQL building a JSON array, and the array it built.

    The variants alternate in every round, so a noisy neighbour weighs on them alike.
    """
    texts = [conn.execute(sql, params).fetchone()[0] for sql in sqls]  # warm the cache
    times: list[list[float]] = [[] for _ in sqls]
    started = time.perf_counter()
    while len(times[0]) < 5 or (time.perf_counter() - started < budget and len(times[0]) < 5000):
        for sql, spent in zip(sqls, times, strict=True):
            t0 = time.perf_counter()
            conn.execute(sql, params).fetchone()
            spent.append(time.perf_counter() - t0)
    return [(statistics.median(t), text) for t, text in zip(times, texts, strict=True)]


def machine() -> dict[str, str]:
    """Where the figures came from."""
    model = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    wrk = subprocess.run(["wrk", "--version"], capture_output=True, text=True, check=False)
    import aiohttp

    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpus": f"{len(os.sched_getaffinity(0))} (nproc) · {model}",
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "aiohttp": aiohttp.__version__,
        "wrk": (wrk.stdout or wrk.stderr).split(" Copyright")[0].strip(),
        "load": "1/5/15-minute load average {:.2f} {:.2f} {:.2f} at the start".format(
            *os.getloadavg()
        ),
    }


def require_wrk() -> bool:
    """Whether wrk is installed; say how to get it when it is not."""
    if shutil.which("wrk"):
        return True
    print("wrk is needed: `make wrk` or `apt-get install wrk`", file=sys.stderr)
    return False
