"""Configuration: command-line flags over ``REPORTING_*`` environment variables."""

from __future__ import annotations

import argparse
import difflib
import functools
import ipaddress
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NoReturn
from urllib.parse import SplitResult, parse_qs, urlsplit

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
REDIS_SCHEMES = ("redis", "rediss", "unix")
POSTGRESQL_SCHEMES = ("postgresql", "postgres")
SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")  # libpq's
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("text", "json")
# The bounds of the numeric settings (each field's "range", inclusive): every value must
# lie within, which also refuses nan and inf. A timeout of more than a day, or a rate
# below one token in 1000 s (its RateLimit headers would count ever longer windows),
# is a typo; so is a pool or a process count no machine serves with.
TIMEOUT = (0.001, 86_400)
TIMEOUT_WHY = " (timeouts must be positive, at most a day)"
MANY = 1_000_000_000  # burst, rate, failures: high enough to put the limits out of reach
# A plain ASCII decimal, as the docs write one (int() and float() also take 1_000,
# other scripts' digits, 1e3, nan and inf).
INTEGER = re.compile(r"-?[0-9]+")
NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
# An origin as a browser sends it: lowercase scheme and host (IDNs in punycode), an
# optional port; no path, no trailing slash, no wildcard.
ORIGIN = re.compile(
    r"(https?)://([a-z0-9-]+(?:\.[a-z0-9-]+)*|\[[0-9a-f:.]+\])(?::([1-9][0-9]{0,4}))?"
)
DEFAULT_PORTS = {"http": "80", "https": "443"}  # a browser's Origin leaves these out


@dataclass(frozen=True)
class Config:
    """Every setting of the server; the metadata names its variable and help text."""

    db: str = field(
        default="reporting.sqlite3",
        metadata={"env": "REPORTING_DB", "help": "SQLite database file"},
    )
    database_url: str = field(
        default="",
        metadata={
            "env": "REPORTING_DATABASE_URL",
            "help": "postgresql://... serves from PostgreSQL instead of the SQLite file",
        },
    )
    host: str = field(
        default="127.0.0.1",
        metadata={"env": "REPORTING_HOST", "help": "address to listen on"},
    )
    port: int = field(
        default=8080,
        metadata={"env": "REPORTING_PORT", "help": "TCP port to listen on", "range": (1, 65_535)},
    )
    rate_burst: int = field(
        default=20,
        metadata={
            "env": "REPORTING_RATE_BURST",
            "help": "requests a key may send at once",
            "range": (1, MANY),
        },
    )
    rate_per_second: float = field(
        default=10.0,
        metadata={
            "env": "REPORTING_RATE_PER_SECOND",
            "help": "tokens a key regains a second",
            "range": (0.001, MANY),
        },
    )
    auth_failures_per_minute: int = field(
        default=10,
        metadata={
            "env": "REPORTING_AUTH_FAILURES_PER_MINUTE",
            "help": "failed authentications allowed per client address a minute",
            "range": (1, MANY),
        },
    )
    trusted_proxies: str = field(
        default="",
        metadata={
            "env": "REPORTING_TRUSTED_PROXIES",
            "help": "comma list of proxy addresses/CIDRs whose X-Forwarded-For is believed",
        },
    )
    cors_origins: str = field(
        default="",
        metadata={
            "env": "REPORTING_CORS_ORIGINS",
            "help": "comma list of allowed origins, each scheme://host[:port] as a browser"
            " sends it (https://app.example): http or https, no path, no trailing slash,"
            " no wildcard",
        },
    )
    log_level: str = field(
        default="INFO",
        metadata={
            "env": "REPORTING_LOG_LEVEL",
            "help": "logging level: DEBUG, INFO, WARNING, ERROR or CRITICAL (any case)",
        },
    )
    log_format: str = field(
        default="text",
        metadata={
            "env": "REPORTING_LOG_FORMAT",
            "help": "access log format: text or json (any case)",
        },
    )
    read_connections: int = field(
        default=4,
        metadata={
            "env": "REPORTING_READ_CONNECTIONS",
            "help": "database connections each process reads through (the SQLite file's"
            " read-only connections, each with its thread, or the PostgreSQL pool)",
            "range": (1, 256),
            "why": " (each is a connection; on SQLite, a thread too)",
        },
    )
    read_timeout: float = field(
        default=5.0,
        metadata={
            "env": "REPORTING_READ_TIMEOUT",
            "help": "seconds a PostgreSQL read may take before the answer is 503",
            "range": TIMEOUT,
            "why": TIMEOUT_WHY,
        },
    )
    write_timeout: float = field(
        default=30.0,
        metadata={
            "env": "REPORTING_WRITE_TIMEOUT",
            "help": "seconds a client may stop reading an answer before it is cut off",
            "range": TIMEOUT,
            "why": TIMEOUT_WHY,
        },
    )
    shutdown_timeout: float = field(
        default=30.0,
        metadata={
            "env": "REPORTING_SHUTDOWN_TIMEOUT",
            "help": "seconds requests in flight may take to finish after SIGTERM or SIGINT",
            "range": TIMEOUT,
            "why": TIMEOUT_WHY,
        },
    )
    streams_per_company: int = field(
        default=2,
        metadata={
            "env": "REPORTING_STREAMS_PER_COMPANY",
            "help": "long answers (streamed arrays) one company may be sent at once",
            "range": (1, 256),
        },
    )
    answer_memory_mb: int = field(
        default=16,
        metadata={
            "env": "REPORTING_ANSWER_MEMORY_MB",
            "help": "megabytes of small answers each process keeps to send again until the"
            " next load (0: none)",
            "range": (0, 65_536),
        },
    )
    keepalive_timeout: float = field(
        default=15.0,
        metadata={
            "env": "REPORTING_KEEPALIVE_TIMEOUT",
            "help": "seconds an idle connection stays open between requests",
            "range": TIMEOUT,
            "why": TIMEOUT_WHY,
        },
    )
    header_timeout: float = field(
        default=10.0,
        metadata={
            "env": "REPORTING_HEADER_TIMEOUT",
            "help": "seconds a request's headers may take to arrive, from their first byte",
            "range": TIMEOUT,
            "why": TIMEOUT_WHY,
        },
    )
    max_connections: int = field(
        default=1000,
        metadata={
            "env": "REPORTING_MAX_CONNECTIONS",
            "help": "open connections in total; more are answered 503 and closed",
            "range": (1, 1_000_000),
        },
    )
    max_connections_per_address: int = field(
        default=64,
        metadata={
            "env": "REPORTING_MAX_CONNECTIONS_PER_ADDRESS",
            "help": "open connections per client address (IPv6: per /64; trusted proxies exempt)",
            "range": (1, 1_000_000),
        },
    )
    workers: int = field(
        default=1,
        metadata={
            "env": "REPORTING_WORKERS",
            "help": "server processes sharing the port (more than 1 needs --redis-url)",
            "range": (1, 64),
            "why": " (each is a process with its own connections and memory)",
        },
    )
    redis_url: str = field(
        default="",
        metadata={
            "env": "REPORTING_REDIS_URL",
            "help": "redis://host:port/db holding the rate limits shared by every process",
        },
    )
    bootstrap: bool = field(
        default=True,
        metadata={
            "env": "REPORTING_BOOTSTRAP",
            "help": "create the database from the sample data when the file is missing:"
            " true or false (also yes/no, on/off, 1/0)",
        },
    )

    def __post_init__(self) -> None:
        for item in fields(self):
            if "range" in item.metadata:
                _check_range(item.name, getattr(self, item.name), item.metadata)
        level, log_format = self.log_level.upper(), self.log_format.lower()
        if level not in LOG_LEVELS:
            levels = "DEBUG, INFO, WARNING, ERROR or CRITICAL"
            raise ValueError(f"log level {self.log_level!r} is not {levels}")
        if log_format not in LOG_FORMATS:
            raise ValueError(f"log format {self.log_format!r} is not text or json")
        # One spelling for the code that reads them (any case is accepted).
        object.__setattr__(self, "log_level", level)
        object.__setattr__(self, "log_format", log_format)
        if not self.host.strip():
            raise ValueError(
                "the host is empty, which would listen on every interface: name one"
                " (127.0.0.1; 0.0.0.0 for every IPv4 interface)"
            )
        if self.database_url:
            check_database_url(self.database_url)
        elif not self.db:
            raise ValueError("the database file's name is empty")
        self.networks()  # fail early on a bad proxy list
        self.origins()  # and on an origin that could never match
        if self.workers > 1 and not self.redis_url:
            raise ValueError(
                "more than one worker needs REPORTING_REDIS_URL (--redis-url): "
                "without it each process would keep its own rate limits"
            )
        if self.redis_url:
            check_redis_url(self.redis_url)

    def networks(self) -> tuple[Network, ...]:
        """The trusted proxy networks, parsed (once: this runs on every request)."""
        return _networks(self.trusted_proxies)

    def origins(self) -> tuple[str, ...]:
        """The CORS origins, parsed (empty: CORS off); every answer asks."""
        return _origins(self.cors_origins)


@functools.lru_cache(maxsize=8)
def _origins(listed: str) -> tuple[str, ...]:
    """The origins listed; refuse one that no browser's Origin header could equal (the
    match is exact text), which would leave CORS silently off for it."""
    origins = tuple(part.strip() for part in listed.split(",") if part.strip())
    for origin in origins:
        if not _is_origin(origin):
            raise ValueError(
                f"CORS origin {origin!r} is not an origin as a browser sends it:"
                " http:// or https://, a lowercase host, a port only if not the default;"
                " no path, no trailing slash, no wildcard (https://app.example)"
            )
    return origins


def _is_origin(text: str) -> bool:
    found = ORIGIN.fullmatch(text)
    if found is None:
        return False
    scheme, _, port = found.groups()
    return port is None or (1 <= int(port) <= 65_535 and port != DEFAULT_PORTS[scheme])


def _check_range(name: str, value: float, metadata: Mapping[str, Any]) -> None:
    """Refuse a value out of the setting's bounds (nan compares false: refused too)."""
    low, high = metadata["range"]
    if not low <= value <= high:
        why = metadata.get("why", "")
        label = name.replace("_", " ")
        raise ValueError(f"{label} {value} is out of range: {low:,} to {high:,}{why}")


def masked_url(url: str) -> str:
    """A database or Redis URL as printed: its password, if any, as *** (a URL's
    password in the netloc or a password= query parameter).

    The password runs to the URL's last "@": one holding a "#", "/" or "?" that was not
    percent-encoded ends the netloc early, yet is still a password (a later "@" in the
    query hides more than it need: better than showing a password).
    """
    url = re.sub(r"^([^:/?#]+://[^:/?#@]*):.*@", r"\1:***@", url, flags=re.DOTALL)
    return re.sub(r"([?&]password=)[^&#]*", r"\1***", url)


ENCODE_PASSWORD = "a password's '#', '/' or '?' must be percent-encoded: %23, %2F, %3F"


def _check_port(port: str, where: str, shown: bool) -> None:
    if port and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65_535):
        if not shown:
            raise ValueError(f"{where}: the port is not a number ({ENCODE_PASSWORD})")
        raise ValueError(f"{where}: port {port!r} is not a number from 1 to 65535")


def _check_hosts(netloc: str, where: str) -> None:
    """Each host[:port] of a URL (PostgreSQL may list several, comma-separated): a
    bracketed IPv6 address must be one, a port must be 1 to 65535.

    A password whose "#", "/" or "?" ended the netloc early reads as a host and port:
    what ``where`` masks is then not quoted either."""
    for item in netloc.rpartition("@")[2].split(","):
        shown = item in where
        port = item.partition(":")[2]
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            try:
                ipaddress.IPv6Address(host)
            except ValueError:
                raise ValueError(f"{where}: [{host}] is not an IPv6 address") from None
            if rest and not rest.startswith(":"):
                raise ValueError(f"{where}: {item!r} is not [address]:port")
            port = rest[1:]
        _check_port(port, where, shown)


def _split(url: str, schemes: Sequence[str], what: str) -> tuple[str, SplitResult]:
    """The URL as printed and its parts, its scheme one of ``schemes``."""
    where = f"{what} {masked_url(url)}"
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # an unclosed [ or a bracketed host that is no address
        raise ValueError(f"{where}: {exc}") from None
    if parts.scheme not in schemes:
        raise ValueError(f"{where} does not start with {' or '.join(s + '://' for s in schemes)}")
    return where, parts


def check_database_url(url: str) -> None:
    """Refuse a PostgreSQL URL the driver would fail on with a traceback when it first
    connects (a port that is no number, an unclosed [, an sslmode libpq does not know).
    The message prints the URL without its password."""
    if not url.isprintable():  # a control character, or a byte that is no UTF-8 (a surrogate)
        raise ValueError("the database URL holds a character that is not printable")
    where, parts = _split(url, POSTGRESQL_SCHEMES, "database URL")
    _check_hosts(parts.netloc, where)
    for mode in parse_qs(parts.query).get("sslmode", []):
        if mode not in SSL_MODES:
            raise ValueError(f"{where}: sslmode {mode!r} is not one of {', '.join(SSL_MODES)}")


def database_url(text: str) -> str:
    """``--database-url`` as the tools read it: a bad URL is a usage error (exit 2)."""
    try:
        check_database_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def check_redis_url(url: str) -> None:
    """Refuse a Redis URL that redis-py would fail on with a traceback (a port that is no
    number) or read as something else (a database that is no number: database 0)."""
    where, parts = _split(url, REDIS_SCHEMES, "Redis URL")
    databases = parse_qs(parts.query).get("db", [])
    if parts.scheme != "unix":  # else the path is the socket's
        _check_hosts(parts.netloc, where)
        databases.append(parts.path.removeprefix("/"))
    for db in databases:
        if db and not (db.isascii() and db.isdigit()):
            raise ValueError(f"{where}: the database {db!r} is not a number (redis://host:port/0)")


def base_url(host: str, port: int) -> str:
    """Where the server listens, as a URL: an IPv6 address goes in brackets."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (what is wrong, where to read more), exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


@functools.lru_cache(maxsize=8)
def _networks(text: str) -> tuple[Network, ...]:
    return parse_networks(text)


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false (nor yes/no, on/off, 1/0)")


def program_name() -> str:
    """How the server was started, for its messages: reporting-api or python -m app."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return name if name.startswith("reporting-") else "python -m app"


def build_parser(environ: Mapping[str, str]) -> argparse.ArgumentParser:
    """An argparse parser whose defaults come from the environment."""
    parser = OneLineParser(
        prog=program_name(),
        description="Serve the security-awareness reporting API (read-only).",
    )
    for item in fields(Config):
        env = item.metadata["env"]
        kind: Any = _parse_bool if item.type in (bool, "bool") else _TYPES[str(item.type)]
        default = environ.get(env)
        if default is not None:
            try:
                default = kind(default)
            except (ValueError, argparse.ArgumentTypeError) as exc:
                parser.error(f"{env}: {exc}")
        value = item.default if default is None else default
        # The default as the help shows it: a variable's URL with its password masked
        # (and % doubled, since argparse formats the help with %).
        shown = (masked_url(value) if isinstance(value, str) else str(value)).replace("%", "%%")
        parser.add_argument(
            f"--{item.name.replace('_', '-')}",
            type=kind,
            default=value,
            help=f"{item.metadata['help']}{_range_help(item.metadata)} [env {env}]"
            f" (default: {shown})",
            metavar=item.name.upper(),
        )
    return parser


def _range_help(metadata: Mapping[str, Any]) -> str:
    """A setting's bounds, for its help."""
    if "range" not in metadata:
        return ""
    low, high = metadata["range"]
    return f" ({low:,} to {high:,})"


def _integer(text: str) -> int:
    if not INTEGER.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (digits 0-9)")
    return int(text)


def _number(text: str) -> float:
    if not NUMBER.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (digits 0-9, one point)")
    return float(text)


_TYPES: dict[str, Any] = {"str": str, "int": _integer, "float": _number}


# The writers' own variables (reclassify and the loaders' verdicts, the webhook sender):
# with the server's (each Config field's "env"), every REPORTING_* name the service reads.
WRITER_SETTINGS = (
    "REPORTING_BOT_FAST_SECONDS", "REPORTING_BOT_NETWORKS", "REPORTING_WEBHOOK_ALLOW_ADDRESSES",
    "REPORTING_WEBHOOK_RETRY_SCHEDULE", "REPORTING_WEBHOOK_CA_FILE",
)  # fmt: skip


def unknown_settings(environ: Mapping[str, str]) -> list[str]:
    """A warning for each REPORTING_* variable nothing reads, naming the closest known one:
    a misspelt setting would otherwise be ignored without a word (a proxy list never
    trusted, a timeout never set)."""
    known = [item.metadata["env"] for item in fields(Config)] + list(WRITER_SETTINGS)
    warnings = []
    for name in sorted(environ):
        if name.startswith("REPORTING_") and name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            warnings.append(f"{name} is not a setting of this service and is ignored{hint}")
    return warnings


def load_config(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> Config:
    """Read the configuration: flags win over environment variables over defaults."""
    environ = os.environ if environ is None else environ
    parser = build_parser(environ)
    try:
        args = parser.parse_args(argv)
        return Config(**vars(args))
    except (ValueError, argparse.ArgumentTypeError) as exc:
        parser.error(str(exc))
        raise  # unreachable: parser.error exits


def parse_networks(text: str) -> tuple[Network, ...]:
    """Parse the operator's comma-separated trusted proxies, failing loudly on a typo."""
    networks: list[Network] = []
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry))
        except ValueError as exc:
            raise ValueError(f"invalid trusted proxy network {entry!r}: {exc}") from None
    return tuple(networks)
