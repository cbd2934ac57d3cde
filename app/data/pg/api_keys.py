"""API keys on PostgreSQL: the key tool's create, list, revoke and rotate, and partners.

The same rules as :mod:`app.data.api_keys` (labels required, a revoked key stays
revoked, a rotated key keeps its lifetime), in PostgreSQL's SQL; instants are stored
as the same UTC text.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from ..api_keys import (
    LIST_KEYS,
    OWNERS,
    KeyNotFound,
    KeyRefused,
    NewKey,
    checked_label,
    checked_name,
    checked_scopes,
    generate_key,
    hash_key,
    key_owner,
    prefix_of,
    safe_id,
)

NOW = "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
LATER = (
    "to_char((now() + make_interval(secs => $7)) AT TIME ZONE 'UTC',"
    ' \'YYYY-MM-DD"T"HH24:MI:SS"Z"\')'
)


async def check_exists(conn: asyncpg.Connection, kind: str, owner: int) -> None:
    """KeyNotFound unless the company or partner exists."""
    if await conn.fetchval(f"SELECT 1 FROM {OWNERS[kind]} WHERE id = $1", owner) is None:
        raise KeyNotFound(f"no {kind} {owner}")


async def create_key(
    conn: asyncpg.Connection,
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
    await check_exists(conn, *key_owner(company_id, partner_id))
    key = generate_key()
    row = await conn.fetchrow(
        "INSERT INTO api_keys (company_id, partner_id, scopes, key_hash, prefix, label,"
        f" created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, {NOW},"
        f" CASE WHEN $7::float8 IS NULL THEN NULL ELSE {LATER} END) RETURNING id, expires_at",
        company_id,
        partner_id,
        scope,
        hash_key(key),
        prefix_of(key),
        label,
        None if lifetime is None else float(lifetime),
    )
    return NewKey(safe_id("key", int(row["id"])), key, row["expires_at"])


async def list_keys(conn: asyncpg.Connection) -> list[dict[str, Any]]:
    """Every key's public facts: id, owner, scopes, label, prefix, created, expires, revoked."""
    agg = "string_agg(pc.company_id::text, ',' ORDER BY pc.company_id)"
    return [dict(row) for row in await conn.fetch(LIST_KEYS.format(agg=agg, now=NOW))]


async def create_partner(conn: asyncpg.Connection, name: str) -> int:
    """Store a new partner; its id, the next after the largest (as SQLite chooses)."""
    name = checked_name(name)
    await conn.execute("LOCK TABLE partners IN EXCLUSIVE MODE")
    new_id = await conn.fetchval(
        "INSERT INTO partners (id, name) SELECT coalesce(max(id), 0) + 1, $1 FROM partners"
        " RETURNING id",
        name,
    )
    return safe_id("partner", int(new_id))


async def add_partner_company(conn: asyncpg.Connection, partner_id: int, company_id: int) -> bool:
    """Let a partner's keys read one more company; False if they already did."""
    await check_exists(conn, "partner", partner_id)
    await check_exists(conn, "company", company_id)
    status = await conn.execute(
        "INSERT INTO partner_companies (partner_id, company_id) VALUES ($1, $2)"
        " ON CONFLICT DO NOTHING",
        partner_id,
        company_id,
    )
    return bool(status == "INSERT 0 1")


async def _key(conn: asyncpg.Connection, key_id: int) -> tuple[Any, ...]:
    """A key's company, label, revocation time, lifetime in seconds (None: no expiry),
    partner and scopes."""
    row = await conn.fetchrow(
        "SELECT company_id, label, revoked_at, round(extract(epoch FROM"
        " expires_at::timestamptz - created_at::timestamptz))::bigint, partner_id, scopes"
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
    company_id, label, revoked_at, old_lifetime, partner_id, scopes = await _key(conn, key_id)
    if revoked_at is not None:
        raise KeyRefused(
            f"key {key_id} was revoked at {revoked_at}; a revoked key is not rotated"
            " (create a new key instead)"
        )
    new = await create_key(
        conn,
        company_id,
        label,
        old_lifetime if lifetime is None else lifetime,
        scopes=scopes,
        partner_id=partner_id,
    )
    await revoke_key(conn, key_id)
    return new
