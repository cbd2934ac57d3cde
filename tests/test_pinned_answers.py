"""Every endpoint answers the sample exactly as it did when the answers were pinned.

A filter added later must keep its default's answers byte for byte: this test holds,
for fixtures/sample.json on a fixed date, a digest of the status, the content type and
the body of every listing and report (every campaign and employee, each format, the
filters and pages) for both keys, on both stores. The pins are digests (the answers
themselves are the oracle tests' business); a change of the sample changes them, and
the test says so rather than pass: re-pin deliberately with
``REPORTING_PIN_ANSWERS=write .venv/bin/python -m pytest tests/test_pinned_answers.py``
once the new answers are known to be right.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from aiohttp.test_utils import TestClient

from app.tools.loader import SAMPLE_FIXTURE

from .support.factories import API, KEYS, Day, get, sample
from .support.stores import on_both_stores

store_kind = on_both_stores()
STORE_READS_ONLY = True
PINS = Path(__file__).parent / "data" / "sample_answers.json"
WRITE = os.environ.get("REPORTING_PIN_ANSWERS") == "write"


def paths() -> list[str]:
    """The requests pinned: each endpoint, its formats, filters and pages."""
    data = sample()
    found = [
        f"{API}/campaigns",
        f"{API}/campaigns?filter[with_captcha]=false",
        f"{API}/campaigns?format=csv",
        f"{API}/campaigns?format=ndjson&filter[with_captcha]=false",
        f"{API}/campaigns?per_page=2&page=2&filter[from_launch_date]=2025-01-01",
        f"{API}/victimsapi?per_page=500",
        f"{API}/victimsapi?per_page=500&format=csv",
        f"{API}/victimsapi?filter[min_clicked]=1&filter[min_failed]=1",
        f"{API}/victimsapi?filter[min_clicked]=2&format=ndjson",
        f"{API}/courses",
        f"{API}/courses?format=csv",
        f"{API}/course-inscriptions?per_page=500",
        f"{API}/course-inscriptions?per_page=500&format=csv",
        f"{API}/events?limit=1000",
        f"{API}/events?limit=1000&filter[type]=click,open&filter[with_captcha]=false",
        f"{API}/events?limit=7&format=ndjson",
        f"{API}/events?limit=1000&format=csv",
    ]
    for campaign in data["campaigns"]:
        one = f"{API}/campaigns/{campaign['id']}"
        found += [one, f"{one}?filter[with_captcha]=false", f"{one}/events"]
        found += [f"{one}/events?filter[type]=click&filter[with_captcha]=false"]
        found += [f"{one}/events?per_page=5&page=2", f"{one}/events?format=csv"]
    for person in data["employees"]:
        one = f"{API}/victimsapi/{person['id']}"
        found += [one, f"{one}/events", f"{one}/events?per_page=2&format=ndjson"]
    return found


async def answers(client: TestClient) -> dict[str, str]:
    """Each request's digest of status, content type and body, for both keys."""
    digests = {}
    for company, key in KEYS.items():
        for path in paths():
            response = await get(client, path, key)
            kind = response.headers["Content-Type"]
            body = await response.read()
            if kind.startswith("application/problem+json"):  # less its request's own id
                problem = json.loads(body)
                body = json.dumps({k: v for k, v in problem.items() if k != "request_id"}).encode()
            digest = hashlib.sha256(f"{response.status} {kind}\n".encode() + body).hexdigest()
            digests[f"{company} {path}"] = digest[:32]
    return digests


def sample_digest() -> str:
    return hashlib.sha256(Path(SAMPLE_FIXTURE).read_bytes()).hexdigest()


async def test_every_answer_is_the_pinned_one(dated: tuple[TestClient, Day]) -> None:
    client, _ = dated  # on 2025-09-01, so that overdue is fixed
    found = await answers(client)
    if WRITE:
        pins = {"sample_sha256": sample_digest(), "answers": found}
        PINS.write_text(json.dumps(pins, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    pins = json.loads(PINS.read_text(encoding="utf-8"))
    assert pins["sample_sha256"] == sample_digest(), (
        "fixtures/sample.json changed since the answers were pinned: check the new answers"
        " and re-pin (this module's docstring says how)"
    )
    changed = sorted(name for name, digest in pins["answers"].items() if found.get(name) != digest)
    assert not changed, f"{len(changed)} answers changed, such as {changed[:5]}"
    assert set(found) == set(pins["answers"])
