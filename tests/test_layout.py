"""The import rules of the layout (docs/development.md, "Project layout"), read with ast.

Three wings, one rule each (issue 10): app/data (storage) never imports aiohttp, app.web
or app.tools; app/web never imports app.tools; app/config.py imports nothing from app;
nothing imports app.__main__. The test modules share code only through tests/support/:
no test module imports another test module or conftest.py, and only tests marked
``system`` may start processes.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

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


def serving_distributions() -> set[str]:
    """What ``pip install .`` brings (issue 21 item 7): the project's requirements without
    its extras, and theirs, recursively (with the extras each names, ``redis[hiredis]``)."""
    found: set[str] = set()
    todo = [("reporting-api", frozenset[str]())]
    while todo:
        name, extras = todo.pop()
        if canonicalize_name(name) in found:
            continue
        found.add(canonicalize_name(name))
        for text in metadata.requires(name) or []:
            need = Requirement(text)
            wanted = need.marker is None or any(
                need.marker.evaluate({"extra": extra}) for extra in {"", *extras}
            )
            if wanted:
                todo.append((need.name, frozenset(need.extras)))
    return found


def beyond_the_serving_install(imports: list[tuple[str, str]], local: set[str]) -> list[str]:
    """The ``(where, name)`` imports that ``pip install .`` does not provide: anything but
    the standard library, ``local`` top-level names and the serving install's distributions
    (tests/, pytest, hypothesis and every test extra among them)."""
    serving = serving_distributions()
    owners = metadata.packages_distributions()
    allowed = {*sys.stdlib_module_names, *local}
    return [
        f"{where} imports {name}"
        for where, name in imports
        if (top := name.split(".")[0]) not in allowed
        and not any(canonicalize_name(d) in serving for d in owners.get(top, []))
    ]


def test_app_and_scripts_need_only_the_serving_install() -> None:
    """``make run`` installs the package alone; the server, the tools and the benchmark
    (``make bench``, ``make bench-smoke``) run on that (issue 21 item 7)."""
    scripts = sources(ROOT / "scripts")
    imports = [
        (f"{path.relative_to(ROOT)}:{line}", name)
        for path in [*sources(APP), *scripts]
        for line, name in imported_modules(path)
    ]
    local = {"app", *(path.stem for path in scripts)}
    assert beyond_the_serving_install(imports, local) == []


def test_the_serving_install_rule_catches_test_imports() -> None:
    """The rule test itself: the test extras are outside the serving install."""
    assert {"aiohttp", "asyncpg", "hiredis"} <= serving_distributions()
    assert not {"pytest", "hypothesis", "schemathesis", "jsonschema"} & serving_distributions()
    imports = [("a", "pytest"), ("b", "tests.support.stores"), ("c", "hypothesis.strategies")]
    imports += [("d", "aiohttp.web"), ("e", "json"), ("f", "app.data"), ("g", "benchlib")]
    assert beyond_the_serving_install(imports, {"app", "benchlib"}) == [
        "a imports pytest",
        "b imports tests.support.stores",
        "c imports hypothesis.strategies",
    ]


def tool_imports() -> dict[str, list[tuple[int, str, ast.ImportFrom | ast.Import]]]:
    """Each module of app/tools and the app modules it imports (anywhere in it), with the
    import statement."""
    graph: dict[str, list[tuple[int, str, ast.ImportFrom | ast.Import]]] = {}
    for path in sources(APP / "tools"):
        nodes = {
            node.lineno: node
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Import | ast.ImportFrom)
        }
        found = [(n, name, nodes[n]) for n, name in imported_modules(path) if within(name, "app")]
        graph[module_name(path)] = found
    return graph


def import_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of a graph of modules (``a -> b -> a``), or [] when there is none."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str]:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return []
        for target in sorted(graph.get(node, ())):
            if cycle := visit(target, [*path, node]):
                return cycle
        done.add(node)
        return []

    for start in sorted(graph):
        if cycle := visit(start, []):
            return cycle
    return []


def test_no_import_circle_in_the_tools() -> None:
    """The loaders share the stage through app/tools/staging.py (issue 21 item 3): no
    module of app/tools imports one that imports it back, even inside a function."""
    graph = tool_imports()
    assert "app.tools.pg_loader" in graph
    edges = {m: {name for _, name, _ in names if name in graph} for m, names in graph.items()}
    assert import_cycle(edges) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The rule test itself."""
    assert import_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert import_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_no_tool_imports_a_private_name_of_another_module() -> None:
    """What one tool module keeps private (``_name``) no other takes (issue 21 item 3)."""
    taken = [
        f"{module}:{line} takes {alias.name} from {node.module}"
        for module, names in tool_imports().items()
        for line, _, node in names
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name.startswith("_")
    ]
    assert sorted(set(taken)) == []


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
    """Only app/data/schema.py (write_transaction, scratch_transaction for the temporary
    database, read_snapshot for a tool's reads) opens, commits or rolls back a transaction."""
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
