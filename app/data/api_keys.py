"""API keys (contract.md section 1): key material, lookup and management.

Keys are random, shown once, and stored only as a SHA-256 hash; lookups hash the
presented key and compare hashes inside the database index.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
from typing import Any, NamedTuple

KEY_PREFIX = "rk_"
# How long a server may keep accepting a key after it was revoked (its cache of known
# keys); the figure the docs and the key tool state.
CACHE_SECONDS = 2.0
PREFIX_LENGTH = 12


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
    """A key that may be used now: whose it is, and for how long at most."""

    key_id: int
    company_id: int
    seconds_left: float | None  # until it expires; None: it never does


def find_caller(conn: sqlite3.Connection, key_hash: str) -> ActiveKey | None:
    """The key with this hash if it is neither revoked nor expired, else None."""
    row = conn.execute(
        "SELECT id, company_id, (julianday(expires_at) - julianday('now')) * 86400.0"
        f" FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL"
        f" AND (expires_at IS NULL OR expires_at > {NOW})",
        (key_hash,),
    ).fetchone()
    return ActiveKey(row[0], row[1], row[2]) if row else None


class NewKey(NamedTuple):
    """A key just made: the only time the key itself is at hand."""

    key_id: int
    key: str
    expires_at: str | None


def checked_label(label: str, lifetime: int | None) -> str:
    """The trimmed label of a new key; KeyRefused for a blank label or a lifetime <= 0."""
    label = label.strip()
    if not label:
        raise KeyRefused("a key needs a label that says what it is for")
    if lifetime is not None and lifetime <= 0:
        raise KeyRefused("a key's lifetime must be positive")
    return label


def create_key(
    conn: sqlite3.Connection, company_id: int, label: str, lifetime: int | None = None
) -> NewKey:
    """Store a new key for a company, valid ``lifetime`` seconds (None: until revoked)."""
    label = checked_label(label, lifetime)
    if conn.execute("SELECT 1 FROM companies WHERE id = ?", (company_id,)).fetchone() is None:
        raise KeyNotFound(f"no company {company_id}")
    key = generate_key()
    expires = None if lifetime is None else f"+{lifetime} seconds"  # NULL modifier: NULL
    cursor = conn.execute(
        "INSERT INTO api_keys (company_id, key_hash, prefix, label, created_at, expires_at)"
        f" VALUES (?, ?, ?, ?, {NOW}, strftime('%Y-%m-%dT%H:%M:%SZ', 'now', ?))",
        (company_id, hash_key(key), prefix_of(key), label, expires),
    )
    key_id = int(cursor.lastrowid or 0)
    row = conn.execute("SELECT expires_at FROM api_keys WHERE id = ?", (key_id,)).fetchone()
    return NewKey(key_id, key, row[0])


def list_keys(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every key's public facts: id, company, label, prefix, created, expires, revoked."""
    cursor = conn.execute(
        "SELECT k.id, k.company_id, c.name, k.label, k.prefix, k.created_at, k.expires_at,"
        f" k.expires_at <= {NOW} AS expired, k.revoked_at"
        " FROM api_keys k JOIN companies c ON c.id = k.company_id ORDER BY k.id"
    )
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row, strict=True)) for row in cursor]


def _key(conn: sqlite3.Connection, key_id: int) -> tuple[Any, ...]:
    """A key's company, label, revocation time and lifetime in seconds (None: no expiry)."""
    row = conn.execute(
        "SELECT company_id, label, revoked_at, CAST(round((julianday(expires_at)"
        " - julianday(created_at)) * 86400) AS INTEGER) FROM api_keys WHERE id = ?",
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
    """Replace a key: a new one for the same company and label, the old one revoked.

    The new key lives ``lifetime`` seconds, or as long as the old one was given. A revoked
    key is refused: it was revoked for a reason (a leak), and must not come back.
    """
    company_id, label, revoked_at, old_lifetime = _key(conn, key_id)
    if revoked_at is not None:
        raise KeyRefused(
            f"key {key_id} was revoked at {revoked_at}; a revoked key is not rotated"
            " (create a new key instead)"
        )
    new = create_key(conn, company_id, label, old_lifetime if lifetime is None else lifetime)
    revoke_key(conn, key_id)
    return new
