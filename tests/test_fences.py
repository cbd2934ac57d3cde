"""Every private internal of a library is fenced in a ``*_shim.py`` module (issue 21 item 4).

The rule, checked on the syntax tree of every module under app/: outside the shims, an
access to an underscore attribute (``x._name``, ``getattr(x, "_name")``; dunders are
public) must name something our own code defines: a module-level name of app/, or a
name the class the access is written in (or one of its bases that app/ defines) def's
or assigns. ``self._name`` and ``super()._name`` must be the class's own (or its app
bases'), so a subclass cannot reach into a library base class's private state, and a
name that merely coincides with one of ours elsewhere (``conn._conn``) is still caught.
Importing an underscore name or module from outside app/ counts too. A shim checks at
import that the names it relies on still exist (tests/test_shims.py), and
pyproject.toml caps each such library.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

from .support.servers import ROOT

APP = ROOT / "app"


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@dataclass
class ClassInfo:
    """What one class of ours defines, and the names of its bases."""

    bases: list[str]
    names: set[str] = field(default_factory=set)


@dataclass
class Definitions:
    """The names app/ defines: at module level, and per class (by the class's name)."""

    module_level: set[str] = field(default_factory=set)
    classes: dict[str, list[ClassInfo]] = field(default_factory=lambda: defaultdict(list))

    def defined_by(self, cls: str, name: str, seen: frozenset[str] = frozenset()) -> bool:
        """Whether class ``cls`` (or a base app/ defines) defines ``name``."""
        for info in self.classes.get(cls, []):
            if name in info.names:
                return True
            for base in info.bases:
                if base not in seen and self.defined_by(base, name, seen | {cls}):
                    return True
        return False


def targets(node: ast.AST) -> Iterator[ast.expr]:
    """The expressions a statement assigns to (tuples unpacked)."""
    found: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        found = list(node.targets)
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        found = [node.target]
    while found:
        target = found.pop()
        if isinstance(target, ast.Tuple | ast.List):
            found.extend(target.elts)
        else:
            yield target


def collect(trees: dict[str, ast.Module]) -> Definitions:
    """The names app/ defines at module level, and what each of its classes defines."""
    defs = Definitions()
    for tree in trees.values():
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defs.module_level.add(node.name)
            defs.module_level.update(t.id for t in targets(node) if isinstance(t, ast.Name))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                info = ClassInfo([ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases])
                for inner in ast.walk(node):
                    if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                        info.names.add(inner.name)
                    for target in targets(inner):
                        if isinstance(target, ast.Name):
                            info.names.add(target.id)
                        elif (
                            isinstance(target, ast.Attribute)
                            and isinstance(target.value, ast.Name)
                            and target.value.id in ("self", "cls")
                        ):
                            info.names.add(target.attr)
                defs.classes[node.name].append(info)
    return defs


class Finder(ast.NodeVisitor):
    """Collects one module's accesses to underscore names that app/ does not define."""

    def __init__(self, module: str, defs: Definitions) -> None:
        self.module = module
        self.defs = defs
        self.classes: list[str] = []
        self.found: list[str] = []

    def report(self, node: ast.AST, what: str) -> None:
        self.found.append(f"{self.module}:{getattr(node, 'lineno', 0)}: {what}")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.classes.append(node.name)
        self.generic_visit(node)
        self.classes.pop()

    def check(self, node: ast.AST, receiver: ast.expr, name: str) -> None:
        if not private(name):
            return
        own = isinstance(receiver, ast.Name) and receiver.id in ("self", "cls")
        parent = (
            isinstance(receiver, ast.Call)
            and isinstance(receiver.func, ast.Name)
            and receiver.func.id == "super"
        )
        if (own or parent) and self.classes:
            cls = self.classes[-1]
            ok = any(
                self.defs.defined_by(base, name)
                for info in self.defs.classes[cls]
                for base in (info.bases if parent else [cls])
            )
        else:
            ok = name in self.defs.module_level or any(
                self.defs.defined_by(cls, name) for cls in self.classes
            )
        if not ok:
            self.report(node, f"{ast.unparse(receiver)}.{name}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.check(node, node.value, node.attr)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        accessors = ("getattr", "hasattr", "setattr", "delattr")
        if isinstance(node.func, ast.Name) and node.func.id in accessors and len(node.args) > 1:
            name = node.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                self.check(node, node.args[0], name.value)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        ours = node.level > 0 or (node.module or "").split(".")[0] == "app"
        if not ours:
            parts = (node.module or "").split(".") + [alias.name for alias in node.names]
            for part in filter(private, parts):
                self.report(node, f"from {node.module} import ...{part}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] != "app" and any(map(private, alias.name.split("."))):
                self.report(node, f"import {alias.name}")


def app_sources() -> dict[str, str]:
    """Every module under app/, by its path relative to the repository."""
    return {
        str(path.relative_to(ROOT)): path.read_text(encoding="utf-8")
        for path in sorted(APP.rglob("*.py"))
    }


@functools.cache
def parsed(text: str) -> ast.Module:
    """A module's syntax tree (each test checks all of app/: parsed once)."""
    return ast.parse(text)


def unfenced(sources: dict[str, str]) -> list[str]:
    """The private accesses outside the ``*_shim.py`` modules, as ``path:line: access``."""
    trees = {module: parsed(text) for module, text in sources.items()}
    defs = collect(trees)
    found: list[str] = []
    for module, tree in trees.items():
        if not module.endswith("_shim.py"):
            finder = Finder(module, defs)
            finder.visit(tree)
            found += finder.found
    return found


def test_no_private_attribute_of_a_library_object_outside_the_shims() -> None:
    assert unfenced(app_sources()) == []


def test_the_shims_are_where_the_private_names_are() -> None:
    """Without the exemption the shims are reported: the finder sees what they touch."""
    sources = app_sources()
    renamed = {m.replace("_shim.py", "_fenced.py"): text for m, text in sources.items()}
    found = "\n".join(unfenced(renamed))
    for access in ("conn._execute", "conn._conn", "server._kwargs", "self._waiter"):
        assert access in found, found


VIEW_PEEKING = """
def peek(request):
    return request._match_info, getattr(request, "_state")
"""

SUBCLASS_PEEKING = """
from aiohttp.web_protocol import RequestHandler

class Handler(RequestHandler):
    def __init__(self):
        self._mine = 1

    def waiting(self):
        return self._mine, self._waiter, super()._make_server
"""

PRIVATE_IMPORTS = """
from aiohttp._http_parser import HttpRequestParser
from aiohttp.helpers import _sentinel
import aiohttp._websocket
"""


def test_a_view_reading_a_private_attribute_of_the_request_is_caught() -> None:
    sources = app_sources()
    sources["app/web/views.py"] += VIEW_PEEKING
    found = unfenced(sources)
    assert [f.split(": ", 1)[1] for f in found] == ["request._match_info", "request._state"]
    assert all(f.startswith("app/web/views.py:") for f in found)


def test_a_subclass_reaching_into_its_library_base_is_caught() -> None:
    """``self._mine`` is the class's own; ``_waiter`` and ``_make_server`` are aiohttp's."""
    sources = app_sources()
    sources["app/web/handler.py"] = SUBCLASS_PEEKING
    found = [f.split(": ", 1)[1] for f in unfenced(sources)]
    assert found == ["self._waiter", "super()._make_server"]
    sources["app/web/handler_shim.py"] = sources.pop("app/web/handler.py")
    assert unfenced(sources) == []


def test_private_modules_and_names_of_a_library_are_caught() -> None:
    sources = app_sources()
    sources["app/web/imports.py"] = PRIVATE_IMPORTS
    found = [f.split(": ", 1)[1] for f in unfenced(sources)]
    assert found == [
        "from aiohttp._http_parser import ..._http_parser",
        "from aiohttp.helpers import ..._sentinel",
        "import aiohttp._websocket",
    ]
