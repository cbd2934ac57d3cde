"""The import rules of the layout (README, "Project layout"), read from the source with ast.

The test modules share code only through tests/support/: no test module imports another
test module or conftest.py, and only tests marked ``system`` may start processes.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from .support.servers import ROOT, run_python

TESTS = ROOT / "tests"


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


def test_no_test_module_imports_another_or_conftest() -> None:
    modules = sorted(TESTS.rglob("*.py"))
    test_modules = {module_name(p) for p in modules if p.name.startswith("test_")}
    assert test_modules, "no test module found"
    assert broken(modules, "tests.conftest", *test_modules) == []


def test_the_import_walk_sees_relative_imports() -> None:
    """The rule test itself: a relative import of a test module is caught."""
    probe = TESTS / "support" / "events.py"
    names = {name for _, name in imported_modules(probe)}
    assert "tests.support.factories" in names
    assert within("tests.support.factories.API", "tests.support.factories")
    assert not within("tests.supportive", "tests.support")


def test_a_test_that_starts_a_process_must_be_marked_system() -> None:
    with pytest.raises(AssertionError, match="system"):
        run_python("-c", "pass")


@pytest.mark.system
def test_a_system_test_may_start_a_process() -> None:
    assert run_python("-c", "print('ok')").stdout == "ok\n"
