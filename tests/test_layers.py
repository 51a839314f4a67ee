"""The layers of the package, read from its AST: each module imports only
its own layer or a lower one (function-local imports included), only the
front ends import click, the code that runs inside a hill's interpreter and
the warm client import no hills module, no module reads another module's
private name, and no imports run in a cycle.

The lists of exceptions below are empty and stay so: a new violation fails
its test (an exception listed for a while fails its test once it is gone:
take it off the list)."""

import ast
import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGE = REPO_ROOT / "hills"

# Bottom to top. A module of layer N imports modules of layers 0..N only.
LAYERS = ("base", "inside", "evidence", "disk", "run", "checks", "freeze", "views", "many", "front")
# The code that runs inside a hill's interpreter keeps its top-level name:
# the sdk folder copies sdk, spaces and shim flat (hill authors write
# `from hills import sdk`), audithook and scoringhook become a sitecustomize
# there, and testrunner runs by path.
INSIDE = {"hills.sdk", "hills.spaces", "hills.shim", "hills.audithook", "hills.scoringhook", "hills.testrunner"}
# The front ends: the console entry, the build tool of the man pages, and
# the folders cli/, commands/, warm/ (or warm.py), service/ and adapters/.
FRONT_TOP = {"hills.__main__", "hills.entry", "hills.manpages", "hills.warm", "hills.api"}
FRONT_PACKAGES = ("hills.cli", "hills.commands", "hills.warm", "hills.service", "hills.adapters")

# Imports that point up a layer, as "importer -> imported".
EXPECTED_UPWARD: set[str] = set()
# Modules outside the front ends that import click, as "module -> click".
EXPECTED_CLICK: set[str] = set()
# Reads of another module's private name, as "reader -> module._name".
EXPECTED_PRIVATE: set[str] = set()
# Import cycles (run-time imports, function-local ones included), each as
# the sorted modules of one strongly connected component.
EXPECTED_CYCLES: set[tuple[str, ...]] = set()


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = path.relative_to(REPO_ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


# Many evals, kept at the top for its `python -m hills.cluster stop`, which
# hills-eval(1) names.
MANY_TOP = {"hills.cluster"}


def layer_of(module: str) -> str | None:
    if module == "hills":
        return "base"  # the package itself: its version
    if module in MANY_TOP:
        return "many"
    if module in INSIDE:
        return "inside"
    if module in FRONT_TOP or module.startswith(tuple(package + "." for package in FRONT_PACKAGES)) \
            or module in FRONT_PACKAGES:
        return "front"
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in LAYERS[:-1] and parts[1] != "inside":
        return parts[1]
    return None


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes under `if TYPE_CHECKING:`, which only the
    type checker reads."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.body:
                for inner in ast.walk(child):
                    if isinstance(inner, (ast.Import, ast.ImportFrom)):
                        found.add(id(inner))
    return found


def _main_block(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in ("__name__ == '__main__'", '__name__ == "__main__"')


class Imports:
    """One module's imports of hills modules (and of click), every scope."""

    def __init__(self, module: str, path: Path) -> None:
        self.module = module
        self.tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        typing_only = _type_checking_only(self.tree)
        self.hills: list[tuple[str, bool, bool]] = []  # (module, at run time, at module level)
        self.click = False
        self.bound: dict[str, str] = {}  # a local name -> the hills module it names
        # module level: what importing the module runs (not its `__main__` block)
        top_level = {id(node) for node in self.tree.body} | {
            id(inner) for node in self.tree.body if isinstance(node, (ast.If, ast.Try)) and not _main_block(node)
            for inner in ast.walk(node)}
        self.private: set[str] = set()  # "module._name" read through `from module import _name`
        for node in ast.walk(self.tree):
            runtime = id(node) not in typing_only
            at_top = id(node) in top_level
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "click" or alias.name.startswith("click."):
                        self.click = True
                    if alias.name == "hills" or alias.name.startswith("hills."):
                        self.hills.append((self._known(alias.name), runtime, at_top))
                        if alias.asname:
                            self.bound[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target == "click" or target.startswith("click."):
                    self.click = True
                if not (target == "hills" or target.startswith("hills.")):
                    continue
                for alias in node.names:
                    full = f"{target}.{alias.name}"
                    if alias.name.startswith("_") and not alias.name.startswith("__") and target != module:
                        self.private.add(full)
                    if full in MODULES:
                        self.hills.append((full, runtime, at_top))
                        self.bound[alias.asname or alias.name] = full
                    else:
                        self.hills.append((self._known(target), runtime, at_top))

    @staticmethod
    def _known(name: str) -> str:
        while name not in MODULES and "." in name:
            name = name.rsplit(".", 1)[0]
        return name


IMPORTS = {module: Imports(module, path) for module, path in MODULES.items()}


def _imported(module: str, runtime_only: bool = False) -> set[str]:
    return {name for name, runtime, _ in IMPORTS[module].hills
            if name != module and (runtime or not runtime_only)}


def _compare(kind: str, actual: set, expected: set) -> None:
    new, gone = sorted(actual - expected), sorted(expected - actual)
    message = []
    if new:
        message.append(f"new {kind} (fix them):\n  " + "\n  ".join(map(str, new)))
    if gone:
        message.append(f"{kind} no longer there (take them off the list in tests/test_layers.py):\n  "
                       + "\n  ".join(map(str, gone)))
    assert not message, "\n".join(message)


def test_every_module_has_a_layer():
    assert len(MODULES) > 50, sorted(MODULES)  # the walk found the package
    unplaced = sorted(module for module in MODULES if layer_of(module) is None)
    assert not unplaced, f"modules in no layer folder (move them, or name them in tests/test_layers.py): {unplaced}"


def test_each_layer_imports_only_its_own_or_lower():
    found = set()
    for module in MODULES:
        mine = layer_of(module)
        for other in _imported(module):
            theirs = layer_of(other)
            if mine is None or theirs is None or other == "hills":
                continue
            if LAYERS.index(theirs) > LAYERS.index(mine):
                found.add(f"{module} -> {other}")
    assert any(layer_of(m) == "front" for m in MODULES) and any(layer_of(m) == "base" for m in MODULES)
    _compare("upward imports", found, EXPECTED_UPWARD)


def test_only_the_front_ends_import_click():
    found = {f"{module} -> click" for module, imports in IMPORTS.items()
             if imports.click and layer_of(module) != "front"}
    assert any(imports.click for imports in IMPORTS.values())  # the reading sees click where it is
    _compare("imports of click outside the front ends", found, EXPECTED_CLICK)


def test_code_inside_a_hills_interpreter_imports_no_hills_module():
    # There the sdk folder holds sdk, spaces and shim alone: any other
    # import of hills would fail, or load a copy the hill could have placed.
    assert INSIDE <= set(MODULES), sorted(INSIDE - set(MODULES))
    found = {f"{module} -> {other}" for module in INSIDE for other in _imported(module)}
    assert not found, sorted(found)


def test_the_warm_client_imports_no_hills_module():
    """`hills eval` runs the warm client before any pipeline module loads:
    it imports nothing of hills (in a warm/ package, the client module and
    what it imports of it import no other hills module)."""
    if "hills.warm.client" in MODULES:
        checked, seen = ["hills.warm.client"], set()
        while checked:
            module = checked.pop()
            if module in seen:
                continue
            seen.add(module)
            for other in _imported(module, runtime_only=True):
                assert other.startswith("hills.warm.") and other != "hills.warm.server", \
                    f"the warm client's {module} imports {other}"
                checked.append(other)
    else:
        assert "hills.warm" in MODULES
        at_top = {name for name, runtime, top in IMPORTS["hills.warm"].hills if runtime and top}
        assert not at_top, f"hills.warm imports {sorted(at_top)} at module level, which the client loads"
    entry_top = {name for name, runtime, top in IMPORTS["hills.entry"].hills if runtime and top}
    assert not entry_top, f"hills.entry imports {sorted(entry_top)} at module level, before the warm client"


def test_no_module_reads_another_modules_private_names():
    found = set()
    for module, imports in IMPORTS.items():
        found.update(f"{module} -> {name}" for name in imports.private)
        for node in ast.walk(imports.tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                value = node.value
                if isinstance(value, ast.Name) and value.id in imports.bound and imports.bound[value.id] != module:
                    found.add(f"{module} -> {imports.bound[value.id]}.{node.attr}")
    _compare("reads of private names", found, EXPECTED_PRIVATE)


def _cycles() -> set[tuple[str, ...]]:
    """Tarjan's strongly connected components of the run-time import graph."""
    graph = {module: sorted(other for other in _imported(module, runtime_only=True)
                            if other in MODULES and other != "hills" and not other.endswith("__init__"))
             for module in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.add(tuple(sorted(component)))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycles():
    _compare("import cycles", _cycles(), EXPECTED_CYCLES)


def _folders_read(monkeypatch, call):
    """The folders `call` lists, through os.scandir or os.listdir (os.walk
    uses the first)."""
    seen = set()
    scandir, listdir = os.scandir, os.listdir

    def counting_scandir(path="."):
        seen.add(os.path.realpath(os.fspath(path)))
        return scandir(path)

    def counting_listdir(path="."):
        seen.add(os.path.realpath(os.fspath(path)))
        return listdir(path)

    monkeypatch.setattr(os, "scandir", counting_scandir)
    monkeypatch.setattr(os, "listdir", counting_listdir)
    call()
    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "listdir", listdir)
    return seen


def _package_folders():
    return {os.path.realpath(path.parent) for path in PACKAGE.rglob("__init__.py") if "__pycache__" not in path.parts}


@pytest.mark.parametrize("what", ["warm key", "tool hash"])
def test_the_package_identity_covers_every_folder(what, monkeypatch, tmp_path):
    """The warm server's key and the report's tool hash read every folder
    of the package: an edit in any layer starts a new server and changes
    `tool.sha256`."""
    import importlib

    monkeypatch.setenv("HILLS_HOME", str(tmp_path / "home"))
    if what == "warm key":
        warm = importlib.import_module("hills.warm.client" if "hills.warm.client" in MODULES else "hills.warm")
        seen = _folders_read(monkeypatch, warm.key)
    else:
        from hills.evidence import report
        seen = _folders_read(monkeypatch, report._package_hash)
    folders = _package_folders()
    assert len(folders) > 5, folders
    assert folders <= seen, sorted(folders - seen)
