"""The import rules of the layout (README, "Project layout"), read from the source with ast.

Three wings, one rule each (issue 10): app/data (storage) never imports aiohttp, app.web
or app.tools; app/web never imports app.tools; app/config.py imports nothing from app;
nothing imports app.__main__. The test modules share code only through tests/support/:
no test module imports another test module or conftest.py, and only tests marked
``system`` may start processes.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from .support.servers import ROOT, run_python

TESTS = ROOT / "tests"
APP = ROOT / "app"


def module_name(path: Path) -> str:
    """The dotted name of a source file under the repository root."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """Every module a file imports, absolute, with its line: ``from . import x`` included."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            stem = ".".join([*base, *([node.module] if node.module else [])])
            yield node.lineno, stem
            # ``from . import x`` and ``from .pkg import mod`` may name modules too.
            yield from ((node.lineno, f"{stem}.{alias.name}") for alias in node.names)


def within(name: str, *packages: str) -> bool:
    """True when ``name`` is one of the packages or inside one."""
    return any(name == p or name.startswith(f"{p}.") for p in packages)


def broken(paths: list[Path], *forbidden: str) -> list[str]:
    """``file:line imports name`` for each import of a forbidden module."""
    return [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in paths
        for line, name in imported_modules(path)
        if within(name, *forbidden)
    ]


def sources(folder: Path) -> list[Path]:
    """The Python files of a folder, recursively."""
    return sorted(folder.rglob("*.py"))


def test_the_data_wing_imports_neither_aiohttp_nor_web_nor_tools() -> None:
    assert sources(APP / "data")
    assert broken(sources(APP / "data"), "aiohttp", "app.web", "app.tools") == []


def test_the_web_wing_never_imports_the_tools() -> None:
    assert sources(APP / "web")
    assert broken(sources(APP / "web"), "app.tools") == []


def test_config_imports_nothing_from_app() -> None:
    assert broken([APP / "config.py"], "app") == []


def test_nothing_imports_the_entry_point() -> None:
    everything = [*sources(APP), *sources(TESTS), *sources(ROOT / "scripts")]
    assert broken(everything, "app.__main__") == []


def sql_literals(path: Path) -> Iterator[str]:
    """Every string constant of a module, upper-cased and stripped, and every method
    called on something (``conn.commit()`` shows up as ``.COMMIT()``)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value.strip().upper()
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            yield f".{node.func.attr.upper()}()"


# A statement that starts with one of these words (END_MAP, an ijson event, is no statement).
TRANSACTION_WORD = re.compile(r"(BEGIN|COMMIT|ROLLBACK|END)\b(?!_)|\.(COMMIT|ROLLBACK)\(\)")


def test_every_writer_goes_through_write_transaction() -> None:
    """Only app/data/schema.py (write_transaction, and scratch_transaction for the temporary
    database) opens, commits or rolls back a transaction."""
    schema = APP / "data" / "schema.py"
    assert "BEGIN IMMEDIATE" in set(sql_literals(schema))
    opened = [
        f"{path.relative_to(ROOT)}: {text}"
        for path in sources(APP)
        if path != schema
        for text in sql_literals(path)
        if text.startswith(("BEGIN IMMEDIATE", "BEGIN EXCLUSIVE"))
        or (path.parent.name == "tools" and TRANSACTION_WORD.match(text))
    ]
    assert opened == []


def test_no_test_module_imports_another_or_conftest() -> None:
    modules = sorted(TESTS.rglob("*.py"))
    test_modules = {module_name(p) for p in modules if p.name.startswith("test_")}
    assert test_modules, "no test module found"
    assert broken(modules, "tests.conftest", *test_modules) == []


def test_the_import_walk_resolves_relative_imports() -> None:
    """The rule test itself: relative imports are seen under their absolute names."""
    events = {name for _, name in imported_modules(TESTS / "support" / "events.py")}
    assert "tests.support.factories" in events
    web = {name for _, name in imported_modules(APP / "web" / "auth.py")}
    assert {"aiohttp", "app.data.api_keys", "app.keys"} <= web
    assert within("tests.support.factories.API", "tests.support.factories")
    assert not within("tests.supportive", "tests.support")
    assert not within("aiohttp_apigami", "aiohttp")


def test_a_test_that_starts_a_process_must_be_marked_system() -> None:
    with pytest.raises(AssertionError, match="system"):
        run_python("-c", "pass")


@pytest.mark.system
def test_a_system_test_may_start_a_process() -> None:
    assert run_python("-c", "print('ok')").stdout == "ok\n"
