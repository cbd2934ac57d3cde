"""Manage API keys: ``manage_keys.py --db PATH {create,list,revoke,rotate} ...``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.tools.keytool import main

if __name__ == "__main__":
    sys.exit(main())
