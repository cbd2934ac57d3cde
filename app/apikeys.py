"""API key material: generation, hashing and the printable prefix.

Keys are random, shown once, and stored only as a SHA-256 hash; lookups hash the
presented key and compare hashes inside the database index.
"""

from __future__ import annotations

import hashlib
import secrets

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
