"""PostgreSQL's JSON for the reports (contract.md 11, 12): campaigns, employees, courses.

The figures' SQL is SQLite's own (the same fragments from :mod:`app.data.campaigns`,
:mod:`app.data.employees` and :mod:`app.data.courses`), so both stores count the same
rows; only how numbers are rounded and printed (:mod:`.aggregates`) and how objects
and arrays are written (:mod:`.objects`) differ. Every figure is computed by PostgreSQL
in the page's one statement, as on SQLite.
"""

from __future__ import annotations

from .. import campaigns, courses, employees, partners, stats
from ..summaries import filter_key
from ..vocabulary import AUTOMATION_FILTERS
from .aggregates import rate, rounded_mean, seconds_after
from .objects import GROUPS, array, json_object, json_select


def _departments(key: str) -> str:
    """Campaign ``c``'s ``by_department`` array, by department name."""
    fields = [("department", "f.department"), *campaigns.counts_and_rates("f", rate)]
    return array(fields, campaigns.funnel_rows(key), "f.department")


def campaign_json(without_captcha: bool, automation: str, by_department: bool) -> str:
    """The JSON of campaign ``c`` (SQLite's :func:`app.data.campaigns.campaign_json`),
    the figures read once into ``s`` as there."""
    key = filter_key(without_captcha, automation)
    fields = [
        ("id", "c.id"),
        ("title", "c.title"),
        ("launch_date", "c.launch_date"),
        *campaigns.counts_and_rates("s", rate),
        *campaigns.medians(key, seconds_after),
        *campaigns.verdict_counts("s"),
        *([("by_department", _departments(key))] if by_department else []),
    ]
    figures = campaigns.figures(key)
    return f"(WITH s AS MATERIALIZED ({figures}) {json_select(fields, 'FROM s')})"


# Every variant of the campaign's JSON, by its record's name.
CAMPAIGNS = {campaigns.record_name(*v): campaign_json(*v) for v in campaigns.VARIANTS}

EMPLOYEES = {
    employees.record_name(automation): json_object(
        [
            *((column, f"e.{column}") for column in employees.PERSON_COLUMNS),
            ("groups", GROUPS),
            ("phishing", json_object(employees.PHISHING, employees.phishing_from(automation))),
            ("training", json_object(employees.TRAINING, employees.TRAINING_FROM)),
        ]
    )
    for automation in AUTOMATION_FILTERS
}

COURSE = json_object(
    courses.course_fields(rate, rounded_mean),
    f"FROM ({courses.COVERAGE}) k, ({courses.RESULTS}) res",
)

PARTNER_COMPANY = json_object(partners.company_fields(rate), partners.SOURCE)

# The stats' rows (app/data/stats.py), by record name: the grid's SQL is shared.
STATS = {
    record.name: json_object(
        stats.phishing_fields(rate, group)
        if endpoint == "phishing"
        else stats.training_fields(rate, rounded_mean, group)
    )
    for (endpoint, group), record in stats.RECORDS.items()
}
