"""Campaign events and employee events (reporting-api.md 2.1, 2.2, 4.1, 4.2)."""

from __future__ import annotations

from collections.abc import Sequence

from .automation import and_kept, kept_events
from .csv_lines import SQLITE, Dialect
from .listings import Listing, Record, owned

# JSON of one record, keys in the order of reporting-api.md 2.1 and 2.2.
CAMPAIGN_EVENT = Record(
    "campaign_event",
    """json_object(
    'id', ev.id, 'type', ev.type, 'timestamp', ev.timestamp,
    'victim', json_object('id', e.id, 'first_name', e.first_name,
        'last_name', e.last_name, 'email', e.email, 'department', e.department))""",
)

EMPLOYEE_EVENT = Record(
    "employee_event",
    """json_object(
    'id', ev.id, 'type', ev.type, 'timestamp', ev.timestamp,
    'campaign', json_object('id', c.id, 'title', c.title, 'launch_date', c.launch_date))""",
)

# An event of either listing as an exported row: its campaign and its employee both, so
# that exports of several campaigns or employees can be merged and told apart. The
# exports read from EXPORT_JOINS: both rows joined once, not looked up again per event.
EVENT_ROW = Record(
    "event_row",
    """json_object(
    'id', ev.id, 'type', ev.type, 'timestamp', ev.timestamp,
    'campaign', json_object('id', c.id, 'title', c.title, 'launch_date', c.launch_date),
    'victim', json_object('id', e.id, 'first_name', e.first_name,
        'last_name', e.last_name, 'email', e.email, 'department', e.department))""",
)
EXPORT_JOINS = (
    "FROM campaign_events ev JOIN campaigns c ON c.id = ev.campaign_id"
    " JOIN employees e ON e.id = ev.employee_id"
)


def event_line(sql: Dialect) -> str:
    """EVENT_ROW's CSV row, in the CSV layout's column order: the event's own cells (which
    need no quoting), then the cells its campaign and its employee keep (:mod:`.csv_lines`)."""
    return sql.row(["ev.id", "ev.type", "ev.timestamp", "c.csv_cells", "e.csv_cells"])


EVENT_LINE = Record("event_line", event_line(SQLITE))


def campaign_listing(
    company_id: int,
    campaign_id: int,
    types: Sequence[str] = (),
    without_captcha: bool = False,
    automation: str = "include",
) -> Listing:
    """A campaign's events, filtered, by timestamp then id; 404 unless the company's."""
    # The company check on the employee is redundant with the loader's checks; it is
    # there so that no join can ever reach another tenant's row.
    where = ["ev.campaign_id = ?", "e.company_id = ?"]
    params: list[object] = [campaign_id, company_id]
    if types:
        where.append(f"ev.type IN ({', '.join(['?'] * len(types))})")
        params.extend(types)
    if without_captcha:
        where.append("ev.with_captcha = 0")
    if kept_events(automation):
        where.append(kept_events(automation))
    # The records read each employee's fields from an index of them alone, a quarter of
    # the rows' size: on the large set the rows of a campaign's 100,000 people no longer
    # fit a connection's page cache. The exports read the employee's row (its CSV cells).
    conditions = " AND ".join(where)
    rows_from = (
        "FROM campaign_events ev JOIN employees e INDEXED BY employees_victims"
        f" ON e.id = ev.employee_id WHERE {conditions}"
    )
    export_from = f"{EXPORT_JOINS} WHERE {conditions}"
    guard = owned("campaigns", campaign_id, company_id)
    order = "ev.timestamp, ev.id"
    return Listing(
        CAMPAIGN_EVENT,
        rows_from,
        export_from,
        order,
        tuple(params),
        guard,
        # The events are walked in the campaign's index by time; a filter may pass over
        # most of them (a campaign's few reports) to find a page: never on the event loop.
        heavy=bool(types or without_captcha or kept_events(automation)),
        export=EVENT_ROW,
        lines=EVENT_LINE,
        export_from=export_from,
    )


def employee_listing(company_id: int, employee_id: int, automation: str = "include") -> Listing:
    """An employee's events with their campaigns, by timestamp then id; 404 unless theirs."""
    where = f"WHERE ev.employee_id = ? AND c.company_id = ?{and_kept(automation)}"
    rows_from = f"FROM campaign_events ev JOIN campaigns c ON c.id = ev.campaign_id {where}"
    params = (employee_id, company_id)
    guard = owned("employees", employee_id, company_id)
    order = "ev.timestamp, ev.id"
    return Listing(
        EMPLOYEE_EVENT,
        rows_from,
        rows_from,
        order,
        params,
        guard,
        export=EVENT_ROW,
        lines=EVENT_LINE,
        export_from=f"{EXPORT_JOINS} {where}",
    )
