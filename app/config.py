"""Configuration: command-line flags over ``REPORTING_*`` environment variables."""

from __future__ import annotations

import argparse
import functools
import ipaddress
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NoReturn
from urllib.parse import urlsplit

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
REDIS_SCHEMES = ("redis", "rediss", "unix")


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
        metadata={"env": "REPORTING_PORT", "help": "TCP port to listen on, 1 to 65535"},
    )
    rate_burst: int = field(
        default=20,
        metadata={"env": "REPORTING_RATE_BURST", "help": "requests a key may send at once"},
    )
    rate_per_second: float = field(
        default=10.0,
        metadata={"env": "REPORTING_RATE_PER_SECOND", "help": "tokens a key regains a second"},
    )
    auth_failures_per_minute: int = field(
        default=10,
        metadata={
            "env": "REPORTING_AUTH_FAILURES_PER_MINUTE",
            "help": "failed authentications allowed per client address a minute",
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
        metadata={"env": "REPORTING_CORS_ORIGINS", "help": "comma list of allowed origins"},
    )
    log_level: str = field(
        default="INFO",
        metadata={
            "env": "REPORTING_LOG_LEVEL",
            "help": "logging level: DEBUG, INFO, WARNING, ERROR or CRITICAL",
        },
    )
    log_format: str = field(
        default="text",
        metadata={"env": "REPORTING_LOG_FORMAT", "help": "access log format: text or json"},
    )
    read_connections: int = field(
        default=4,
        metadata={"env": "REPORTING_READ_CONNECTIONS", "help": "read-only SQLite connections"},
    )
    read_timeout: float = field(
        default=5.0,
        metadata={
            "env": "REPORTING_READ_TIMEOUT",
            "help": "seconds a PostgreSQL read may take before the answer is 503",
        },
    )
    write_timeout: float = field(
        default=30.0,
        metadata={
            "env": "REPORTING_WRITE_TIMEOUT",
            "help": "seconds a client may stop reading an answer before it is cut off",
        },
    )
    shutdown_timeout: float = field(
        default=30.0,
        metadata={
            "env": "REPORTING_SHUTDOWN_TIMEOUT",
            "help": "seconds requests in flight may take to finish after SIGTERM or SIGINT",
        },
    )
    streams_per_company: int = field(
        default=2,
        metadata={
            "env": "REPORTING_STREAMS_PER_COMPANY",
            "help": "long answers (streamed arrays) one company may be sent at once",
        },
    )
    answer_memory_mb: int = field(
        default=16,
        metadata={
            "env": "REPORTING_ANSWER_MEMORY_MB",
            "help": "megabytes of small answers each process keeps to send again until the"
            " next load (0: none)",
        },
    )
    keepalive_timeout: float = field(
        default=15.0,
        metadata={
            "env": "REPORTING_KEEPALIVE_TIMEOUT",
            "help": "seconds an idle connection stays open between requests",
        },
    )
    header_timeout: float = field(
        default=10.0,
        metadata={
            "env": "REPORTING_HEADER_TIMEOUT",
            "help": "seconds a request's headers may take to arrive, from their first byte",
        },
    )
    max_connections: int = field(
        default=1000,
        metadata={
            "env": "REPORTING_MAX_CONNECTIONS",
            "help": "open connections in total; more are answered 503 and closed",
        },
    )
    max_connections_per_address: int = field(
        default=64,
        metadata={
            "env": "REPORTING_MAX_CONNECTIONS_PER_ADDRESS",
            "help": "open connections per client address (IPv6: per /64; trusted proxies exempt)",
        },
    )
    workers: int = field(
        default=1,
        metadata={
            "env": "REPORTING_WORKERS",
            "help": "server processes sharing the port (more than 1 needs --redis-url)",
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
        if self.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            levels = "DEBUG, INFO, WARNING, ERROR or CRITICAL"
            raise ValueError(f"log level {self.log_level!r} is not {levels}")
        if self.log_format not in ("text", "json"):
            raise ValueError("log format must be text or json")
        if self.rate_burst < 1 or self.rate_per_second <= 0:
            raise ValueError("the rate limit needs a burst >= 1 and a positive rate")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"port {self.port} is not between 1 and 65535")
        if self.auth_failures_per_minute < 1 or self.read_connections < 1:
            raise ValueError("auth failures per minute and read connections must be >= 1")
        if min(self.write_timeout, self.read_timeout, self.shutdown_timeout) <= 0:
            raise ValueError("the read, write and shutdown timeouts must be positive")
        if self.streams_per_company < 1:
            raise ValueError("streams per company must be >= 1")
        if self.answer_memory_mb < 0:
            raise ValueError("answer memory must be >= 0 megabytes")
        if self.keepalive_timeout <= 0 or self.header_timeout <= 0:
            raise ValueError("the keep-alive and header timeouts must be positive")
        if self.max_connections < 1 or self.max_connections_per_address < 1:
            raise ValueError("max connections and max connections per address must be >= 1")
        if self.database_url and not self.database_url.startswith(("postgresql://", "postgres://")):
            raise ValueError("the database URL must start with postgresql://")
        self.networks()  # fail early on a bad proxy list
        if self.workers < 1:
            raise ValueError("workers must be >= 1")
        if self.workers > 1 and not self.redis_url:
            raise ValueError(
                "more than one worker needs REPORTING_REDIS_URL (--redis-url): "
                "without it each process would keep its own rate limits"
            )
        if self.redis_url and urlsplit(self.redis_url).scheme not in REDIS_SCHEMES:
            raise ValueError("the Redis URL must start with redis://, rediss:// or unix://")

    def networks(self) -> tuple[Network, ...]:
        """The trusted proxy networks, parsed (once: this runs on every request)."""
        return _networks(self.trusted_proxies)

    def origins(self) -> tuple[str, ...]:
        """The CORS origins, parsed (empty: CORS off); every answer asks."""
        return _origins(self.cors_origins)


@functools.lru_cache(maxsize=8)
def _origins(listed: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in listed.split(",") if part.strip())


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
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
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
        parser.add_argument(
            f"--{item.name.replace('_', '-')}",
            type=kind,
            default=item.default if default is None else default,
            help=f"{item.metadata['help']} [env {env}]",
            metavar=item.name.upper(),
        )
    return parser


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


_TYPES: dict[str, Any] = {"str": str, "int": _integer, "float": _number}


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
