"""A plain-Python oracle of the automation rules (what docs/interface.md states): each
event's verdict and reasons from the events and the targets' sending times."""

from __future__ import annotations

import calendar
import ipaddress
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from app.data.automation import SCANNER_AGENTS

from .factories import sample

ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
Event = Mapping[str, Any]


def seconds(instant: str) -> int:
    return calendar.timegm(time.strptime(instant, "%Y-%m-%dT%H:%M:%SZ"))


def _windows(clicks: list[Event], span: int, enough: int, who: Any) -> set[int]:
    """Ids of the clicks inside some window of ``span`` seconds holding ``enough`` of
    ``who`` (clicks or different employees)."""
    found: set[int] = set()
    for start in clicks:
        inside = [
            c for c in clicks if 0 <= seconds(c["timestamp"]) - seconds(start["timestamp"]) <= span
        ]
        if len({who(c) for c in inside}) >= enough:
            found |= {c["id"] for c in inside}
    return found


def decide(
    events: Iterable[Event],
    sent_at: Mapping[tuple[int, int], str | None] | None = None,
    fast: int = 10,
    networks: tuple[str, ...] = (),
) -> dict[int, dict[str, Any]]:
    """Each event's ``automation`` as the feed gives it."""
    events = list(events)
    sent = sent_at or {}
    person: dict[Any, list[Event]] = defaultdict(list)
    address: dict[Any, list[Event]] = defaultdict(list)
    for e in events:
        if e["type"] == "click":
            person[(e["campaign_id"], e["employee_id"])].append(e)
            if e.get("ip") is not None:
                address[(e["campaign_id"], e["ip"])].append(e)
    burst = set().union(*(_windows(g, 3, 4, lambda c: c["id"]) for g in person.values()))
    shared = set().union(
        *(_windows(g, 60, 3, lambda c: c["employee_id"]) for g in address.values())
    )
    nets = [ipaddress.ip_network(n) for n in networks]
    out = {}
    for e in events:
        reasons = []
        if e["type"] != "report" and not e["with_captcha"]:
            when = sent.get((e["campaign_id"], e["employee_id"]))
            agent, ip = e.get("user_agent"), e.get("ip")
            if fast and when is not None and seconds(e["timestamp"]) - seconds(when) < fast:
                reasons.append("fast_after_sent")
            if agent is not None and (
                not agent.strip(" ")
                or any(p in agent.translate(ASCII_LOWER) for p in SCANNER_AGENTS)
            ):
                reasons.append("scanner_agent")
            if ip is not None and _inside(ip, nets):
                reasons.append("scanner_network")
            if e["id"] in burst:
                reasons.append("burst")
            if e["id"] in shared:
                reasons.append("shared_address")
        automated = {"fast_after_sent", "scanner_agent", "scanner_network"} & set(reasons)
        verdict = "automated" if automated else "suspected" if reasons else "human"
        out[e["id"]] = {"verdict": verdict, "reasons": reasons}
    return out


def _inside(text: str, nets: list[Any]) -> bool:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return any(address in n or (mapped is not None and mapped in n) for n in nets)


@cache
def sample_verdicts() -> dict[int, dict[str, Any]]:
    """The sample's events' ``automation``, by the default settings (worked out once:
    callers only read it)."""
    data = sample()
    sent = {
        (t["campaign_id"], t["employee_id"]): t.get("sent_at") for t in data["campaign_targets"]
    }
    return decide(data["campaign_events"], sent)
