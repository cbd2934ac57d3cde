"""API keys on PostgreSQL: the key tool's create, list, revoke and rotate.

The same rules as :mod:`app.data.api_keys` (labels required, a revoked key stays
revoked, a rotated key keeps its lifetime), in PostgreSQL's SQL; instants are stored
as the same UTC text.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from ..api_keys import (
    KeyNotFound,
    KeyRefused,
    NewKey,
    checked_label,
    generate_key,
    hash_key,
    prefix_of,
)

NOW = "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
LATER = (
    "to_char((now() + make_interval(secs => $5)) AT TIME ZONE 'UTC',"
    ' \'YYYY-MM-DD"T"HH24:MI:SS"Z"\')'
)


async def create_key(
    conn: asyncpg.Connection, company_id: int, label: str, lifetime: int | None = None
) -> NewKey:
    """Store a new key for a company, valid ``lifetime`` seconds (None: until revoked)."""
    label = checked_label(label, lifetime)
    if await conn.fetchval("SELECT 1 FROM companies WHERE id = $1", company_id) is None:
        raise KeyNotFound(f"no company {company_id}")
    key = generate_key()
    row = await conn.fetchrow(
        "INSERT INTO api_keys (company_id, key_hash, prefix, label, created_at, expires_at)"
        f" VALUES ($1, $2, $3, $4, {NOW}, CASE WHEN $5::float8 IS NULL THEN NULL"
        f" ELSE {LATER} END) RETURNING id, expires_at",
        company_id,
        hash_key(key),
        prefix_of(key),
        label,
        None if lifetime is None else float(lifetime),
    )
    return NewKey(int(row["id"]), key, row["expires_at"])


async def list_keys(conn: asyncpg.Connection) -> list[dict[str, Any]]:
    """Every key's public facts: id, company, label, prefix, created, expires, revoked."""
    rows = await conn.fetch(
        "SELECT k.id, k.company_id, c.name, k.label, k.prefix, k.created_at, k.expires_at,"
        f" k.expires_at <= {NOW} AS expired, k.revoked_at"
        " FROM api_keys k JOIN companies c ON c.id = k.company_id ORDER BY k.id"
    )
    return [dict(row) for row in rows]


async def _key(conn: asyncpg.Connection, key_id: int) -> tuple[Any, ...]:
    """A key's company, label, revocation time and lifetime in seconds (None: no expiry)."""
    row = await conn.fetchrow(
        "SELECT company_id, label, revoked_at, round(extract(epoch FROM"
        " expires_at::timestamptz - created_at::timestamptz))::bigint"
        " FROM api_keys WHERE id = $1 FOR UPDATE",
        key_id,
    )
    if row is None:
        raise KeyNotFound(f"no key {key_id}")
    return tuple(row)


async def revoke_key(conn: asyncpg.Connection, key_id: int) -> None:
    """Mark a key revoked; a revoked key is refused, not revoked again."""
    revoked_at = (await _key(conn, key_id))[2]
    if revoked_at is not None:
        raise KeyRefused(f"key {key_id} is already revoked (since {revoked_at})")
    await conn.execute(f"UPDATE api_keys SET revoked_at = {NOW} WHERE id = $1", key_id)


async def rotate_key(conn: asyncpg.Connection, key_id: int, lifetime: int | None = None) -> NewKey:
    """Replace a key: a new one for the same company and label, the old one revoked."""
    company_id, label, revoked_at, old_lifetime = await _key(conn, key_id)
    if revoked_at is not None:
        raise KeyRefused(
            f"key {key_id} was revoked at {revoked_at}; a revoked key is not rotated"
            " (create a new key instead)"
        )
    new = await create_key(conn, company_id, label, old_lifetime if lifetime is None else lifetime)
    await revoke_key(conn, key_id)
    return new
