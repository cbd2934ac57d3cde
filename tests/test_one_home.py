"""One home for each step of an answer (contract.md 7: one ETag per answer), read from the
source with ast.

The ETag is made in one place, the data version moves in one function, the responders
never ask which kind of paging they were given (each view calls the responder for its
kind), no listing finds its record schema in app state filled by the docs set-up, and
every PostgreSQL connection is made where the session settings are asked for.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from .support.servers import ROOT

APP = ROOT / "app"


def trees() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(APP.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def called(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def test_the_etag_is_made_in_one_place() -> None:
    sites = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path, tree in trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and called(node) == "make_etag"
    ]
    assert len(sites) == 1, sites


def test_the_data_version_moves_in_refresh_version_alone() -> None:
    """Only refresh_version reads DATA_VERSION from the app (main.py stores it there)."""
    readers = [
        f"{path.relative_to(ROOT)}:{function.name}"
        for path, tree in trees()
        if path.name not in ("keys.py", "main.py")
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(function)
        if isinstance(node, ast.Name) and node.id == "DATA_VERSION"
    ]
    assert readers == ["app/web/responder.py:refresh_version"]


def test_no_responder_dispatches_on_the_kind_of_paging() -> None:
    responder = ast.parse((APP / "web" / "responder.py").read_text(encoding="utf-8"))
    checks = [
        ast.unparse(node)
        for node in ast.walk(responder)
        if isinstance(node, ast.Call) and called(node) == "isinstance"
    ]
    assert checks == []


def test_no_record_schemas_in_app_state() -> None:
    assert [p for p in APP.rglob("*.py") if "RECORD_SCHEMAS" in p.read_text(encoding="utf-8")] == []


def test_every_postgresql_connection_asks_for_the_session_settings() -> None:
    """A connection made elsewhere would take the database's defaults (app.data.pg.session)."""
    sites = sorted(
        f"{path.relative_to(ROOT)}:{called(node)}"
        for path, tree in trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and called(node) in ("connect", "create_pool")
        and isinstance(node.func, ast.Attribute)
        and getattr(node.func.value, "id", "") == "asyncpg"
    )
    assert sites == ["app/data/pg/session.py:connect", "app/data/pg/store.py:create_pool"]
