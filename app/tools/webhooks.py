"""The webhook tool: subscriptions (create, list, disable, enable, delete, rotate-secret)
and the sender (``run``), on SQLite or PostgreSQL.

A secret is printed once, when made; the subscription keeps it to sign with, and the
API never shows it. See docs/operations.md (Webhooks).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..config import OneLineParser
from ..data import webhooks
from ..data.pg import webhooks as pg_webhooks
from .cli import ToolError, add_store_arguments, command, record_id
from .keytool import in_pg_transaction, in_transaction, reading
from .webhook_sender import SCHEDULE, Settings, networks_of, run_sender, schedule_of

COLUMNS = (
    "id", "company", "label", "host", "events", "status", "last success", "last failure",
    "failures",
)  # fmt: skip
SHOWN_ONCE = "Store it now: the secret is not shown again."


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(description="Webhook subscriptions and their sender.")
    add_store_arguments(parser, "SQLite database file (must exist)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    create = commands.add_parser("create", help="subscribe an https URL (secret shown once)")
    create.add_argument(
        "--company", required=True, type=record_id, metavar="ID", help="whose events it sends"
    )
    create.add_argument("--url", required=True, help="https://... (the receiver)")
    create.add_argument(
        "--events", required=True, help="comma list of event types: open, click, report, fail"
    )
    create.add_argument("--label", required=True, help="what the subscription is for")
    commands.add_parser("list", help="list every subscription (never a secret or a full URL)")
    for name, what in (
        ("disable", "stop sending (the position is kept)"),
        ("enable", "send again from the kept position (a failing one too)"),
        ("delete", "remove the subscription and its delivery log"),
        ("rotate-secret", "a new secret; the old one keeps signing beside it for 24 hours"),
    ):
        sub = commands.add_parser(name, help=what)
        sub.add_argument(
            "webhook_id", type=record_id, metavar="WEBHOOK_ID", help="its id, as list shows"
        )
    send = commands.add_parser(
        "run",
        help="send every enabled subscription's new events until SIGTERM",
        description="One sender per database (a second one is refused). SIGTERM or SIGINT "
        "lets the message in flight finish, then exits 0.",
    )
    send.add_argument(
        "--allow-addresses",
        default=os.environ.get("REPORTING_WEBHOOK_ALLOW_ADDRESSES", ""),
        metavar="NETS",
        help="comma list of addresses or networks a receiver may resolve to although they "
        "are loopback, private or link-local (default none) [env "
        "REPORTING_WEBHOOK_ALLOW_ADDRESSES]",
    )
    send.add_argument(
        "--retry-schedule",
        default=os.environ.get("REPORTING_WEBHOOK_RETRY_SCHEDULE") or None,
        metavar="SECONDS",
        help="comma list of the delays before each attempt (default Standard Webhooks': "
        "0,5,300,1800,7200,18000,36000,50400,72000,86400) [env "
        "REPORTING_WEBHOOK_RETRY_SCHEDULE]",
    )
    send.add_argument(
        "--ca-file",
        default=os.environ.get("REPORTING_WEBHOOK_CA_FILE") or None,
        metavar="PEM",
        help="trust these certificate authorities instead of the system's [env "
        "REPORTING_WEBHOOK_CA_FILE]",
    )
    send.add_argument(
        "--once", action="store_true", help="stop once every subscription has caught up"
    )
    return parser


def sender_settings(args: argparse.Namespace) -> Settings:
    """The sender's settings; a bad one is a usage error."""
    try:
        given = args.retry_schedule  # an empty one is refused, not the default
        schedule = SCHEDULE if given is None else schedule_of(given)
        allowed = networks_of(args.allow_addresses)
    except ValueError as exc:
        raise ToolError(f"bad setting: {exc}") from None
    return Settings(schedule, allowed, args.ca_file, once=args.once)


def format_table(rows: list[tuple[Any, ...]]) -> str:
    """An aligned table of the subscriptions' public facts."""
    cells = [
        (str(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), str(r[5]), r[7] or "-",
         r[8] or "-", str(r[9]))
        for r in rows
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in [COLUMNS, *cells]) for i in range(len(COLUMNS))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [COLUMNS, *cells]
    ]
    return "\n".join(lines)


def store_call(args: argparse.Namespace, name: str, *call: Any, write: bool = True) -> Any:
    """``webhooks.name(conn, *call)`` on the chosen store, in one transaction."""
    if args.database_url:
        fn = getattr(pg_webhooks, name)
        return asyncio.run(in_pg_transaction(args.database_url, fn, *call))
    fn = getattr(webhooks, name)
    return in_transaction(args.db, fn, *call) if write else reading(args.db, fn, *call)


def run(args: argparse.Namespace) -> None:
    now = dt.datetime.now(dt.UTC)
    try:
        if args.command == "run":
            logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
            asyncio.run(run_sender(args.db, args.database_url, sender_settings(args)))
        elif args.command == "create":
            sub = webhooks.Subscription.of(args.company, args.url, args.events, args.label)
            webhook_id, secret = store_call(args, "create", sub, now)
            print(f"Created webhook {webhook_id} for company {args.company} ({sub.types}):")
            print(f"  {secret}")
            print(SHOWN_ONCE)
        elif args.command == "list":
            print(format_table(store_call(args, "list_all", write=False)))
        elif args.command in ("disable", "enable"):
            status = f"{args.command}d"
            store_call(args, "set_status", args.webhook_id, status)
            print(f"Webhook {args.webhook_id} {status}.")
        elif args.command == "delete":
            store_call(args, "delete", args.webhook_id)
            print(f"Deleted webhook {args.webhook_id}.")
        elif args.command == "rotate-secret":
            secret = store_call(args, "rotate", args.webhook_id, now)
            until = webhooks.utc_text(now + webhooks.ROTATION)
            print(f"New secret of webhook {args.webhook_id} (the old one signs too until {until}):")
            print(f"  {secret}")
            print(SHOWN_ONCE)
    except webhooks.WebhookRefused as exc:
        raise ToolError(str(exc)) from None


@command("error")
def main(argv: Sequence[str] | None = None) -> int:
    """Run the tool; a refusal is one line on stderr and exit code 1."""
    run(build_parser().parse_args(argv))
    return 0


# ``python -m app.tools.webhooks`` is the tool too (it used to exit 0 having done nothing).
if __name__ == "__main__":
    sys.exit(main())
