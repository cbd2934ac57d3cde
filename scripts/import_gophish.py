"""Import GoPhish campaigns: ``import_gophish.py export.json --company 1 --db PATH``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.tools.gophish import main

if __name__ == "__main__":
    sys.exit(main())
