"""Webhook subscriptions: what the tool writes, what the sender reads and records.

A subscription has its own position in the event feed (``position_seq``,
``position_id``: the feed's (seq, id) of the last event it delivered or skipped), its
own filter of event types, and a signing secret (``whsec_`` and the base64 of 32 random
bytes, Standard Webhooks 1.0). A rotation keeps the old secret signing beside the new
one for 24 hours. The statements are written once for both stores (``?`` parameters,
numbered for PostgreSQL by :func:`app.data.pg.sql.numbered`).
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import re
import secrets
import sqlite3
from dataclasses import dataclass
from urllib.parse import urlsplit

from .fields import MAX_ID, MAX_LABEL, one_line_label
from .listings import Listing, Record, owned, placeholders
from .vocabulary import EVENT_TYPES

# A DNS label (RFC 1123): 1 to 63 letters, digits and hyphens, no hyphen at either end.
DNS_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
ROTATION = dt.timedelta(hours=24)  # the old secret keeps signing this long after a rotation
STATUSES = ("enabled", "disabled", "failing")


class WebhookRefused(Exception):
    """A subscription that cannot be made or changed as asked (one line for the user)."""


def new_secret() -> str:
    """A signing secret as Standard Webhooks writes one: ``whsec_`` + base64(32 bytes)."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def utc_text(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Subscription:
    """What ``create`` checked: an HTTPS URL, its host, the event types (sorted)."""

    company_id: int
    url: str
    host: str
    types: str
    label: str

    @classmethod
    def of(cls, company_id: int, url: str, events: str, label: str) -> Subscription:
        host = _https_host(url.strip())
        if host is None:
            raise WebhookRefused(f"{url!r} is not an https:// URL with a host")
        if not receiver_host(host):
            raise WebhookRefused(f"--url: {host!r} is not a DNS name or an IP address")
        types = sorted({t.strip().lower() for t in events.split(",")})
        unknown = [t for t in types if t not in EVENT_TYPES]
        if unknown:  # an empty element (fail,,open) too: a slip, not a type
            raise WebhookRefused(f"--events takes a comma list of {', '.join(EVENT_TYPES)}")
        if not label.strip():
            raise WebhookRefused("--label is blank")
        if not one_line_label(label.strip()):
            raise WebhookRefused(f"--label is one line of at most {MAX_LABEL} printable characters")
        return cls(company_id, url.strip(), host, ",".join(types), label.strip())


def _https_host(url: str) -> str | None:
    """The host of an https URL that can be read whole, else None (one with blanks or
    other characters that are not printable, such as a byte that is no UTF-8, an unclosed
    ``[``, or a port that is no number from 0 to 65535)."""
    if any(c.isspace() for c in url) or not url.isprintable():
        return None
    try:
        parts = urlsplit(url)
        _ = parts.port  # read here, where a bad one raises
    except ValueError:
        return None
    return parts.hostname if parts.scheme == "https" and parts.hostname else None


def receiver_host(host: str) -> bool:
    """Whether a URL's host can name a receiver (urlsplit takes ``a..b`` and ``%65xample.com``
    too): an IP literal without a zone, or a name of at most 253 characters in DNS labels,
    a unicode one by its IDNA form, whose last label is not all digits (``127.1``)."""
    try:
        ipaddress.ip_address(host)
        return "%" not in host
    except ValueError:
        pass
    try:
        name = host.encode("idna").decode("ascii").removesuffix(".")
    except UnicodeError:
        return False
    labels = name.split(".")
    return len(name) <= 253 and all(map(DNS_LABEL.fullmatch, labels)) and not labels[-1].isdigit()


# The statements of the tool, the same on both stores.
CREATE = (
    "INSERT INTO webhooks (company_id, label, url, url_host, event_types, secret, status,"
    " position_seq, position_id, created_at) SELECT ?, ?, ?, ?, ?, ?, 'enabled',"
    " CAST(value AS BIGINT), ?, ? FROM meta WHERE key = 'change_seq' RETURNING id"
)
COMPANY_EXISTS = "SELECT 1 FROM companies WHERE id = ?"
LIST = (
    "SELECT id, company_id, label, url_host, event_types, status, created_at,"
    " last_success_at, last_failure_at, consecutive_failures, old_secret_until"
    " FROM webhooks ORDER BY id"
)
SET_STATUS = (
    "UPDATE webhooks SET status = ?, consecutive_failures = CASE WHEN ? = 'enabled'"
    " THEN 0 ELSE consecutive_failures END WHERE id = ? RETURNING id"
)
DELETE_DELIVERIES = "DELETE FROM webhook_deliveries WHERE webhook_id = ?"
DELETE = "DELETE FROM webhooks WHERE id = ? RETURNING id"
ROTATE = (
    "UPDATE webhooks SET old_secret = secret, old_secret_until = ?, secret = ?"
    " WHERE id = ? RETURNING id"
)
# What /webhooks and /webhooks/{id}/deliveries show changes with the tool's and the
# sender's writes, not with loads: each such write moves this version (in its own
# transaction), which goes into those answers' ETags and totals (the data token does not
# move: a sender logging every attempt would otherwise void every company's ETags).
CHANGED = (
    "INSERT INTO meta (key, value) VALUES ('webhooks_version', '1') ON CONFLICT (key)"
    " DO UPDATE SET value = CAST(CAST(meta.value AS BIGINT) + 1 AS TEXT)"
)
VERSION = "SELECT value FROM meta WHERE key = 'webhooks_version'"


def create_args(sub: Subscription, secret: str, now: dt.datetime) -> tuple[object, ...]:
    """CREATE's parameters: a new subscription starts after every event written so far."""
    return (sub.company_id, sub.label, sub.url, sub.host, sub.types, secret, MAX_ID,
            created_text(now))  # fmt: skip


def created_text(now: dt.datetime) -> str:
    """A subscription's ``created_at``, to the microsecond: with the id and the company it
    tells a subscription from one made under its freed id (SQLite reuses ids), also
    within the same second."""
    return now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def missing(webhook_id: int) -> WebhookRefused:
    return WebhookRefused(f"no webhook {webhook_id}")


# SQLite: each function runs inside the caller's write transaction.


def create(conn: sqlite3.Connection, sub: Subscription, now: dt.datetime) -> tuple[int, str]:
    """A new subscription and its secret (shown once by the tool)."""
    if conn.execute(COMPANY_EXISTS, (sub.company_id,)).fetchone() is None:
        raise WebhookRefused(f"no company {sub.company_id}")
    secret = new_secret()
    (webhook_id,) = conn.execute(CREATE, create_args(sub, secret, now)).fetchone()
    conn.execute(CHANGED)
    return int(webhook_id), secret


def list_all(conn: sqlite3.Connection) -> list[tuple[object, ...]]:
    return conn.execute(LIST).fetchall()


def set_status(conn: sqlite3.Connection, webhook_id: int, status: str) -> None:
    if conn.execute(SET_STATUS, (status, status, webhook_id)).fetchone() is None:
        raise missing(webhook_id)
    conn.execute(CHANGED)


def delete(conn: sqlite3.Connection, webhook_id: int) -> None:
    conn.execute(DELETE_DELIVERIES, (webhook_id,))
    if conn.execute(DELETE, (webhook_id,)).fetchone() is None:
        raise missing(webhook_id)
    conn.execute(CHANGED)


def rotate(conn: sqlite3.Connection, webhook_id: int, now: dt.datetime) -> str:
    secret = new_secret()
    if conn.execute(ROTATE, (utc_text(now + ROTATION), secret, webhook_id)).fetchone() is None:
        raise missing(webhook_id)
    conn.execute(CHANGED)
    return secret


# What the API shows of a subscription (never its secret nor its full URL) and of its
# delivery attempts (the sender's log), newest first.
WEBHOOK = Record(
    "webhook",
    """json_object('id', w.id, 'label', w.label, 'url_host', w.url_host,
    'event_types', json('["' || replace(w.event_types, ',', '","') || '"]'),
    'status', w.status, 'last_success_at', w.last_success_at,
    'last_failure_at', w.last_failure_at, 'consecutive_failures', w.consecutive_failures)""",
)
DELIVERY = Record(
    "webhook_delivery",
    """json_object('id', d.id, 'message_id', d.message_id, 'event_id', d.event_id,
    'attempt', d.attempt, 'attempted_at', d.attempted_at, 'status', d.status,
    'response_status', d.response_status, 'error', d.error)""",
)


def version(conn: sqlite3.Connection) -> str:
    """The webhooks' version now ("0" before any write of the tool or the sender)."""
    row = conn.execute(VERSION).fetchone()
    return str(row[0]) if row else "0"


def webhooks_listing(company_id: int) -> Listing:
    """The company's subscriptions, by id."""
    rows_from = "FROM webhooks w WHERE w.company_id = ?"
    return Listing(WEBHOOK, rows_from, rows_from, "w.id", (company_id,))


def deliveries_listing(company_id: int, webhook_id: int, statuses: tuple[str, ...]) -> Listing:
    """One subscription's delivery attempts, newest first; RecordNotFound unless the
    company's."""
    where = ["d.webhook_id = ?"]
    params: list[object] = [webhook_id]
    if statuses:
        where.append(f"d.status IN ({placeholders(statuses)})")
        params.extend(statuses)
    rows_from = f"FROM webhook_deliveries d WHERE {' AND '.join(where)}"
    guard = owned("webhooks", webhook_id, company_id)
    return Listing(DELIVERY, rows_from, rows_from, "d.id DESC", tuple(params), guard)
