"""The rules' fixture of the automation tests: company 900, sent at 09:00:00, each rule
with its bounds (test_automation.py), and the filter's tests over it."""

from __future__ import annotations

from typing import Any

DESKTOP = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/126.0 Safari/537.36"
COMPANY, CAMPAIGN, SHARED_CAMPAIGN = 900, 9001, 9002
GATEWAY_KEY = "rk_test_gateway_0123456789abcdef01234567"


def at(clock: str, day: str = "2025-06-02") -> str:
    return f"{day}T{clock}Z"


def event(id_: int, employee: int, clock: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": id_,
        "campaign_id": fields.pop("campaign", CAMPAIGN),
        "employee_id": employee,
        "type": fields.pop("type", "click"),
        "timestamp": at(clock),
        "with_captcha": fields.pop("captcha", False),
        "ip": fields.pop("ip", f"198.51.100.{employee % 250}"),
        "user_agent": fields.pop("agent", DESKTOP),
    }


def done_when() -> dict[str, Any]:
    """The fixture of the rules: company 900, its people, two campaigns sent at 09:00:00."""
    people = range(9001, 9013)
    return {
        "companies": [{"id": COMPANY, "name": "Gateway Corp"}],
        "employees": [
            {
                "id": p,
                "company_id": COMPANY,
                "first_name": "P",
                "last_name": str(p),
                "email": f"p{p}@gateway.example",
                "department": "Ops",
                "country": "Spain",
            }
            for p in people
        ],
        "campaigns": [
            {"id": c, "company_id": COMPANY, "title": f"Invoice {c}", "launch_date": at("09:00:00")}
            for c in (CAMPAIGN, SHARED_CAMPAIGN, 9003)
        ],
        "campaign_targets": [
            {"campaign_id": c, "employee_id": p, "sent_at": at("09:00:00")}
            for c in (CAMPAIGN, SHARED_CAMPAIGN)
            for p in people
        ],
        "campaign_events": [
            event(90001, 9001, "09:00:03"),
            event(90002, 9002, "09:12:00", agent="python-requests/2.31"),
            *(event(90003 + i, 9003, f"09:20:0{s}") for i, s in enumerate((0, 0, 1, 2))),
            event(90007, 9004, "09:00:02", captcha=True),
            event(90008, 9005, "09:12:00"),
            event(90009, 9001, "09:00:01", type="report"),
            event(90010, 9006, "09:00:10"),
            *(event(90011 + i, 9007, f"09:30:0{s}") for i, s in enumerate((0, 1, 2, 4))),
            event(90015, 9008, "09:00:05", agent="curl/8.5"),
            event(90016, 9009, "09:40:00", agent="   "),
            event(90017, 9010, "09:40:00", agent="Mozilla/5.0 (compatible; GOOGLEBOT/2.1)"),
            event(90018, 9011, "09:40:00", agent=None, ip=None),
            *(
                event(90020 + i, p, c, campaign=SHARED_CAMPAIGN, ip="192.0.2.77")
                for i, (p, c) in enumerate(
                    ((9001, "10:00:00"), (9002, "10:00:30"), (9003, "10:01:00"), (9004, "10:02:01"))
                )
            ),
            event(90024, 9005, "10:00:10", campaign=9003, ip="192.0.2.77"),
            *(event(90025 + i, 9012, f"09:50:0{i}") for i in range(4)),
        ],
    }
