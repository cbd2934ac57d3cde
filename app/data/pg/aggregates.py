"""PostgreSQL's SQL for the reports' numbers, printing exactly what SQLite prints.

SQLite's rates and means are REALs; its JSON writes a REAL with up to 15 significant
digits, and ``.0`` when whole (``0.5``, ``1.0``, ``0.0313``, ``45.9``). PostgreSQL
computes the same figures exactly in ``numeric`` (the same integer arithmetic for the
rounding, see :mod:`app.data.aggregates`), and a ``numeric`` prints its own scale: so
each result is given the smallest scale that holds it, and never less than 1. Rates
have 4 decimals at most and means 1, far from the 15 digits where a REAL would print
otherwise.
"""

from __future__ import annotations

from ..aggregates import MEAN_TIE_TENTHS


def real(value: str) -> str:
    """``value`` (numeric) with the fewest decimals that hold it, at least one."""
    return f"round({value}, greatest(1, scale(trim_scale({value}))))"


def rate(count: str, total: str) -> str:
    """``count / total`` rounded half up to 4 decimals; NULL when ``total`` is 0."""
    ten_thousandths = f"((20000 * {count} + {total}) / (2 * {total}))"
    return f"CASE WHEN {total} > 0 THEN {real(f'{ten_thousandths} / 10000.0')} END"


def rounded_mean(total: str, count: str) -> str:
    """``total / count`` rounded half up to 1 decimal; NULL when ``count`` is 0.

    ``total`` is exact here (a numeric sum), but the tie is decided in ``float8`` with
    SQLite's very steps (:func:`app.data.aggregates.rounded_mean`): a mean on the edge of
    the tolerance (a single result 2.0499999999) then lands on SQLite's side, where exact
    numeric arithmetic would round it the other way.
    """
    steps = f"10 * ({total})::float8 / {count} + 0.5 + {MEAN_TIE_TENTHS}::float8"
    tenths = f"floor({steps})::numeric"
    return f"CASE WHEN {count} > 0 THEN {real(f'{tenths} / 10')} END"


def seconds_after(instant: str, start: str) -> str:
    """Whole seconds from ``start`` to ``instant``, 0 when it came first; NULL stays NULL
    (SQLite's :func:`app.data.aggregates.seconds_after`; ``greatest`` ignores a NULL)."""
    seconds = f"extract(epoch FROM m.v::timestamptz - {start}::timestamptz)"
    return (
        f"(SELECT greatest(0, {seconds})::bigint FROM (SELECT {instant} AS v) m"
        " WHERE m.v IS NOT NULL)"
    )
