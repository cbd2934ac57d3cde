"""The webhook sender's throughput: messages a second to a local HTTPS receiver, against
the feed's own rate (the same events read from the same store in the same batches,
sending nothing), both measured in this run on a copy of the data set.

Each message is a signed POST answered 200 and a committed write (the position and the
delivery log), so the sender runs at a small fraction of the read rate; the row shows
how small. The receiver (aiohttp, a throwaway self-signed certificate made by openssl)
runs in the same process as the sender, on 127.0.0.1, allowed by the operator setting.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3
import ssl
import subprocess
import time
from dataclasses import replace
from pathlib import Path

from aiohttp import web

from app.data import webhooks
from app.data.schema import connect_writer, write_transaction
from app.tools.webhook_sender import SCHEDULE, Settings, SqliteStore, networks_of, run_sender

MESSAGES = 1000  # the company's last events, sent once each
TARGET = 0.001  # messages/s over the feed's events/s
LAST_EVENTS = """SELECT ev.seq, ev.id FROM campaign_events ev JOIN campaigns c
    ON c.id = ev.campaign_id WHERE c.company_id = 1 ORDER BY ev.seq DESC, ev.id DESC
    LIMIT 1 OFFSET ?"""


def certificate(work: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (the sender trusts it as its CA file)."""
    cert, key = work / "hook.pem", work / "hook.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
         "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def subscribe(db: Path, url: str) -> int:
    """A subscription to every type, placed before company 1's last MESSAGES events."""
    conn = connect_writer(db)
    try:
        with write_transaction(conn):
            sub = webhooks.Subscription.of(1, url, "open,click,report,fail", "bench")
            webhook_id, _ = webhooks.create(conn, sub, dt.datetime.now(dt.UTC))
            row = conn.execute(LAST_EVENTS, (MESSAGES,)).fetchone() or (0, 0)
            conn.execute(
                "UPDATE webhooks SET position_seq = ?, position_id = ? WHERE id = ?",
                (*row, webhook_id),
            )
        return int(conn.execute(f"SELECT count(*) FROM ({LAST_EVENTS.split(' LIMIT')[0]}"
                                " LIMIT ?)", (MESSAGES,)).fetchone()[0])  # fmt: skip
    finally:
        conn.close()


async def read_alone(db: Path) -> float:
    """Seconds to read the subscription's events in the sender's batches, sending none."""
    store = SqliteStore(str(db))
    try:
        started = time.perf_counter()
        for hook in await store.hooks():
            while batch := await store.events(hook):
                _, seq, event_id, _ = batch[-1]
                hook = replace(hook, position=(seq, event_id))
        return time.perf_counter() - started
    finally:
        await store.close()


async def measure(db: Path, work: Path) -> tuple[int, float, float]:
    cert, key = certificate(work)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    received = 0

    async def hook(request: web.Request) -> web.Response:
        nonlocal received
        await request.read()
        received += 1
        return web.Response()

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=served).start()
    try:
        expected = subscribe(db, f"https://127.0.0.1:{runner.addresses[0][1]}/hook")
        read_s = await read_alone(db)
        started = time.perf_counter()
        settings = Settings(SCHEDULE, networks_of("127.0.0.1"), str(cert), once=True)
        await run_sender(str(db), None, settings)
        send_s = time.perf_counter() - started
    finally:
        await runner.cleanup()
    if received != expected:
        raise SystemExit(f"the sender delivered {received} messages of {expected}")
    return received, send_s, read_s


def report(db: str, work: Path) -> list[str]:
    """The markdown lines of the sender's section."""
    copy = work / "webhooks.sqlite3"
    with sqlite3.connect(db) as source:
        source.execute("VACUUM INTO ?", (str(copy),))
    sent, send_s, read_s = asyncio.run(measure(copy, work))
    rate, feed_rate = sent / send_s, sent / read_s
    ratio = rate / feed_rate
    verdict = "ok" if ratio >= TARGET else "MISSED"
    return [
        "",
        f"The webhook sender (`reporting-webhooks run`, one subscription, {sent:,} messages"
        " to a receiver on 127.0.0.1 over HTTPS, each answered 200):",
        "",
        "| scenario | messages/s | reference | ratio | target | ok/MISSED |",
        "|---|---|---|---|---|---|",
        f"| (v) webhook sender | {rate:,.0f} | the feed read alone: {feed_rate:,.0f} events/s"
        f" | {ratio:.3f} | ≥ {TARGET} | {verdict} |",
    ]
