"""GoPhish campaigns to one fixture document (contract.md 16), as a pure function.

Ids derive from (company, source, GoPhish campaign id, ...), so the same export always
maps to the same rows and a later export of the same campaign adds only what is new;
employees are matched by email within the company and keep their ids and fields.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..data.fields import MAX_ID, TIMESTAMP_FORMAT
from .gophish_format import (
    EVENT_OF_MESSAGE,
    SENT_MESSAGE,
    Campaign,
    Instant,
    Problems,
    browser_of,
    child,
    mailbox,
)
from .gophish_ids import safe_id


def stable_id(*key: Any) -> int:
    """An id in 1..2^53-1: BLAKE2b-64 of the key as compact JSON, modulo 2^63-1, plus 1
    (what earlier imports used), brought under 2^53 by :func:`safe_id`."""
    text = json.dumps(key, ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return safe_id(int.from_bytes(digest, "big") % MAX_ID + 1)


@dataclass
class Context:
    """What the mapping needs besides the export: who the company already has."""

    company: int
    source: str
    existing: dict[str, dict[str, Any]] = field(default_factory=dict)  # by mailbox()
    taken_ids: set[int] = field(default_factory=set)  # every employee id in the database
    people: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    wide_ids: bool = False  # the database holds ids above 2^53-1 from an earlier import


@dataclass
class Summary:
    """What an import did, for its one summary line."""

    campaigns: int = 0
    targets: int = 0
    sent: int = 0
    never_sent: int = 0
    events: int = 0
    new_employees: int = 0
    updated_employees: int = 0
    unmatched_people: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    changed: bool = True  # false when the database already held all of it

    def line(self) -> str:
        """``2 campaigns, 5 targets (4 sent), 1 never sent, ...; skipped: ...``."""
        parts = [
            f"{self.campaigns} campaigns",
            f"{self.targets} targets ({self.sent} sent)",
            f"{self.never_sent} never sent",
            f"{self.events} events",
            f"{self.new_employees} new employees",
            f"{self.updated_employees} updated from the people file",
        ]
        if self.unmatched_people:
            parts.append(f"{self.unmatched_people} people-file rows matched no result")
        skipped = ", ".join(f"{n} {message}" for message, n in sorted(self.skipped.items()))
        unchanged = "" if self.changed else "; nothing changed, data version kept"
        return ", ".join(parts) + f"; skipped: {skipped or 'nothing'}{unchanged}"


def _ts(instant: Instant) -> str:
    return instant.utc.strftime(TIMESTAMP_FORMAT)


class _Mapping:
    """One pass over the checked campaigns, building the fixture document."""

    def __init__(self, ctx: Context, problems: Problems) -> None:
        self.ctx, self.problems, self.summary = ctx, problems, Summary()
        self.employees: dict[str, dict[str, Any]] = {}
        self.doc: dict[str, list[dict[str, Any]]] = {
            "employees": [],
            "campaigns": [],
            "campaign_targets": [],
            "campaign_events": [],
        }

    def campaign(self, campaign: Campaign) -> None:
        head, ctx = campaign.head, self.ctx
        campaign_id = stable_id("campaign", ctx.company, ctx.source, head["id"])
        launch = head["launch_date"] or head["created_date"]
        if launch is None:
            self.problems.add(f"{child(campaign.path, 'launch_date')}: unset, as is created_date")
            return
        title, launch_date = head["name"], _ts(launch)
        self.doc["campaigns"].append(
            {
                "id": campaign_id,
                "company_id": ctx.company,
                "title": title,
                "launch_date": launch_date,
            }
        )
        targets: dict[str, dict[str, Any]] = {}
        for result in campaign.results:
            key = mailbox(result["email"])
            employee_id = self.employee(key, result)["id"]
            targets.setdefault(
                key, {"campaign_id": campaign_id, "employee_id": employee_id, "sent_at": None}
            )
        seen: Counter[tuple[str, str, str]] = Counter()
        reached: set[str] = set()
        for index, entry in campaign.timeline:
            where, message = child(campaign.path, f"timeline[{index}]"), entry["message"]
            if message != SENT_MESSAGE and message not in EVENT_OF_MESSAGE:
                self.summary.skipped[message] += 1
                continue
            key = mailbox(entry["email"])
            target = targets.get(key)
            if target is None and key in campaign.refused:
                continue  # its result was refused, and said so
            if target is None:
                self.problems.add(f"{where}.email: {entry['email']!r} is not among the results")
            elif entry["time"] is None:
                self.problems.add(f"{where}.time: the zero date; an event needs a real instant")
            elif message == SENT_MESSAGE:
                sent = [t for t in (target["sent_at"], _ts(entry["time"])) if t is not None]
                target["sent_at"] = min(sent)
            else:
                occurrence = (key, message, entry["time"].exact)
                seen[occurrence] += 1
                key_parts = (ctx.company, ctx.source, head["id"], *occurrence, seen[occurrence])
                self.event(stable_id("event", *key_parts), target, message, entry)
                reached.add(key)
        # A target is someone the campaign reached: sent to (or seen, if GoPhish logged an
        # event without its sending); a result GoPhish never sent to is only counted.
        for key, target in targets.items():
            if target["sent_at"] is not None or key in reached:
                self.doc["campaign_targets"].append(target)
            else:
                self.summary.never_sent += 1
        self.summary.campaigns += 1

    def event(self, event_id: int, target: dict[str, Any], message: str, entry: Any) -> None:
        ip, user_agent = browser_of(entry["details"])
        self.doc["campaign_events"].append(
            {
                "id": event_id,
                "campaign_id": target["campaign_id"],
                "employee_id": target["employee_id"],
                "type": EVENT_OF_MESSAGE[message],
                "timestamp": _ts(entry["time"]),
                "with_captcha": False,
                "ip": ip,
                "user_agent": user_agent,
            }
        )

    def employee(self, key: str, result: dict[str, Any]) -> dict[str, Any]:
        """The company's employee with this email, else a new one; written only if changed."""
        if key in self.employees:
            return self.employees[key]
        department, country = self.ctx.people.get(key, (None, None))
        known = self.ctx.existing.get(key)
        if known is None:
            n = 0
            while (new_id := stable_id("employee", self.ctx.company, key, n)) in self.ctx.taken_ids:
                n += 1
            self.ctx.taken_ids.add(new_id)
            person = {
                "id": new_id,
                "company_id": self.ctx.company,
                "first_name": result["first_name"],
                "last_name": result["last_name"],
                "email": result["email"],
                "department": department or "",
                "country": country or "",
            }
            self.summary.new_employees += 1
        else:
            given = {"department": department, "country": country}
            person = known | {k: v for k, v in given.items() if v is not None}
            self.summary.updated_employees += person != known
        if person != known:
            self.doc["employees"].append(person)
        self.employees[key] = person
        return person


def to_fixture(
    campaigns: list[Campaign], ctx: Context, problems: Problems
) -> tuple[dict[str, list[dict[str, Any]]], Summary]:
    """Map checked campaigns to one fixture document; LoadError names every problem,
    the reading's (already in ``problems``) and each inconsistency found here."""
    mapping = _Mapping(ctx, problems)
    for campaign in campaigns:
        mapping.campaign(campaign)
    problems.raise_any()
    summary, doc = mapping.summary, mapping.doc
    summary.targets = len(doc["campaign_targets"])
    summary.sent = sum(t["sent_at"] is not None for t in doc["campaign_targets"])
    summary.events = len(doc["campaign_events"])
    summary.unmatched_people = len(ctx.people.keys() - mapping.employees.keys())
    return doc, summary
