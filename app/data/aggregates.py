"""SQL for the numbers of the reports (contract.md 11, 12): rates, means, medians.

Each helper returns an SQL expression over column expressions it is given, so that
SQLite computes every figure of a page in the page's one statement.
"""

from __future__ import annotations

from .vocabulary import EVENT_TYPES

# A record's keys in order, each with its SQL expression: each backend builds its JSON
# object from them (SQLite json_object, PostgreSQL row_to_json).
Fields = list[tuple[str, str]]

# The name of each event type's count in the reports: people (or campaigns) who did it.
COUNT_NAMES = dict(zip(EVENT_TYPES, ("opened", "clicked", "reported", "failed"), strict=True))


def rate(count: str, total: str) -> str:
    """``count / total`` rounded half up to 4 decimals; NULL when ``total`` is 0.

    Integer arithmetic rounds the exact ratio (floating point would round 1/800 the
    wrong way); only the final division by 10000 makes it a number with decimals.
    """
    return f"CASE WHEN {total} > 0 THEN ((20000 * {count} + {total}) / (2 * {total})) / 10000.0 END"


# How far below a tie (in tenths: 10 times the mean's 1e-9) a mean still rounds up.
MEAN_TIE_TENTHS = "1e-8"


def rounded_mean(total: str, count: str) -> str:
    """``total / count`` rounded half up to 1 decimal; NULL when ``count`` is 0.

    ``total`` is a sum of reals: a tie such as 70.25 may come out of the sum a hair
    below itself, so a mean within 1e-9 below a tie counts as the tie (far below any
    difference real results can make): 1e-8 in tenths, as docs/interface.md says. (It
    was 1e-9 in tenths, 1e-10 of the mean, where a single result such as 2.0499999999
    sits on the edge: SQLite's float said 2.0, PostgreSQL's exact numeric 2.1.)
    PostgreSQL's :func:`app.data.pg.aggregates.rounded_mean` does these float steps too.
    """
    tenths = f"CAST(10.0 * {total} / {count} + 0.5 + {MEAN_TIE_TENTHS} AS INTEGER)"
    return f"CASE WHEN {count} > 0 THEN {tenths} / 10.0 END"


def seconds_after(instant: str, start: str) -> str:
    """Whole seconds from ``start`` to ``instant``, 0 when it came first; NULL stays NULL."""
    return f"CAST(max(0, strftime('%s', {instant}) - strftime('%s', {start})) AS INTEGER)"


def lower_median(values: str, count: str) -> str:
    """The lower middle of the ``v`` column of ``values``, which has ``count`` rows.

    With n values that is the ((n + 1) / 2)-th smallest; NULL when there are none.
    """
    return (
        "(SELECT v FROM (SELECT v, row_number() OVER (ORDER BY v) AS rank"
        f" FROM ({values})) WHERE rank = ({count} + 1) / 2)"
    )


def json_pairs(fields: Fields) -> str:
    """The arguments of SQLite's ``json_object`` for ``fields``."""
    return ", ".join(f"'{name}', {sql}" for name, sql in fields)
