"""contract.md 1 (keys kept only as SHA-256 hashes) and 8 (no key in the access log).

Keys are created, rotated and revoked with the key tool; then ``python -m app``, with
JSON logs and with text logs, answers a run of valid, wrong and revoked keys, 400s,
404s and 429s. No plain key then appears in the logs, in any response, or anywhere in
the bytes of the database, its WAL or its shared memory; the hashes of the real keys
are found there, so the grep looks in the right place.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import re
import secrets
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.tools import keytool

from .support.factories import API, KEY_1, KEY_2, KEY_PARTNER, sample
from .support.servers import Launcher, fetch, stop

pytestmark = pytest.mark.system  # starts server processes (make test-fast skips it)

PRINTED_KEY = re.compile(r"^\s+(rk_\S+)$", re.MULTILINE)
LIMITS = ("--rate-burst", "3", "--rate-per-second", "0.5", "--auth-failures-per-minute", "1000")
LOGGED_401 = {"text": b"status=401", "json": b'"status": 401'}


def keytool_output(*argv: str) -> str:
    """Run the key tool's main as the command line would and return what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert keytool.main(list(argv)) == 0
    return out.getvalue()


def printed_key(output: str) -> str:
    """The one key a create or rotate printed."""
    found = PRINTED_KEY.findall(output)
    assert len(found) == 1, output
    return found[0]


def sha256(key: str) -> str:
    """The hex digest the database must hold instead of the key."""
    return hashlib.sha256(key.encode()).hexdigest()


def key_id(db: Path, key: str) -> int:
    """A key's id, found by its hash."""
    conn = sqlite3.connect(db)
    try:
        row = conn.execute("SELECT id FROM api_keys WHERE key_hash = ?", (sha256(key),))
        return int(row.fetchone()[0])
    finally:
        conn.close()


@dataclass
class Keys:
    """Every key of the run, by what the server must make of it."""

    valid: list[str]
    revoked: list[str]
    wrong: list[str]

    def stored(self) -> list[str]:
        """The keys whose hashes the database holds."""
        return self.valid + self.revoked

    def every(self) -> list[str]:
        """Every key the run sends: none may appear in plain text anywhere."""
        return self.stored() + self.wrong


@pytest.fixture
def keys(sample_db: Path) -> Keys:
    """Sample keys, plus keys the tool created, rotated and revoked, plus wrong ones."""
    db = str(sample_db)
    created = printed_key(keytool_output("--db", db, "create", "--company", "1", "--label", "a"))
    old = printed_key(keytool_output("--db", db, "create", "--company", "2", "--label", "b"))
    rotated = printed_key(keytool_output("--db", db, "rotate", str(key_id(sample_db, old))))
    gone = printed_key(keytool_output("--db", db, "create", "--company", "1", "--label", "c"))
    keytool_output("--db", db, "revoke", str(key_id(sample_db, gone)))
    listing = keytool_output("--db", db, "list")
    assert [e["key"] for e in sample()["api_keys"]] == [KEY_1, KEY_2, KEY_PARTNER]
    keys = Keys(
        valid=[KEY_1, KEY_2, created, rotated],
        revoked=[old, gone],
        wrong=["rk_" + secrets.token_urlsafe(32) for _ in range(4)]
        + [KEY_1[:-1] + "x", "rk_" + secrets.token_hex(100), secrets.token_urlsafe(24)],
    )
    assert not [k for k in keys.every() if k[3:] in listing]
    return keys


def exercise(base: str, keys: Keys) -> tuple[set[int], bytes]:
    """Send the mixed run; return the statuses seen and every response as bytes."""
    inscriptions = f"{base}{API}/course-inscriptions"
    calls = [(inscriptions, key) for key in keys.every()]
    calls += [(f"{inscriptions}?per_page=0", key) for key in keys.valid]
    calls += [(f"{base}{API}/campaigns/999999/events", key) for key in keys.valid]
    calls += [(inscriptions, KEY_1)] * 5  # past the burst of 3: 429
    statuses, seen = set(), b""
    for url, key in calls:
        status, headers, body = fetch(url, {"X-API-KEY": key})
        statuses.add(status)
        seen += str(headers).encode() + body
    return statuses, seen


def database_bytes(db: Path) -> bytes:
    """The database file with its WAL and shared memory, whichever exist."""
    files = (db, Path(f"{db}-wal"), Path(f"{db}-shm"))
    return b"".join(path.read_bytes() for path in files if path.exists())


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_keys_never_in_logs_responses_or_database(
    sample_db: Path, launcher: Launcher, keys: Keys, log_format: str
) -> None:
    flags = ("--log-format", log_format, "--log-level", "DEBUG", *LIMITS)
    server = launcher.serve(sample_db, *flags)
    statuses, responses = exercise(server.base, keys)
    serving_db = database_bytes(sample_db)
    stop(server.proc)
    logs = b"".join(server.output())
    stopped_db = database_bytes(sample_db)
    assert statuses == {200, 400, 401, 404, 429}
    assert LOGGED_401[log_format] in logs
    for key in keys.every():
        secret = key[3:].encode()  # the part after "rk_" (the stored prefix is key[:12])
        for where, blob in (("log", logs), ("response", responses), ("db", serving_db)):
            assert secret not in blob, f"a key is in the {where}"
        assert secret not in stopped_db, "a key is in the database"
    for key in keys.stored():
        assert sha256(key).encode() in stopped_db
    for key in keys.wrong:
        assert sha256(key).encode() not in serving_db + stopped_db
