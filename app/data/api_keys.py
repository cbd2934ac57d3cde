"""API keys (contract.md section 1): key material, lookup and management.

Keys are random, shown once, and stored only as a SHA-256 hash; lookups hash the
presented key and compare hashes inside the database index.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
from typing import Any

KEY_PREFIX = "rk_"
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


class KeyNotFound(Exception):
    """No such key id."""


def find_caller(conn: sqlite3.Connection, key_hash: str) -> tuple[int, int] | None:
    """The (key id, company id) of an active key with this hash, or None."""
    row = conn.execute(
        "SELECT id, company_id FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL",
        (key_hash,),
    ).fetchone()
    return (row[0], row[1]) if row else None


def create_key(conn: sqlite3.Connection, company_id: int, label: str) -> tuple[int, str]:
    """Store a new key for a company; return its id and the key (shown only now)."""
    if conn.execute("SELECT 1 FROM companies WHERE id = ?", (company_id,)).fetchone() is None:
        raise KeyNotFound(f"no company {company_id}")
    key = generate_key()
    cursor = conn.execute(
        "INSERT INTO api_keys (company_id, key_hash, prefix, label, created_at)"
        " VALUES (?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))",
        (company_id, hash_key(key), prefix_of(key), label),
    )
    return int(cursor.lastrowid or 0), key


def list_keys(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every key's public facts: id, company, label, prefix, created, revoked."""
    cursor = conn.execute(
        "SELECT k.id, k.company_id, c.name, k.label, k.prefix, k.created_at, k.revoked_at"
        " FROM api_keys k JOIN companies c ON c.id = k.company_id ORDER BY k.id"
    )
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row, strict=True)) for row in cursor]


def revoke_key(conn: sqlite3.Connection, key_id: int) -> None:
    """Mark a key revoked (kept for the record); revoking twice is harmless."""
    cursor = conn.execute(
        "UPDATE api_keys SET revoked_at = coalesce(revoked_at,"
        " strftime('%Y-%m-%dT%H:%M:%SZ', 'now')) WHERE id = ?",
        (key_id,),
    )
    if cursor.rowcount == 0:
        raise KeyNotFound(f"no key {key_id}")


def rotate_key(conn: sqlite3.Connection, key_id: int) -> tuple[int, str]:
    """Replace a key: a new one for the same company and label, the old one revoked."""
    row = conn.execute("SELECT company_id, label FROM api_keys WHERE id = ?", (key_id,)).fetchone()
    if row is None:
        raise KeyNotFound(f"no key {key_id}")
    new_id, key = create_key(conn, row[0], row[1])
    revoke_key(conn, key_id)
    return new_id, key
