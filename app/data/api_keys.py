"""API keys (contract.md section 1): key material, lookup and management.

Keys are random, shown once, and stored only as a SHA-256 hash; lookups hash the
presented key and compare hashes inside the database index.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
import sqlite3
from typing import Any, NamedTuple

from .fields import MAX_LABEL, MAX_SAFE_ID, one_line_label

KEY_PREFIX = "rk_"
# How long a server may keep accepting a key after it was revoked (its cache of known
# keys); the figure the docs and the key tool state.
CACHE_SECONDS = 2.0
PREFIX_LENGTH = 12
# What a key may read, each scope a family of endpoints (docs/interface.md); a key made
# without a choice holds them all, as every key made before scopes existed does.
SCOPES = ("events:read", "people:read", "reports:read", "training:read", "webhooks:read")
ALL_SCOPES = " ".join(SCOPES)


def generate_key() -> str:
    """Return a new key: 32 random bytes, URL-safe, with a recognisable prefix."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    """Return the hex SHA-256 of a key, the only form the database holds."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def prefix_of(key: str) -> str:
    """Return the first characters of a key, enough to recognise it in a listing."""
    return key[:PREFIX_LENGTH]


NOW = "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')"  # UTC, the form every timestamp is stored in


class KeyRefused(Exception):
    """A key operation that cannot be done; the message says why."""


class KeyNotFound(KeyRefused):
    """No such key id (or company)."""


class ActiveKey(NamedTuple):
    """A key that may be used now: whose it is, what it may read, and for how long at most."""

    key_id: int
    company_id: int | None  # a company's key, or
    partner_id: int | None  # a partner's key
    companies: frozenset[int]  # the companies it may read: its own, or its partner's
    scopes: frozenset[str]
    prefix: str
    label: str
    created_at: str
    expires_at: str | None
    seconds_left: float | None  # until it expires; None: it never does


def active_key(row: Any) -> ActiveKey:
    """An ActiveKey from a row of :data:`CALLER_COLUMNS` and the seconds left, either store."""
    key_id, company_id, partner_id, companies, scopes, prefix, label, created, expires, left = row
    return ActiveKey(
        int(key_id),
        company_id,
        partner_id,
        frozenset(int(c) for c in str(companies or "").split(",") if c),
        frozenset(scopes.split()),
        prefix,
        label,
        created,
        expires,
        left,
    )


def unix_seconds(instant: str | None) -> int | None:
    """A stored UTC instant (``2025-01-31T09:00:00Z``) as unix seconds."""
    return None if instant is None else int(dt.datetime.fromisoformat(instant).timestamp())


# The companies a key may read come as text, "1,2": a company key's own id, a partner's list.
CALLER_COLUMNS = (
    "k.id, k.company_id, k.partner_id, coalesce(k.company_id || '', (SELECT {agg}"
    " FROM partner_companies p WHERE p.partner_id = k.partner_id)), k.scopes, k.prefix,"
    " k.label, k.created_at, k.expires_at"
)


def find_caller(conn: sqlite3.Connection, key_hash: str) -> ActiveKey | None:
    """The key with this hash if it is neither revoked nor expired, else None."""
    row = conn.execute(
        f"SELECT {CALLER_COLUMNS.format(agg='group_concat(company_id)')},"
        " (julianday(expires_at) - julianday('now')) * 86400.0"
        f" FROM api_keys k WHERE key_hash = ? AND revoked_at IS NULL"
        f" AND (expires_at IS NULL OR expires_at > {NOW})",
        (key_hash,),
    ).fetchone()
    return active_key(row) if row else None


def safe_id(kind: str, new_id: int) -> int:
    """A new key's or partner's id, refused (the write rolls back) past 2^53-1: both stores
    number on without that bound, and a client would not read such an id exactly."""
    if new_id > MAX_SAFE_ID:
        raise KeyRefused(
            f"a new {kind} would take id {new_id}, past {MAX_SAFE_ID}, the largest id a"
            " client reads exactly"
        )
    return new_id


class NewKey(NamedTuple):
    """A key just made: the only time the key itself is at hand."""

    key_id: int
    key: str
    expires_at: str | None


def checked_label(label: str, lifetime: int | None) -> str:
    """The trimmed label of a new key; KeyRefused for a blank label, one that is not one
    line of at most MAX_LABEL characters (the key tool's list shows it on one), or a
    lifetime <= 0."""
    label = label.strip()
    if not label:
        raise KeyRefused("a key needs a label that says what it is for")
    if not one_line_label(label):
        raise KeyRefused(f"a key's label is one line of at most {MAX_LABEL} printable characters")
    if lifetime is not None and lifetime <= 0:
        raise KeyRefused("a key's lifetime must be positive")
    return label


def checked_scopes(scopes: str | None) -> str:
    """The scopes of a new key, space-separated in one order (None: every scope)."""
    if scopes is None:
        return ALL_SCOPES
    chosen = set(scopes.replace(",", " ").split())
    unknown = sorted(chosen - set(SCOPES))
    if unknown:
        raise KeyRefused(f"unknown scope {unknown[0]!r} (the scopes: {', '.join(SCOPES)})")
    if not chosen:
        raise KeyRefused(f"name at least one scope ({', '.join(SCOPES)})")
    return " ".join(scope for scope in SCOPES if scope in chosen)


OWNERS = {"company": "companies", "partner": "partners"}  # what may own a key: its table


def key_owner(company_id: int | None, partner_id: int | None) -> tuple[str, int]:
    """The kind and id of a new key's owner: one company or one partner."""
    if partner_id is None and company_id is not None:
        return "company", company_id
    if company_id is None and partner_id is not None:
        return "partner", partner_id
    raise KeyRefused("a key belongs to one company or to one partner")


def check_exists(conn: sqlite3.Connection, kind: str, owner: int) -> None:
    """KeyNotFound unless the company or partner exists."""
    if conn.execute(f"SELECT 1 FROM {OWNERS[kind]} WHERE id = ?", (owner,)).fetchone() is None:
        raise KeyNotFound(f"no {kind} {owner}")


def create_key(
    conn: sqlite3.Connection,
    company_id: int | None,
    label: str,
    lifetime: int | None = None,
    *,
    scopes: str | None = None,
    partner_id: int | None = None,
) -> NewKey:
    """Store a new key for a company or a partner, valid ``lifetime`` seconds (None: until
    revoked), holding ``scopes`` (None: every scope)."""
    label = checked_label(label, lifetime)
    scope = checked_scopes(scopes)
    check_exists(conn, *key_owner(company_id, partner_id))
    key = generate_key()
    expires = None if lifetime is None else f"+{lifetime} seconds"  # NULL modifier: NULL
    cursor = conn.execute(
        "INSERT INTO api_keys (company_id, partner_id, scopes, key_hash, prefix, label,"
        f" created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, {NOW},"
        " strftime('%Y-%m-%dT%H:%M:%SZ', 'now', ?))",
        (company_id, partner_id, scope, hash_key(key), prefix_of(key), label, expires),
    )
    key_id = safe_id("key", int(cursor.lastrowid or 0))
    row = conn.execute("SELECT expires_at FROM api_keys WHERE id = ?", (key_id,)).fetchone()
    return NewKey(key_id, key, row[0])


# Every key's public facts; a partner key's companies as "1,2" (both stores' text).
LIST_KEYS = (
    "SELECT k.id, k.company_id, k.partner_id, coalesce(c.name, p.name) AS name,"
    " (SELECT {agg} FROM partner_companies pc WHERE pc.partner_id = k.partner_id) AS companies,"
    " k.scopes, k.label, k.prefix, k.created_at, k.expires_at,"
    " k.expires_at <= {now} AS expired, k.revoked_at FROM api_keys k"
    " LEFT JOIN companies c ON c.id = k.company_id LEFT JOIN partners p ON p.id = k.partner_id"
    " ORDER BY k.id"
)


def list_keys(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every key's public facts: id, owner, scopes, label, prefix, created, expires, revoked."""
    cursor = conn.execute(
        LIST_KEYS.format(agg="group_concat(pc.company_id)", now=NOW)  # key order: by id
    )
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row, strict=True)) for row in cursor]


def checked_name(name: str) -> str:
    """A new partner's trimmed name: one line of at most MAX_LABEL printable characters, as
    a fixture's partner name must be (the key tool's list shows it on one line)."""
    name = name.strip()
    if not name:
        raise KeyRefused("a partner needs a name")
    if not one_line_label(name):
        raise KeyRefused(
            f"a partner's name is one line of at most {MAX_LABEL} printable characters"
        )
    return name


def create_partner(conn: sqlite3.Connection, name: str) -> int:
    """Store a new partner (a provider reading several companies); its id."""
    cursor = conn.execute("INSERT INTO partners (name) VALUES (?)", (checked_name(name),))
    return safe_id("partner", int(cursor.lastrowid or 0))


def add_partner_company(conn: sqlite3.Connection, partner_id: int, company_id: int) -> bool:
    """Let a partner's keys read one more company; False if they already did (nothing
    written, so the caller leaves the data version alone)."""
    check_exists(conn, "partner", partner_id)
    check_exists(conn, "company", company_id)
    # RETURNING, not the cursor's rowcount: see app.data.schema.changed_rows.
    added = conn.execute(
        "INSERT OR IGNORE INTO partner_companies (partner_id, company_id) VALUES (?, ?)"
        " RETURNING 1",
        (partner_id, company_id),
    ).fetchall()
    return bool(added)


def _key(conn: sqlite3.Connection, key_id: int) -> tuple[Any, ...]:
    """A key's company, label, revocation time, lifetime in seconds (None: no expiry),
    partner and scopes."""
    row = conn.execute(
        "SELECT company_id, label, revoked_at, CAST(round((julianday(expires_at)"
        " - julianday(created_at)) * 86400) AS INTEGER), partner_id, scopes"
        " FROM api_keys WHERE id = ?",
        (key_id,),
    ).fetchone()
    if row is None:
        raise KeyNotFound(f"no key {key_id}")
    return tuple(row)


def revoke_key(conn: sqlite3.Connection, key_id: int) -> None:
    """Mark a key revoked (kept for the record); a revoked key is refused, not revoked again."""
    revoked_at = _key(conn, key_id)[2]
    if revoked_at is not None:
        raise KeyRefused(f"key {key_id} is already revoked (since {revoked_at})")
    conn.execute(f"UPDATE api_keys SET revoked_at = {NOW} WHERE id = ?", (key_id,))


def rotate_key(conn: sqlite3.Connection, key_id: int, lifetime: int | None = None) -> NewKey:
    """Replace a key: a new one for the same owner, label and scopes, the old one revoked.

    The new key lives ``lifetime`` seconds, or as long as the old one was given. A revoked
    key is refused: it was revoked for a reason (a leak), and must not come back.
    """
    company_id, label, revoked_at, old_lifetime, partner_id, scopes = _key(conn, key_id)
    if revoked_at is not None:
        raise KeyRefused(
            f"key {key_id} was revoked at {revoked_at}; a revoked key is not rotated"
            " (create a new key instead)"
        )
    new = create_key(
        conn,
        company_id,
        label,
        old_lifetime if lifetime is None else lifetime,
        scopes=scopes,
        partner_id=partner_id,
    )
    revoke_key(conn, key_id)
    return new
