"""The partner's rollup: each of a partner's companies in one line of figures.

Every figure is computed by the database in the page's one statement, from the same
summaries and fragments as the campaign and course reports (:mod:`app.data.campaigns`,
:mod:`app.data.courses`); PostgreSQL's JSON is built from the same fields
(:mod:`app.data.pg.reports`). The last 12 months are the campaigns launched on or after
:func:`year_before` today's UTC date, which the caller passes, as ``overdue`` is counted
before today.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence

from .aggregates import COUNT_NAMES, Fields, json_pairs, rate
from .campaigns import OWN_PEOPLE
from .listings import Listing, Record, placeholders

# Company ``co``'s campaigns of the last 12 months (launched at or after ``?``): targets,
# and the people who opened, clicked, reported and failed, each summed over the campaigns'
# funnels (the writers' summaries, each campaign's people counted as its report counts them:
# none while its sends are not of its own company's people, OWN_PEOPLE).
# Sums as integers: PostgreSQL's sum of bigints is numeric (and would divide exactly).
_SUMS = ", ".join(
    f"CAST(coalesce(sum(x.{name}), 0) AS BIGINT) AS {name}"
    for name in ("targets", *COUNT_NAMES.values())
)
RECENT = f"""SELECT {_SUMS} FROM campaigns c JOIN campaign_funnels x
    ON x.campaign_id = c.id AND x.filters = 'include'
    WHERE c.company_id = co.id AND c.launch_date >= ? AND {OWN_PEOPLE}"""
# Company ``co``'s inscriptions: how many, completed, and overdue on the date ``?``.
TRAINING = """SELECT count(*) AS inscriptions,
    count(CASE WHEN i.status = 'completed' THEN 1 END) AS completed,
    count(CASE WHEN i.status <> 'completed' AND i.due_date < ? THEN 1 END) AS overdue
    FROM inscriptions i WHERE i.company_id = co.id"""
SOURCE = f"FROM ({RECENT}) y, ({TRAINING}) k"


def company_fields(rate: Callable[[str, str], str]) -> Fields:
    """Company ``co``'s keys in order, over ``y`` (RECENT) and ``k`` (TRAINING)."""
    return [
        ("id", "co.id"),
        ("name", "co.name"),
        ("employees", "(SELECT count(*) FROM employees e WHERE e.company_id = co.id)"),
        ("campaigns", "(SELECT count(*) FROM campaigns c WHERE c.company_id = co.id)"),
        (
            "last_launch_date",
            "(SELECT max(c.launch_date) FROM campaigns c WHERE c.company_id = co.id)",
        ),
        ("sends", "y.targets"),
        ("click_rate", rate("y.clicked", "y.targets")),
        ("fail_rate", rate("y.failed", "y.targets")),
        ("report_rate", rate("y.reported", "y.targets")),
        ("inscriptions", "k.inscriptions"),
        ("completion_rate", rate("k.completed", "k.inscriptions")),
        ("overdue", "k.overdue"),
    ]


# JSON of one company; two ``?``: the first instant of the last 12 months, today's date.
PARTNER_COMPANY = Record(
    "partner_company", f"(SELECT json_object({json_pairs(company_fields(rate))}) {SOURCE})"
)


def year_before(today: dt.date) -> dt.date:
    """The same calendar day a year before (28 February for 29 February)."""
    day = 28 if (today.month, today.day) == (2, 29) else today.day
    return today.replace(year=today.year - 1, day=day)


def partner_companies_listing(partner_id: int, names: Sequence[str], today: dt.date) -> Listing:
    """The partner's companies, by id; ``names`` (case-folded) keeps only those names."""
    where = ["pc.partner_id = ?"]
    params: list[object] = [partner_id]
    if names:
        where.append(f"co.name_key IN ({placeholders(list(names))})")
        params.extend(names)
    rows_from = (
        "FROM partner_companies pc JOIN companies co ON co.id = pc.company_id"
        f" WHERE {' AND '.join(where)}"
    )
    since = f"{year_before(today).isoformat()}T00:00:00Z"
    record_params = (since, today.isoformat())
    return Listing(
        PARTNER_COMPANY, rows_from, rows_from, "co.id", tuple(params), None, record_params, True
    )
