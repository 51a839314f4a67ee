"""Type annotations on every function signature, checked by mypy with the
configuration in pyproject.toml ([tool.mypy]), and costing the fast paths
nothing at run time."""

import ast
import importlib.util
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGE = REPO_ROOT / "hills"
# Copied into hill environments and run on their interpreter: standard
# library only, and still loadable on Python 3.9.
HILL_SIDE = ("sdk.py", "shim.py", "spaces.py", "testrunner.py", "audithook.py")
# The oldest Python mypy still checks against.
HILL_SIDE_CHECKED_AS = "3.10"


def _cache_dir():
    """mypy's incremental cache: in the virtual environment (a re-run costs
    about a second), else in a temporary folder of this user's."""
    if sys.prefix != sys.base_prefix:
        return Path(sys.prefix) / "mypy_cache"
    return Path(tempfile.gettempdir()) / f"hills-mypy-cache-{os.getuid()}"


def _mypy(*args):
    if importlib.util.find_spec("mypy") is None:
        pytest.fail("mypy is not installed: pip install -e '.[test]'")
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(REPO_ROOT / "pyproject.toml"),
                           "--cache-dir", str(_cache_dir()), *args],
                          cwd=REPO_ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


@pytest.mark.slow
def test_mypy_finds_nothing():
    code, output = _mypy()
    assert code == 0, output


def test_mypy_finds_nothing_in_what_hill_environments_run():
    code, output = _mypy("--python-version", HILL_SIDE_CHECKED_AS, *(f"hills/{name}" for name in HILL_SIDE))
    assert code == 0, output


def _runtime_imports(node):
    """Top-level names of the modules `node` imports at run time, in
    functions too; not those under `if TYPE_CHECKING:`, which only the type
    checker reads ("." for a relative import)."""
    if isinstance(node, ast.Import):
        return [alias.name.split(".")[0] for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        return ["." if node.level else node.module.split(".")[0]]
    if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
        children = node.orelse
    else:
        children = list(ast.iter_child_nodes(node))
    return [name for child in children for name in _runtime_imports(child)]


@pytest.mark.parametrize("name", HILL_SIDE)
def test_what_hill_environments_run_imports_the_standard_library_only(name):
    imported = set(_runtime_imports(ast.parse((PACKAGE / name).read_text(encoding="utf-8"))))
    assert imported <= set(sys.stdlib_module_names), sorted(imported - set(sys.stdlib_module_names))
    # typing costs an evaluator's start some milliseconds, for annotations that are strings.
    assert "typing" not in imported
    assert "__future__" in imported  # annotations stay strings on Python 3.9


def test_hills_verify_loads_no_typing_module(tmp_path):
    """Annotations are strings and their names are imported under
    TYPE_CHECKING only: typing would cost `hills verify` a tenth of its
    start."""
    done = subprocess.run([sys.executable, "-X", "importtime", str(REPO_ROOT / "bin" / "hills"), "verify",
                           str(tmp_path / "missing.json")], stdin=subprocess.DEVNULL, capture_output=True, text=True)
    loaded = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "hills.evidence.verify" in loaded, done.stderr
    assert "typing" not in loaded


def _exempt_modules():
    """The modules [tool.mypy] still allows untyped functions in."""
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    exempt = []
    for override in config.get("overrides", []):
        if override.get("disallow_untyped_defs") is False:
            modules = override["module"]
            exempt += [modules] if isinstance(modules, str) else modules
    return exempt


def _files_of(module):
    parts = module.split(".")
    if parts[-1] == "*":
        return sorted(REPO_ROOT.joinpath(*parts[:-1]).rglob("*.py"))
    path = REPO_ROOT.joinpath(*parts)
    return [path / "__init__.py"] if path.is_dir() else [path.with_suffix(".py")]


def _untyped_defs(path):
    """Functions whose signature lacks a return type or a parameter's type
    (a method's self or cls excepted), as `file:line name`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        args = node.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        missing = [p for p in params if p is not None and p.annotation is None and p.arg not in ("self", "cls")]
        if node.returns is None or missing:
            found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} {node.name}")
    return found


def test_the_modules_exempt_from_annotations_only_shrink():
    """Each module the override list names still has an unannotated
    function; once it has none, it leaves the list and mypy holds it to
    the rule as well."""
    done = []
    for module in _exempt_modules():
        files = [path for path in _files_of(module) if path.exists()]
        if files and not any(_untyped_defs(path) for path in files):
            done.append(module)
    assert not done, f"fully annotated, so remove from the mypy override list in pyproject.toml: {', '.join(done)}"


SHAPES = ("report_types", "manifest_types")


def _runtime_relative_imports(node):
    """The names of the hills modules `node` imports at run time (relative
    imports, `from . import X` and `from .X import Y`), in functions too;
    not those under `if TYPE_CHECKING:`."""
    if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
        return [name for child in node.orelse for name in _runtime_relative_imports(child)]
    found = []
    if isinstance(node, ast.ImportFrom) and node.level:
        found += [node.module.split(".")[-1]] if node.module else [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hills."):
        found.append(node.module.split(".")[-1])
    if isinstance(node, ast.Import):
        found += [alias.name.split(".")[-1] for alias in node.names if alias.name.startswith("hills.")]
    return found + [name for child in ast.iter_child_nodes(node) for name in _runtime_relative_imports(child)]


def test_the_json_shapes_are_read_by_the_type_checker_only():
    """The report's and the manifest's TypedDicts import typing: a module
    that imported them at run time would put it on the eval path."""
    importers = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.stem in SHAPES:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        used = set(_runtime_relative_imports(tree)) & set(SHAPES)
        if used:
            importers[str(path.relative_to(REPO_ROOT))] = sorted(used)
    assert not importers, f"import these under TYPE_CHECKING only: {importers}"
    typed = [path for path in PACKAGE.rglob("*.py") if path.stem not in SHAPES
             and any(f"{shape} import" in path.read_text(encoding="utf-8") for shape in SHAPES)]
    assert len(typed) >= 5, typed  # the check above looked at the modules that use them


def _typing_only_uses(source: str) -> list[str]:
    """Names bound only under `if TYPE_CHECKING:` (which is False at run time)
    and read outside an annotation: each a NameError when that line runs."""
    tree = ast.parse(source)
    typing_nodes: set[int] = set()
    typing_names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.body:
                typing_nodes.update(id(inner) for inner in ast.walk(child))
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    typing_names.update((alias.asname or alias.name).split(".")[0] for alias in child.names)
                elif isinstance(child, ast.Assign):
                    typing_names.update(target.id for target in child.targets if isinstance(target, ast.Name))
    bound: set[str] = set()
    annotations: set[int] = set()
    for node in ast.walk(tree):
        if id(node) in typing_nodes:
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg,
                             arguments.kwarg]:
                if argument is not None and argument.annotation is not None:
                    annotations.update(id(inner) for inner in ast.walk(argument.annotation))
            if node.returns is not None:
                annotations.update(id(inner) for inner in ast.walk(node.returns))
        elif isinstance(node, ast.AnnAssign):
            annotations.update(id(inner) for inner in ast.walk(node.annotation))
    only = typing_names - bound
    return [f"{node.lineno}: {node.id}" for node in ast.walk(tree)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in only
            and id(node) not in annotations and id(node) not in typing_nodes]


def test_a_name_imported_for_the_type_checker_alone_is_not_used_at_run_time():
    # mypy and ruff both take such an import as a definition; only running the line would say otherwise.
    control = ("TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from .records import RunResult\n\n"
               "def failed(rep: RunResult) -> RunResult:\n    return RunResult(rep)\n")
    assert _typing_only_uses(control) == ["6: RunResult"]
    found = [f"{path.relative_to(REPO_ROOT)}:{use}" for path in sorted(PACKAGE.rglob("*.py"))
             for use in _typing_only_uses(path.read_text(encoding="utf-8"))]
    assert not found, f"names imported under TYPE_CHECKING, used at run time: {found}"
