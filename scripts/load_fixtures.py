"""Load fixture files into a database, all or nothing: ``load_fixtures.py FILE... --db PATH``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.data.schema import DatabaseError
from app.tools.loader import LoadError, load_files


def main(argv: list[str] | None = None) -> int:
    """Validate and load; print each problem (file, record path, cause) on failure."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("files", nargs="+", type=Path, help="fixture JSON files")
    parser.add_argument("--db", required=True, help="SQLite database file (created if missing)")
    args = parser.parse_args(argv)
    try:
        counts = load_files(args.db, args.files)
    except (LoadError, DatabaseError) as exc:
        print("load refused, database unchanged:", file=sys.stderr)
        for line in getattr(exc, "problems", [str(exc)]):
            print(f"  {line}", file=sys.stderr)
        return 1
    summary = ", ".join(f"{n} {table}" for table, n in counts.items() if n)
    print(f"loaded into {args.db}: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
