"""Named seams (issue 21 item 3): each thing is written once, where it belongs.

A listing names its record and each store finds its JSON by that name (PostgreSQL's in
app/data/pg/records.py: tests/test_pg_identity.py checks every record has one), so one
name stands for one record. The data token is read by one statement both stores share; the
interface's enumerations live in app/data/vocabulary.py, not in the schema; no module
of app/ is about the benchmark (its floors and its fixture export live in scripts/).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from collections import defaultdict
from pathlib import Path

import app.data
from app.data.listings import Record

from .support.servers import ROOT

APP = ROOT / "app"
VOCABULARY = ("EVENT_TYPES", "SECTION_TYPES", "INSCRIPTION_STATUSES", "SECTION_STATUSES")


def sources() -> list[Path]:
    return sorted(APP.rglob("*.py"))


def test_the_data_token_statement_is_written_once() -> None:
    found = [
        str(path.relative_to(APP))
        for path in sources()
        for _ in re.finditer(r"key = 'data_token'", path.read_text(encoding="utf-8"))
    ]
    assert found == ["data/schema.py"]


def test_the_vocabulary_is_defined_in_its_own_module_alone() -> None:
    defined = [
        f"{path.relative_to(APP)}:{target.id}"
        for path in sources()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and target.id in VOCABULARY
    ]
    assert sorted(defined) == sorted(f"data/vocabulary.py:{name}" for name in VOCABULARY)


def test_no_module_of_app_is_about_the_benchmark() -> None:
    mentions = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sources()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "bench" in line.lower()
    ]
    assert mentions == []


def test_one_name_stands_for_one_record() -> None:
    """Two records of one name would share PostgreSQL's JSON: each name has one JSON."""
    jsons: dict[str, set[str]] = defaultdict(set)
    for info in pkgutil.iter_modules(app.data.__path__):
        for value in vars(importlib.import_module(f"app.data.{info.name}")).values():
            found = value.values() if isinstance(value, dict) else [value]
            for record in (r for r in found if isinstance(r, Record)):
                jsons[record.name].add(record.json)
    assert {"campaign_event", "employee_event", "feed_event", "inscription"} <= set(jsons)
    assert {"employee", "course", "campaign", "campaign_report_without_captcha"} <= set(jsons)
    assert {name: len(texts) for name, texts in jsons.items() if len(texts) > 1} == {}
