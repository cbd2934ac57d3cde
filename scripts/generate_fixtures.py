"""Generate a synthetic dataset straight into a new database (see ``--help``).

Counts are totals across all companies, split evenly between them. The API key of each
company is printed at the end; it is derived from the seed (``app.tools.generator.bench_key``).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.data.schema import DatabaseError
from app.tools.generator import GenerateError, Sizes, bench_key, generate


def build_parser() -> argparse.ArgumentParser:
    """The flags; every size is required except the optional campaign overrides."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--db", required=True, help="SQLite file: new, or empty")
    sizes = (
        ("companies", "companies"),
        ("employees", "employees in all"),
        ("campaigns", "campaigns in all"),
        ("events-per-campaign", "events of every campaign but the two below"),
        ("courses", "courses in all"),
        ("inscriptions", "inscriptions in all"),
    )
    for name, text in sizes:
        parser.add_argument(f"--{name}", type=int, required=True, help=text)
    parser.add_argument("--sections", type=int, default=5, help="sections per course")
    parser.add_argument(
        "--big-campaign", type=int, default=0, help="events of campaign 1 (company 1), if > 0"
    )
    parser.add_argument(
        "--mid-campaign", type=int, default=0, help="events of campaign 2 (company 1), if > 0"
    )
    parser.add_argument("--seed", type=int, required=True, help="same seed, same data")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Generate, then print the rows per table, the rate and the companies' keys."""
    args = build_parser().parse_args(argv)
    sizes = Sizes(
        companies=args.companies,
        employees=args.employees,
        campaigns=args.campaigns,
        events_per_campaign=args.events_per_campaign,
        courses=args.courses,
        inscriptions=args.inscriptions,
        sections=args.sections,
        big_campaign=args.big_campaign,
        mid_campaign=args.mid_campaign,
    )
    started = time.perf_counter()
    try:
        counts = generate(args.db, sizes, args.seed, progress=not args.no_progress)
    except (GenerateError, DatabaseError, sqlite3.Error) as exc:
        print(f"generation refused, database unchanged: {exc}", file=sys.stderr)
        return 1
    seconds = time.perf_counter() - started
    total = sum(counts.values())
    print(", ".join(f"{n} {table}" for table, n in counts.items()))
    print(
        f"generated {total} rows into {args.db} in {seconds:.1f} s ({total / seconds:,.0f} rows/s)"
    )
    for company_id in range(1, args.companies + 1):
        print(f"company {company_id} key: {bench_key(company_id, args.seed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
