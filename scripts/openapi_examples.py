"""Regenerate app/web/examples.json: each documented request, answered by the real app.

The app serves a fresh database made from fixtures/sample.json and add_example_data on
127.0.0.1, and every example's request is sent with company 1's sample key (the partners'
API's with the partner's); the answer becomes the example's body. `--check` writes
nothing and exits 1 when an example is stale (the OpenAPI tests catch that too). Run it
after changing the sample or an answer: `python scripts/openapi_examples.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # a clone needs no install
from aiohttp import ClientSession, web

from app.config import Config
from app.data import webhooks
from app.data.schema import connect_writer, write_transaction
from app.main import create_app
from app.tools.loader import SAMPLE_FIXTURE, load_files
from app.tools.webhook_sender import LOGGED

EXAMPLES = Path(__file__).resolve().parent.parent / "app" / "web" / "examples.json"


def add_example_data(db: Path) -> None:
    """What the examples need beyond the sample: company 1's subscription of the webhook
    examples, with two logged attempts (the tool writes them, not the loader), and one
    moment the keys were made, which /key tells (the loader stamps the load's)."""
    moment = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)
    sub = webhooks.Subscription.of(1, "https://soc.example.com/in", "fail,report", "SOC")
    conn = connect_writer(db)
    try:
        with write_transaction(conn):
            conn.execute("UPDATE api_keys SET created_at = ?", (webhooks.utc_text(moment),))
            webhook_id, _ = webhooks.create(conn, sub, moment)
            for attempt, status, code, error in ((1, "failed", None, "timeout"),
                                                 (2, "succeeded", 200, None)):  # fmt: skip
                at = webhooks.utc_text(moment + dt.timedelta(seconds=5 * attempt))
                row = (webhook_id, "msg_671_1001", 1001, attempt, at, status, code, error)
                same = (webhook_id, sub.company_id, webhooks.created_text(moment))  # the one made
                conn.execute(LOGGED, (*row, *same))
    finally:
        conn.close()


def render(examples: dict[str, Any]) -> str:
    """The file's text: one layout, so that a regeneration changes only what changed."""
    return json.dumps(examples, indent=1, ensure_ascii=False) + "\n"


async def answers(examples: dict[str, Any], db: Path) -> dict[str, Any]:
    """The examples with each body replaced by what the app answers its request."""
    sample = json.loads(SAMPLE_FIXTURE.read_text(encoding="utf-8"))
    key = next(k["key"] for k in sample["api_keys"] if k.get("company_id") == 1)
    partner = next(k["key"] for k in sample["api_keys"] if k.get("partner_id"))
    runner = web.AppRunner(create_app(Config(db=str(db))))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with ClientSession(f"http://127.0.0.1:{port}") as http:
            fresh = {}
            for view, example in examples.items():
                sent = partner if example["request"].startswith("/api/partners/") else key
                async with http.get(example["request"], headers={"X-API-KEY": sent}) as r:
                    if r.status != 200:
                        raise SystemExit(f"{example['request']}: {r.status} {await r.text()}")
                    fresh[view] = example | {"body": await r.json()}
            return fresh
    finally:
        await runner.cleanup()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if an example is stale")
    args = parser.parse_args()
    text = EXAMPLES.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as directory:
        db = Path(directory) / "sample.sqlite3"
        load_files(db, [SAMPLE_FIXTURE])
        add_example_data(db)
        fresh = render(asyncio.run(answers(json.loads(text), db)))
    if fresh == text:
        print(f"{EXAMPLES.name}: every example is what the sample answers")
        return 0
    if args.check:
        print(f"{EXAMPLES.name} is stale: run python scripts/openapi_examples.py")
        return 1
    EXAMPLES.write_text(fresh, encoding="utf-8")
    print(f"{EXAMPLES.name} rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
