"""The webhook sender against a real HTTPS receiver on 127.0.0.1 (allowed by the
operator setting), every message verified with PyPI's ``standardwebhooks``.

The receiver answers as each test scripts it (500, 410, slow); the retry schedule is
the sender's setting, shortened here (docs/operations.md). Events are loaded by the
real loader into a copy of the sample; the sender runs in-process (``--once``) or, to
be killed mid-way, as the real command.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import re
import signal
import sqlite3
import ssl
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import standardwebhooks.webhooks
import trustme
from aiohttp import web
from standardwebhooks import Webhook, WebhookVerificationError

from app.data.schema import connect_writer
from app.tools.cli import ToolError
from app.tools.loader import load_files
from app.tools.pg_loader import load_pg
from app.tools.swap import swap
from app.tools.webhook_sender import (
    GuardedResolver,
    PgStore,
    Sender,
    Settings,
    SqliteStore,
    networks_of,
    retry_after,
    run_sender,
)
from app.tools.webhooks import main

from .support.factories import API, KEYS, query
from .support.servers import GUARD_SECONDS, ROOT, clean_env
from .support.stores import EACH_STORE, Store, database_copy

LOCAL = networks_of("127.0.0.1")
SHORT = (0.0, 0.05, 0.05)  # the schedule, shortened: three attempts
MB = b"x" * 2**20


@dataclass
class Receiver:
    """An HTTPS endpoint that keeps each request and answers the next scripted status."""

    url: str = ""
    ca_file: str = ""
    answers: list[int] = field(default_factory=list)
    delay: float = 0.0
    got: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    # Run as each request comes (an operator's command while a message is in flight);
    # returns the status to answer, or None for the next scripted one.
    during: Callable[[bytes], int | None] | None = None
    # A body of this many MB after the status line, a pause after each; and how much of
    # it the connection took before the sender closed it.
    body_mb: int = 0
    body_pause: float = 0.0
    body_sent: int = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        await asyncio.sleep(self.delay)
        self.got.append(({k.lower(): v for k, v in request.headers.items()}, body))
        status = self.during(body) if self.during else None
        if status is None:
            status = self.answers.pop(0) if self.answers else 200
        if not self.body_mb:
            return web.Response(status=status)
        answer = web.StreamResponse(status=status)
        answer.content_length = self.body_mb * len(MB)
        await answer.prepare(request)
        with contextlib.suppress(ConnectionError):  # the sender closed the connection
            for _ in range(self.body_mb):
                await answer.write(MB)
                self.body_sent += len(MB)
                await asyncio.sleep(self.body_pause)
        return answer


@pytest.fixture
async def receiver(tmp_path: Path) -> AsyncIterator[Receiver]:
    ca = trustme.CA()
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(served)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    hook = Receiver(ca_file=str(tmp_path / "ca.pem"))
    app = web.Application()
    app.router.add_post("/hook", hook.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=served)
    await site.start()
    hook.url = f"https://127.0.0.1:{runner.addresses[0][1]}/hook"
    yield hook
    await runner.cleanup()


def subscribe(db: Path, url: str, events: str = "fail,report") -> tuple[str, str]:
    """A subscription made by the tool: its id and its secret."""
    return subscribe_on(["--db", str(db)], url, events)


def subscribe_on(store: list[str], url: str, events: str = "fail,report") -> tuple[str, str]:
    """The same on the store ``store`` names (``--db`` or ``--database-url``)."""
    lines = tool(store, "create", "--company", "1", "--url", url, "--events", events,
                 "--label", "SOC")  # fmt: skip
    return lines[0].split()[2], lines[1].strip()


def tool(store: list[str], *argv: str) -> list[str]:
    """The webhook tool's command on the store ``store`` names; the lines it printed."""
    from contextlib import redirect_stdout
    from io import StringIO

    out = StringIO()
    with redirect_stdout(out):
        assert main([*store, *argv]) == 0
    return out.getvalue().splitlines()


def events_file(tmp_path: Path, ids: range, minute: int = 0, kinds: Any = None) -> Path:
    """A fixture of events of company 1's campaign 1."""
    kinds = kinds or ("fail", "report", "click")  # from id 1001 on
    events = [
        {"id": i, "campaign_id": 1, "employee_id": 18, "type": kinds[(i - 1001) % len(kinds)],
         "timestamp": f"2026-03-01T10:{minute:02d}:{i % 60:02d}Z", "with_captcha": False}
        for i in ids
    ]  # fmt: skip
    path = tmp_path / f"events{ids.start}-{minute}.json"
    path.write_text(json.dumps({"campaign_events": events}), encoding="utf-8")
    return path


def new_events(db: Path, tmp_path: Path, ids: range, minute: int = 0, kinds: Any = None) -> None:
    """Events of company 1's campaign 1, loaded by the real loader."""
    load_files(db, [events_file(tmp_path, ids, minute, kinds)])


async def send(db: Path, hook: Receiver, schedule: tuple[float, ...] = SHORT) -> None:
    await run_sender(str(db), None, Settings(schedule, LOCAL, hook.ca_file, once=True))


def verified(secret: str, hook: Receiver) -> list[Any]:
    return [Webhook(secret).verify(body, headers) for headers, body in hook.got]


async def test_every_message_verifies_in_order_with_only_its_types(
    sample_db: Path, tmp_path: Path, receiver: Receiver
) -> None:
    _, secret = subscribe(sample_db, receiver.url)
    new_events(sample_db, tmp_path, range(1001, 1010))
    await send(sample_db, receiver)
    messages = verified(secret, receiver)
    assert [m["data"]["id"] for m in messages] == [1001, 1002, 1004, 1005, 1007, 1008]
    assert [m["type"] for m in messages[:2]] == ["campaign_event.fail", "campaign_event.report"]
    assert messages[0]["timestamp"] == messages[0]["data"]["timestamp"]
    assert set(messages[0]["data"]) >= {"campaign", "victim", "automation", "ip"}
    headers = receiver.got[0][0]
    assert abs(int(headers["webhook-timestamp"]) - dt.datetime.now().timestamp()) < 60
    assert headers["webhook-signature"].startswith("v1,")
    await send(sample_db, receiver)  # caught up: nothing again
    assert len(receiver.got) == 6


async def test_a_replay_after_five_minutes_fails(
    sample_db: Path, tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, secret = subscribe(sample_db, receiver.url)
    new_events(sample_db, tmp_path, range(1001, 1002))
    await send(sample_db, receiver)
    [(headers, body)] = receiver.got
    Webhook(secret).verify(body, headers)

    class Later(dt.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return dt.datetime.now(tz) + dt.timedelta(minutes=5, seconds=1)

    monkeypatch.setattr(standardwebhooks.webhooks, "datetime", Later)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body, headers)


async def test_500_then_200_is_two_attempts_of_one_message(
    sample_db: Path, tmp_path: Path, receiver: Receiver
) -> None:
    webhook_id, secret = subscribe(sample_db, receiver.url)
    new_events(sample_db, tmp_path, range(1001, 1002))
    receiver.answers = [500]
    await send(sample_db, receiver)
    assert len(verified(secret, receiver)) == 2
    assert receiver.got[0][0]["webhook-id"] == receiver.got[1][0]["webhook-id"]
    log = query(sample_db, "SELECT attempt, status, response_status FROM webhook_deliveries"
                " WHERE webhook_id = ? ORDER BY id", int(webhook_id))  # fmt: skip
    assert log == [(1, "failed", 500), (2, "succeeded", 200)]


async def test_410_disables_and_a_spent_schedule_marks_failing(
    sample_db: Path, tmp_path: Path, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    gone, _ = subscribe(sample_db, receiver.url)
    new_events(sample_db, tmp_path, range(1001, 1003))
    receiver.answers = [410]
    await send(sample_db, receiver)
    assert len(receiver.got) == 1
    status = "SELECT status, consecutive_failures FROM webhooks WHERE id = ?"
    assert query(sample_db, status, int(gone)) == [("disabled", 1)]
    failing, _ = subscribe(sample_db, receiver.url)
    new_events(sample_db, tmp_path, range(1003, 1005))
    receiver.answers = [503, 429, 500]
    await send(sample_db, receiver)
    assert query(sample_db, status, int(failing)) == [("failing", 3)]
    assert f"webhook {failing}: message" in caplog.text and "marked failing" in caplog.text


async def test_a_changed_event_is_a_new_message(
    sample_db: Path, tmp_path: Path, receiver: Receiver
) -> None:
    _, secret = subscribe(sample_db, receiver.url)
    new_events(sample_db, tmp_path, range(1001, 1002))
    await send(sample_db, receiver)
    new_events(sample_db, tmp_path, range(1001, 1002), minute=30)  # the same event, changed
    await send(sample_db, receiver)
    first, second = verified(secret, receiver)
    assert first["data"]["id"] == second["data"]["id"] == 1001
    assert first["data"]["timestamp"] != second["data"]["timestamp"]
    assert receiver.got[0][0]["webhook-id"] != receiver.got[1][0]["webhook-id"]


def copy_database(source: Path, target: Path) -> None:
    """A consistent copy of a SQLite file (a backup, as docs/operations.md takes one)."""
    with (
        contextlib.closing(sqlite3.connect(source)) as src,
        contextlib.closing(sqlite3.connect(target)) as dst,
    ):
        src.backup(dst)


@contextlib.asynccontextmanager
async def backed_up(store: Store, tmp_path: Path) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """A backup of the store's database now; the function that restores it (SQLite: a
    copy swapped in with reporting-swap's function; PostgreSQL: the database made again
    from its copy)."""
    if not store.url:
        backup = tmp_path / "backup.sqlite3"
        copy_database(store.sqlite_path, backup)

        async def restore_file() -> None:
            copy_database(backup, tmp_path / "restored.sqlite3")
            swap(tmp_path / "restored.sqlite3", store.sqlite_path)

        yield restore_file
        return
    async with database_copy(store.url) as restore_database:
        yield restore_database


async def send_once(store: Store, hook: Receiver) -> None:
    """The sender on the store under test, until caught up."""
    settings = Settings(SHORT, LOCAL, hook.ca_file, once=True)
    await run_sender(None if store.url else str(store.sqlite_path), store.url or None, settings)


def on_store(store: Store) -> list[str]:
    """The tools' arguments naming the store under test."""
    return ["--database-url", store.url] if store.url else ["--db", str(store.sqlite_path)]


@EACH_STORE
async def test_a_change_written_again_after_a_restore_is_a_new_message(
    store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    """A restore rewinds the change sequence, so a load after it writes another version
    of an event at the place a sent one had: its webhook-id is new (the change's feed
    mark), and a receiver deduplicating by it does not drop it. Every attempt of one
    message keeps its id."""
    _, secret = await asyncio.to_thread(subscribe_on, on_store(store), receiver.url)
    async with backed_up(store, tmp_path) as restore:
        await store.load([events_file(tmp_path, range(1001, 1002), kinds=("fail",))])
        receiver.answers = [500]
        await send_once(store, receiver)
        await restore()
        await store.load([events_file(tmp_path, range(1001, 1002), 30, kinds=("report",))])
        await send_once(store, receiver)
    sent, retried, written_again = verified(secret, receiver)
    first, again, second = (headers["webhook-id"] for headers, _ in receiver.got)
    assert first == again and sent == retried
    assert (sent["type"], written_again["type"]) == ("campaign_event.fail", "campaign_event.report")
    assert sent["data"]["id"] == written_again["data"]["id"] == 1001
    assert second != first
    assert second.rsplit("_", 1)[0] == first.rsplit("_", 1)[0]  # the same place, a new mark


@EACH_STORE
async def test_an_event_written_before_feed_marks_keeps_its_id(
    store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    """An event whose change has the empty mark (written before marks began) keeps the
    id it had, ``msg_<seq>_<id>``: a message in flight when the database was upgraded
    comes again with the same id. Later changes carry their mark."""
    _, secret = await asyncio.to_thread(subscribe_on, on_store(store), receiver.url)
    await store.load([events_file(tmp_path, range(1001, 1002), kinds=("fail",))])
    await store.execute("UPDATE meta SET value = '' WHERE key LIKE 'feed_mark:%'")  # upgraded
    await store.load([events_file(tmp_path, range(1002, 1003), kinds=("fail",))])
    await send_once(store, receiver)
    assert [m["data"]["id"] for m in verified(secret, receiver)] == [1001, 1002]
    before, after = (headers["webhook-id"] for headers, _ in receiver.got)
    assert re.fullmatch(r"msg_[0-9]+_1001", before)
    assert re.fullmatch(r"msg_[0-9]+_1002_[0-9a-f]{16}", after)


async def test_during_a_rotation_both_secrets_verify(
    sample_db: Path, tmp_path: Path, receiver: Receiver
) -> None:
    webhook_id, old = subscribe(sample_db, receiver.url)
    assert main(["--db", str(sample_db), "rotate-secret", webhook_id]) == 0
    [(new,)] = query(sample_db, "SELECT secret FROM webhooks WHERE id = ?", int(webhook_id))
    new_events(sample_db, tmp_path, range(1001, 1002))
    await send(sample_db, receiver)
    assert len(receiver.got[0][0]["webhook-signature"].split(" ")) == 2
    assert verified(old, receiver) == verified(new, receiver)
    conn = connect_writer(sample_db)  # the 24 hours have passed
    conn.execute("UPDATE webhooks SET old_secret_until = '2000-01-01T00:00:00Z'")
    conn.close()
    new_events(sample_db, tmp_path, range(1002, 1003))
    await send(sample_db, receiver)
    Webhook(new).verify(receiver.got[1][1], receiver.got[1][0])
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(receiver.got[1][1], receiver.got[1][0])


async def test_a_second_rotation_signs_with_the_two_latest_secrets(
    sample_db: Path, tmp_path: Path, receiver: Receiver
) -> None:
    """Only the latest old secret is kept (docs/operations.md): rotated twice within the
    24 hours, messages carry the second and third secrets' signatures, not the first's."""
    webhook_id, first = subscribe(sample_db, receiver.url)
    secrets = []
    for _ in range(2):
        assert main(["--db", str(sample_db), "rotate-secret", webhook_id]) == 0
        [(secret,)] = query(sample_db, "SELECT secret FROM webhooks WHERE id = ?", int(webhook_id))
        secrets.append(secret)
    new_events(sample_db, tmp_path, range(1001, 1002))
    await send(sample_db, receiver)
    headers, body = receiver.got[0]
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in secrets:
        Webhook(secret).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(first).verify(body, headers)


@pytest.mark.parametrize("change", ["disable", "delete", "rotate-secret"])
async def test_an_operator_s_change_counts_from_the_next_attempt(
    sample_db: Path, tmp_path: Path, receiver: Receiver, change: str
) -> None:
    """While a message is being retried: a subscription disabled gets nothing more and
    stays disabled; one deleted gets nothing more, and the run writes nothing into a new
    subscription (of another company) that takes its freed id; after a new secret, the
    next attempt is signed with it."""
    webhook_id, _ = subscribe(sample_db, receiver.url)
    new_events(sample_db, tmp_path, range(1001, 1002))  # one fail
    store = ["--db", str(sample_db)]
    rotated: list[str] = []

    def operator(body: bytes) -> int | None:
        if len(receiver.got) == 1:
            printed = tool(store, change, webhook_id)
            if change == "delete":  # SQLite gives the freed id to the next one
                made = tool(store, "create", "--company", "2", "--url", receiver.url,
                            "--events", "fail", "--label", "other")  # fmt: skip
                assert made[0].split()[2] == webhook_id
            rotated.extend(line.strip() for line in printed if line.strip().startswith("whsec_"))
        return 500 if len(receiver.got) == 1 else 200

    receiver.during = operator
    await send(sample_db, receiver, (0.0, 0.05, 0.05, 0.05))
    if change == "rotate-secret":
        assert len(receiver.got) == 2
        headers, body = receiver.got[1]
        assert Webhook(rotated[0]).verify(body, headers)["data"]["id"] == 1001
        return
    assert len(receiver.got) == 1  # nothing after the change
    rows = query(sample_db, "SELECT id, company_id, status, consecutive_failures FROM webhooks")
    if change == "disable":
        assert rows == [(int(webhook_id), 1, "disabled", 1)]
    else:
        assert rows == [(int(webhook_id), 2, "enabled", 0)]
        assert query(sample_db, "SELECT count(*) FROM webhook_deliveries") == [(0,)]


async def test_a_failing_subscription_holds_up_no_other(
    sample_db: Path, tmp_path: Path, receiver: Receiver
) -> None:
    """A message being retried waits on its own: another subscription's new event goes
    out meanwhile, not once the retries are spent."""
    subscribe(sample_db, receiver.url, "fail")
    subscribe(sample_db, receiver.url, "click")
    receiver.during = lambda body: 500 if b'"campaign_event.fail"' in body else 200
    new_events(sample_db, tmp_path, range(1001, 1002), kinds=("fail",))
    store = SqliteStore(str(sample_db))
    sender = Sender(store, Settings((0.0, 600.0), LOCAL, receiver.ca_file, poll=0.05))
    running = asyncio.create_task(sender.run())
    try:
        await until(lambda: len(receiver.got) == 1)  # the fail's first attempt
        new_events(sample_db, tmp_path, range(1002, 1003), kinds=("click",))
        await until(lambda: len(receiver.got) == 2)
        assert b'"campaign_event.click"' in receiver.got[1][1]
    finally:
        sender.stopping.set()
        await running
        await store.close()


async def test_receivers_that_never_answer_hold_up_no_other_company(
    sample_db: Path, tmp_path: Path, receiver: Receiver
) -> None:
    """A hundred subscriptions whose receiver takes the request and never answers:
    another company's message still goes out while their attempts hang, once, and is
    logged as the success it was."""
    held: list[asyncio.StreamWriter] = []

    async def never_answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    ca, served = trustme.CA(), ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(served)  # the handshake is done
    both = tmp_path / "both.pem"  # the sender trusts both receivers
    both.write_bytes(Path(receiver.ca_file).read_bytes() + ca.cert_pem.bytes())
    hole = await asyncio.start_server(never_answer, "127.0.0.1", 0, ssl=served)
    url = f"https://127.0.0.1:{hole.sockets[0].getsockname()[1]}/in"
    for _ in range(100):
        subscribe(sample_db, url, "fail")
    webhook_id = tool(["--db", str(sample_db)], "create", "--company", "2", "--url",
                      receiver.url, "--events", "fail", "--label", "SOC")[0].split()[2]  # fmt: skip
    new_events(sample_db, tmp_path, range(1001, 1002), kinds=("fail",))
    store = SqliteStore(str(sample_db))
    # An attempt's time far past the test's wait: the hanging attempts never end by it.
    settings = Settings((0.0,), LOCAL, str(both), poll=0.05, timeout=600.0)
    sender = Sender(store, settings)
    running = asyncio.create_task(sender.run())
    try:
        await until(lambda: len(held) == 100)
        other = {"id": 1002, "campaign_id": 3, "employee_id": 41, "type": "fail",
                 "timestamp": "2026-03-01T10:01:00Z", "with_captcha": False}  # fmt: skip
        (tmp_path / "other.json").write_text(json.dumps({"campaign_events": [other]}))
        load_files(sample_db, [tmp_path / "other.json"])
        await until(lambda: len(receiver.got) == 1)
    finally:
        sender.stopping.set()
        for writer in held:  # their attempts fail at once
            writer.transport.abort()
        await running
        await store.close()
        hole.close()
    assert json.loads(receiver.got[0][1])["data"]["id"] == 1002
    log = "SELECT attempt, status, response_status FROM webhook_deliveries WHERE webhook_id = ?"
    assert query(sample_db, log, int(webhook_id)) == [(1, "succeeded", 200)]


@contextlib.asynccontextmanager
async def sending(db: Path, hook: Receiver, schedule: tuple[float, ...]) -> AsyncIterator[None]:
    """The sender running (not ``once``: it takes up new subscriptions as it polls)."""
    store = SqliteStore(str(db))
    sender = Sender(store, Settings(schedule, LOCAL, hook.ca_file, poll=0.05))
    running = asyncio.create_task(sender.run())
    try:
        yield
    finally:
        sender.stopping.set()
        await running
        await store.close()


async def test_a_subscription_under_a_deleted_one_s_id_waits_on_nothing_of_it(
    sample_db: Path, tmp_path: Path, receiver: Receiver
) -> None:
    """Deleted while its message waits for a long retry, and its id given at once to a
    new subscription of the same company: the new one's first message goes out now, and
    nothing of the deleted one's run is logged under it."""
    old_id, _ = subscribe(sample_db, receiver.url)
    new_events(sample_db, tmp_path, range(1001, 1002))
    store = ["--db", str(sample_db)]
    made: list[tuple[str, str]] = []

    def operator(body: bytes) -> int:
        if not made:  # the old one's first attempt, answered 500
            tool(store, "delete", old_id)
            made.append(subscribe(sample_db, receiver.url))
            return 500
        return 200

    receiver.during = operator
    async with sending(sample_db, receiver, (0.0, 600.0)):
        await until(lambda: len(receiver.got) == 1)
        new_id, secret = made[0]
        assert new_id == old_id
        new_events(sample_db, tmp_path, range(1002, 1003))
        await until(lambda: len(receiver.got) == 2)
    headers, body = receiver.got[1]
    assert Webhook(secret).verify(body, headers)["data"]["id"] == 1002
    log = "SELECT event_id, status FROM webhook_deliveries WHERE webhook_id = ?"
    assert query(sample_db, log, int(new_id)) == [(1002, "succeeded")]


async def test_enabled_again_while_waiting_it_sends_at_once(
    sample_db: Path, tmp_path: Path, receiver: Receiver
) -> None:
    """``disable`` then ``enable`` while a message waits for a long retry: the message
    goes again now (from attempt 1), not once the old wait ends."""
    webhook_id, _ = subscribe(sample_db, receiver.url)
    new_events(sample_db, tmp_path, range(1001, 1002))
    receiver.answers = [500]
    store = ["--db", str(sample_db)]
    log = "SELECT attempt, status FROM webhook_deliveries ORDER BY id"
    async with sending(sample_db, receiver, (0.0, 600.0)):
        await until(lambda: query(sample_db, log) == [(1, "failed")])
        tool(store, "disable", webhook_id)
        tool(store, "enable", webhook_id)
        await until(lambda: len(receiver.got) == 2)
    assert receiver.got[0][0]["webhook-id"] == receiver.got[1][0]["webhook-id"]
    assert query(sample_db, log) == [(1, "failed"), (1, "succeeded")]


async def test_a_running_sender_follows_the_file_swapped_in(
    sample_db: Path, tmp_path: Path, receiver: Receiver
) -> None:
    """A restored file swapped in (reporting-swap's function) while a message is in
    flight: the sender goes on with the file now served, the subscription from its
    position there (the message read from the old file is not logged into it), and
    delivers what is loaded into it, logging there; a subscription made there is taken
    up and a ``disable`` there is obeyed. Its lock stays."""
    webhook_id, secret = subscribe(sample_db, receiver.url, "fail")
    restored = tmp_path / "restored.sqlite3"
    copy_database(sample_db, restored)  # the subscription before any event

    def operator(body: bytes) -> None:
        if len(receiver.got) == 1:  # event 1001's message, read from the old file
            swap(restored, sample_db)
            new_events(sample_db, tmp_path, range(1002, 1003), kinds=("fail",))

    receiver.during = operator
    log = "SELECT webhook_id, event_id, status FROM webhook_deliveries ORDER BY id"
    async with sending(sample_db, receiver, SHORT):
        new_events(sample_db, tmp_path, range(1001, 1002), kinds=("fail",))
        await until(lambda: query(sample_db, log) == [(int(webhook_id), 1002, "succeeded")])
        with pytest.raises(ToolError, match="another webhook sender is running"):
            SqliteStore(str(sample_db))
        other_id, other = subscribe(sample_db, receiver.url, "fail")
        tool(["--db", str(sample_db)], "disable", webhook_id)
        new_events(sample_db, tmp_path, range(1003, 1004), kinds=("fail",))
        await until(lambda: len(query(sample_db, log)) == 2)
    assert query(sample_db, log)[1] == (int(other_id), 1003, "succeeded")
    assert len(receiver.got) == 3  # none for the disabled one
    assert [Webhook(secret).verify(b, h)["data"]["id"] for h, b in receiver.got[:2]] == [1001, 1002]
    assert Webhook(other).verify(receiver.got[2][1], receiver.got[2][0])["data"]["id"] == 1003


async def test_a_2xx_is_its_status_line_however_slow_its_body(
    sample_db: Path, tmp_path: Path, receiver: Receiver
) -> None:
    """A 200 whose body takes longer than the attempt may: success, once."""
    subscribe(sample_db, receiver.url)
    new_events(sample_db, tmp_path, range(1001, 1002))
    receiver.body_mb, receiver.body_pause = 8, 0.25  # 2 s of body
    settings = Settings((0.0, 0.05), LOCAL, receiver.ca_file, once=True, timeout=0.5)
    await run_sender(str(sample_db), None, settings)
    log = "SELECT attempt, status, response_status, error FROM webhook_deliveries"
    assert query(sample_db, log) == [(1, "succeeded", 200, None)]
    assert len(receiver.got) == 1


async def test_a_receiver_s_body_is_not_read_whole(
    sample_db: Path, tmp_path: Path, receiver: Receiver
) -> None:
    """A 64 MB answer: the sender closes the connection after the status line, so the
    receiver gets to send no more than what the sockets between them buffer."""
    subscribe(sample_db, receiver.url)
    new_events(sample_db, tmp_path, range(1001, 1002))
    receiver.body_mb = 64
    await send(sample_db, receiver)
    assert len(receiver.got) == 1
    assert receiver.body_sent < 32 * len(MB)


@EACH_STORE
async def test_disabled_during_its_last_attempt_it_is_not_said_failing(
    store: Store, tmp_path: Path, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    """It stays disabled, and the sender logs no line marking it failing."""
    on = ["--database-url", store.url] if store.url else ["--db", str(store.sqlite_path)]
    webhook_id, _ = await asyncio.to_thread(subscribe_on, on, receiver.url)
    await store.load([events_file(tmp_path, range(1001, 1002))])

    def operator(body: bytes) -> int:
        if len(receiver.got) == 2:  # the last attempt
            with ThreadPoolExecutor(1) as apart:  # the tool runs a loop of its own
                apart.submit(tool, on, "disable", webhook_id).result()
        return 500

    receiver.during = operator
    settings = Settings((0.0, 0.05), LOCAL, receiver.ca_file, once=True)
    await run_sender(None if store.url else str(store.sqlite_path), store.url or None, settings)
    listed = await asyncio.to_thread(tool, on, "list")
    assert len(receiver.got) == 2 and "disabled" in listed[1]
    assert "marked failing" not in caplog.text


@pytest.mark.parametrize(
    ("given", "seconds"),
    [("7", 7.0), ("1e9", 86400.0), ("inf", 86400.0), ("nan", 0.0), ("-5", 0.0),
     ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0), (None, 0.0)],
)  # fmt: skip
def test_a_receiver_s_retry_after_is_read_up_to_a_day(given: str | None, seconds: float) -> None:
    """A receiver asking for a year (or for ever) waits the schedule's longest delay."""
    assert retry_after(given) == seconds


async def until(condition: Callable[[], bool]) -> None:
    """Wait for ``condition``, up to a bound far past any expected wait."""
    for _ in range(1200):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("never happened")


async def test_inner_addresses_are_refused_unless_allowed(
    sample_db: Path, tmp_path: Path, receiver: Receiver
) -> None:
    webhook_id, _ = subscribe(sample_db, receiver.url)
    new_events(sample_db, tmp_path, range(1001, 1002))
    await run_sender(str(sample_db), None, Settings(SHORT, (), receiver.ca_file, once=True))
    assert receiver.got == []
    errors = query(sample_db, "SELECT error FROM webhook_deliveries WHERE webhook_id = ?",
                   int(webhook_id))  # fmt: skip
    assert len(errors) == 3 and "may not reach" in errors[0][0]


async def test_a_name_of_inner_addresses_is_refused_saying_why(
    sample_db: Path, tmp_path: Path, receiver: Receiver
) -> None:
    """localhost resolves to loopback only: nothing is sent, and the log says why."""
    webhook_id, _ = subscribe(sample_db, receiver.url.replace("127.0.0.1", "localhost"))
    new_events(sample_db, tmp_path, range(1001, 1002))
    await run_sender(str(sample_db), None, Settings((0.0,), (), receiver.ca_file, once=True))
    assert receiver.got == []
    [(error,)] = query(sample_db, "SELECT error FROM webhook_deliveries WHERE webhook_id = ?",
                       int(webhook_id))  # fmt: skip
    assert "localhost resolves only to addresses webhooks may not reach" in error


@pytest.mark.parametrize(
    "host",
    ["[64:ff9b::a9fe:a9fe]", "[64:ff9b::7f00:1]", "[2002:a00:1::1]", "[::7f00:1]",
     "[::ffff:169.254.169.254]", "[fec0::1]", "2130706433", "017700000001", "127.1"],
)  # fmt: skip
async def test_an_address_on_the_way_to_an_inner_one_is_refused(host: str) -> None:
    """NAT64, 6to4, IPv4-compatible and -mapped addresses lead to the IPv4 address they
    carry; site-local ones are internal; the socket reads the old numeric spellings as
    127.0.0.1 (the tool refuses them; a row written otherwise may have one). Allowing
    127.0.0.1 allows none of them."""
    resolver = GuardedResolver(LOCAL)
    assert resolver.refuses(f"https://{host}/hook")
    assert not resolver.refuses("https://[64:ff9b::808:808]/hook")  # a public one
    await resolver.close()


def sender_command(db: Path, hook: Receiver, *extra: str) -> list[str]:
    return [sys.executable, str(ROOT / "scripts" / "webhooks.py"), "--db", str(db), "run",
            "--allow-addresses", "127.0.0.1", "--ca-file", hook.ca_file,
            "--retry-schedule", "0,0.05", *extra]  # fmt: skip


async def test_killed_mid_way_and_restarted_loses_and_repeats_nothing(
    sample_db: Path, tmp_path: Path, receiver: Receiver
) -> None:
    """SIGKILL by PID while messages flow; a restart sends the rest; the receiver counts
    each event exactly once by webhook-id (a message it answered 2xx but whose position
    was not yet stored comes again with the same id)."""
    _, secret = subscribe(sample_db, receiver.url, "fail,report,click")
    new_events(sample_db, tmp_path, range(1001, 1041))
    receiver.delay = 0.02
    proc = await asyncio.create_subprocess_exec(*sender_command(sample_db, receiver),
                                                env=clean_env())  # fmt: skip
    while len(receiver.got) < 12:
        await asyncio.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    again = await asyncio.create_subprocess_exec(*sender_command(sample_db, receiver, "--once"),
                                                 env=clean_env())  # fmt: skip
    assert await again.wait() == 0
    by_id = {h["webhook-id"]: Webhook(secret).verify(b, h)["data"]["id"] for h, b in receiver.got}
    assert sorted(by_id.values()) == list(range(1001, 1041))


async def test_a_second_sender_is_refused_and_sigterm_stops_cleanly(
    sample_db: Path, tmp_path: Path, receiver: Receiver
) -> None:
    subscribe(sample_db, receiver.url)
    first = await asyncio.create_subprocess_exec(*sender_command(sample_db, receiver),
                                                 env=clean_env())  # fmt: skip
    new_events(sample_db, tmp_path, range(1001, 1004))
    while len(receiver.got) < 2:
        await asyncio.sleep(0.01)
    second = await asyncio.create_subprocess_exec(
        *sender_command(sample_db, receiver), env=clean_env(), stderr=asyncio.subprocess.PIPE
    )
    _, err = await second.communicate()
    assert second.returncode == 1 and b"another webhook sender is running" in err
    first.send_signal(signal.SIGHUP)  # logged; it sends on (it ended mid-send)
    new_events(sample_db, tmp_path, range(1004, 1005))  # a fail: the third message
    deadline = time.monotonic() + GUARD_SECONDS
    while len(receiver.got) < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert len(receiver.got) == 3 and first.returncode is None
    first.send_signal(signal.SIGTERM)
    assert await first.wait() == 0


async def test_the_api_shows_subscriptions_and_attempts_never_secrets(
    sample_db: Path, tmp_path: Path, receiver: Receiver, make_client: Any
) -> None:
    """GET /webhooks (the host only) and /webhooks/{id}/deliveries (newest first,
    filter[status]=failed); another company's subscription is 404."""
    url = receiver.url.replace("https://", "https://user:pw@") + "?token=abc"
    webhook_id, secret = subscribe(sample_db, url)
    new_events(sample_db, tmp_path, range(1001, 1002))
    receiver.answers = [500]
    await send(sample_db, receiver)
    client = await make_client(db=str(sample_db))
    headers = {"X-API-KEY": KEYS[1]}
    listed = await client.get(f"{API}/webhooks", headers=headers)
    text = await listed.text()
    assert secret not in text and "pw" not in text and "token" not in text
    [hook] = json.loads(text)
    assert hook["url_host"] == "127.0.0.1" and hook["event_types"] == ["fail", "report"]
    assert hook["status"] == "enabled" and hook["consecutive_failures"] == 0
    assert hook["last_success_at"] >= hook["last_failure_at"]
    path = f"{API}/webhooks/{webhook_id}/deliveries"
    attempts = await (await client.get(path, headers=headers)).json()
    assert [(a["attempt"], a["status"]) for a in attempts] == [(2, "succeeded"), (1, "failed")]
    failed = await (await client.get(f"{path}?filter[status]=failed", headers=headers)).json()
    assert [(a["attempt"], a["response_status"]) for a in failed] == [(1, 500)]
    assert (await client.get(path, headers={"X-API-KEY": KEYS[2]})).status == 404
    assert await (await client.get(f"{API}/webhooks", headers={"X-API-KEY": KEYS[2]})).json() == []
    bad = await client.get(f"{path}?filter[status]=lost", headers=headers)
    assert bad.status == 400 and bad.content_type == "application/problem+json"


@pytest.mark.parametrize(
    ("sent", "error"),
    [(b"garbage\r\n\r\n", "Bad status line"), (b"HTTP/1.1 2", "Server disconnected")],
)
async def test_a_malformed_answer_is_logged_without_the_url(
    sample_db: Path, tmp_path: Path, make_client: Any, sent: bytes, error: str
) -> None:
    """A receiver that answers no HTTP, or closes the connection in its status line: the
    attempt's error says why (not the unfinished answer's repr), and shows no more of the
    URL than its host (its path and query may hold a token)."""
    ca = trustme.CA()
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(served)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(2**16)
        writer.write(sent)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=served)
    port = server.sockets[0].getsockname()[1]
    webhook_id, _ = subscribe(sample_db, f"https://127.0.0.1:{port}/in/pathtoken?token=qtoken")
    new_events(sample_db, tmp_path, range(1001, 1002))
    async with server:
        settings = Settings((0.0,), LOCAL, str(tmp_path / "ca.pem"), once=True)
        await run_sender(str(sample_db), None, settings)
    client = await make_client(db=str(sample_db))
    path = f"{API}/webhooks/{webhook_id}/deliveries"
    text = await (await client.get(path, headers={"X-API-KEY": KEYS[1]})).text()
    [attempt] = json.loads(text)
    assert attempt["response_status"] is None and attempt["error"].startswith(error)
    assert "token" not in text, text


def test_the_webhooks_listing_is_the_same_on_postgresql(pg_database: str, sample_db: Path) -> None:
    """The same subscription made on both stores reads the same bytes."""
    from app.data.pg.sql import select
    from app.data.webhooks import webhooks_listing

    from .support.stores import run_apart

    argv = ["create", "--company", "1", "--url", "https://a.example/x", "--events", "click",
            "--label", "BI"]  # fmt: skip
    assert main(["--db", str(sample_db), *argv]) == 0
    assert main(["--database-url", pg_database, *argv]) == 0
    listing = webhooks_listing(1)
    lite = [bytes(r[0]) for r in query(sample_db, listing.select(), *listing.select_params)]

    async def on_pg() -> list[bytes]:

        conn = await asyncpg.connect(pg_database)
        try:
            return [bytes(r[0]) for r in await conn.fetch(select(listing), *listing.select_params)]
        finally:
            await conn.close()

    assert run_apart(on_pg()) == lite and len(lite) == 1


async def test_the_sender_on_postgresql_sends_the_same_and_keeps_a_second_out(
    pg_database: str, tmp_path: Path, receiver: Receiver
) -> None:
    """A subscription made on PostgreSQL, events loaded by its loader: the same messages
    as on SQLite, in order, verified; a second sender is refused by the advisory lock."""
    store = ["--database-url", pg_database]
    _, secret = await asyncio.to_thread(subscribe_on, store, receiver.url)
    _, other = await asyncio.to_thread(subscribe_on, store, receiver.url, "click")
    await load_pg(pg_database, [events_file(tmp_path, range(1001, 1010))])
    first = await PgStore.open(pg_database)
    try:
        with pytest.raises(ToolError, match="another webhook sender is running"):
            await PgStore.open(pg_database)
    finally:
        await first.close()
    settings = Settings(SHORT, LOCAL, receiver.ca_file, once=True)
    await run_sender(None, pg_database, settings)  # both subscriptions over one connection
    messages = {m["data"]["id"]: m for m in verified_by_either((secret, other), receiver)}
    assert sorted(messages) == list(range(1001, 1010))
    assert [i for i in messages if messages[i]["type"] != "campaign_event.click"] == [
        1001, 1002, 1004, 1005, 1007, 1008
    ]  # fmt: skip
    await run_sender(None, pg_database, settings)  # caught up: nothing again
    assert len(receiver.got) == 9


def verified_by_either(secrets: tuple[str, str], hook: Receiver) -> list[Any]:
    """Each message received, verified by the secret of the subscription it is for."""
    found = []
    for headers, body in hook.got:
        for secret in secrets:
            try:
                found.append(Webhook(secret).verify(body, headers))
                break
            except WebhookVerificationError:
                continue
        else:
            raise AssertionError("a message no secret verifies")
    return found


@EACH_STORE
async def test_the_tools_and_the_senders_writes_give_their_listings_new_etags_and_totals(
    store: Store, tmp_path: Path, receiver: Receiver, make_client: Any
) -> None:
    """The sender and the tool write without moving the data token: /webhooks and the
    deliveries still answer anew (200, a new ETag, the new total), other answers keep
    their ETags."""
    on = ["--database-url", store.url] if store.url else ["--db", str(store.sqlite_path)]
    webhook_id, _ = await asyncio.to_thread(subscribe_on, on, receiver.url)
    await store.load([events_file(tmp_path, range(1001, 1003))])  # a fail and a report
    client = await make_client()
    key = {"X-API-KEY": KEYS[1]}
    paths = [f"{API}/webhooks", f"{API}/webhooks/{webhook_id}/deliveries", f"{API}/campaigns"]
    tags = [(await client.get(path, headers=key)).headers["ETag"] for path in paths]

    async def again(path: str, tag: str) -> Any:
        return await client.get(path, headers={**key, "If-None-Match": tag})

    assert [(await again(p, t)).status for p, t in zip(paths, tags, strict=True)] == [304] * 3
    settings = Settings(SHORT, LOCAL, receiver.ca_file, once=True)
    await run_sender(None if store.url else str(store.sqlite_path), store.url or None, settings)
    hooks, deliveries, campaigns = [await again(p, t) for p, t in zip(paths, tags, strict=True)]
    assert (hooks.status, deliveries.status, campaigns.status) == (200, 200, 304)
    assert len(await deliveries.json()) == int(deliveries.headers["X-Total-Count"]) == 2
    assert deliveries.headers["ETag"] != tags[1]
    assert (await again(paths[1], deliveries.headers["ETag"])).status == 304
    await asyncio.to_thread(main, [*on, "disable", webhook_id])
    disabled = await again(paths[0], hooks.headers["ETag"])
    assert disabled.status == 200 and (await disabled.json())[0]["status"] == "disabled"


@EACH_STORE
async def test_each_subscription_keeps_its_newest_attempts(
    store: Store, tmp_path: Path, receiver: Receiver, make_client: Any
) -> None:
    """Past ``kept`` attempts the oldest go as the sender logs: the API then shows the
    newest ``kept``, newest first, the ones kept as they were."""
    on = ["--database-url", store.url] if store.url else ["--db", str(store.sqlite_path)]
    webhook_id, _ = await asyncio.to_thread(subscribe_on, on, receiver.url)
    settings = Settings(SHORT, LOCAL, receiver.ca_file, once=True, kept=3)
    db, url = (None, store.url) if store.url else (str(store.sqlite_path), None)
    client = await make_client()
    path, key = f"{API}/webhooks/{webhook_id}/deliveries", {"X-API-KEY": KEYS[1]}
    await store.load([events_file(tmp_path, range(1001, 1003))])  # a fail and a report
    receiver.answers = [500]
    await run_sender(db, url, settings)
    before = await (await client.get(path, headers=key)).json()
    assert [(a["event_id"], a["attempt"]) for a in before] == [(1002, 1), (1001, 2), (1001, 1)]
    await store.load([events_file(tmp_path, range(1003, 1006))])  # a fail, a report
    await run_sender(db, url, settings)
    answer = await client.get(path, headers=key)
    after = await answer.json()
    assert [(a["event_id"], a["attempt"]) for a in after] == [(1005, 1), (1004, 1), (1002, 1)]
    assert after[2] == before[0] and answer.headers["X-Total-Count"] == "3"
    assert len(receiver.got) == 5


async def test_a_sender_through_a_symbolic_link_holds_the_databases_lock(
    sample_db: Path, tmp_path: Path
) -> None:
    """The lock is beside the file a link names: a second sender is refused whichever
    path each of them was given."""
    link = tmp_path / "link.sqlite3"
    link.symlink_to(sample_db)
    store = SqliteStore(str(link))
    try:
        with pytest.raises(ToolError, match="another webhook sender is running"):
            SqliteStore(str(sample_db))
    finally:
        await store.close()
    assert not (tmp_path / "link.sqlite3.webhooks.lock").exists()
