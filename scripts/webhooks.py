"""Webhook subscriptions and their sender (installed as reporting-webhooks)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # a clone needs no install
from app.tools.start import run  # stops held while the tool is imported

if __name__ == "__main__":
    sys.exit(run("webhooks"))
