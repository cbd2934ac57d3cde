"""The session settings every PostgreSQL connection of the service asks for at connect.

A database's or a role's defaults (``ALTER DATABASE ... SET``, ``ALTER ROLE ... SET``,
postgresql.conf) apply to every session that does not ask otherwise. The statements and
the schema's checks write backslashes as they are meant (``'^\\d{4}-...'``), which holds
only with standard-conforming strings: with them off, the loader would make checks no
instant passes. The store keeps instants as text and results as ``numeric``, so the
other output settings (DateStyle, TimeZone, extra_float_digits, ...) change no answer.
"""

from __future__ import annotations

import asyncpg

SESSION = {"standard_conforming_strings": "on"}


async def connect(url: str, timeout: float = 60, **settings: str) -> asyncpg.Connection:
    """A connection with :data:`SESSION` (and ``settings``), whatever the defaults."""
    return await asyncpg.connect(url, timeout=timeout, server_settings={**SESSION, **settings})
