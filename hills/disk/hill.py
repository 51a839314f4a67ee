"""A hill on disk: finding it, creating it from a template, and listing the
files that make up its git tree, its private data and its blobs."""

from __future__ import annotations

import os
import stat as stat_module
import sys

from ..base import git, state
from ..base.errors import UsageError
from ..base.names import validate_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping
    from importlib.resources.abc import Traversable
    from typing import Any

    from .manifest_types import Manifest

HILLS_DIR = ".hills"
# Kept out of every hill's tree; written at creation and at commit, never during an eval.
BASE_EXCLUDES = ["/.vc/", "/private/", "__pycache__/", "*.py[cod]", ".pytest_cache/", ".DS_Store"]
EXCLUDE_MARK = "# blobs (managed by hills commit)"


class Hill:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.path.abspath(path)
        self.name = os.path.basename(self.path)
        self.repo = git.Repo(self.path)

    def __repr__(self) -> str:
        return f"Hill({self.path!r})"

    def manifest(self) -> Manifest:
        return working_manifest(self.path)


def working_manifest(hill_dir: str) -> Manifest:
    """manifest.load, remembered by the text of hill.yaml, the folder's name
    and the hills source (sealed JSON in machine state), so a command that
    only needs the keys, a re-commit say, loads no parser. Errors come from
    manifest.load, worded as ever; a machine without a key keeps nothing."""
    import hashlib
    import json

    from ..evidence import report
    from . import yamlfile
    from ..base.errors import HillsError

    path = os.path.join(hill_dir, "hill.yaml")
    try:
        text = yamlfile.read_text(path) if state.existing_key() is not None else None
    except (OSError, HillsError):
        text = None
    folder = os.path.basename(os.path.abspath(hill_dir))
    where = hashlib.sha256(os.path.realpath(hill_dir).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    remembered_path = os.path.join(state.home(), "cache", "manifest", where + ".json")
    key = hashlib.sha256(json.dumps([text, folder, report.tool_identity()["sha256"]]).encode()).hexdigest()
    if text is not None:
        remembered = state.sealed_read(remembered_path)
        if isinstance(remembered, dict) and remembered.get("key") == key \
                and isinstance(remembered.get("manifest"), dict):
            return remembered["manifest"]
    from . import manifest  # the parser, loaded only for a text not seen before

    if text is None:
        return manifest.load(hill_dir)
    spec = manifest.parse_text(text, path, folder)
    try:
        state.sealed_write(remembered_path, {"key": key, "manifest": spec})
    except OSError:
        pass  # a cache: a machine state that cannot be written costs a parse next time
    return spec


# Set by the evaluation service: the one `.hills` folder it finds hills
# in, so that a `.hills` planted above its working folder is never one.
ONLY_HILLS_DIR: str | None = None


def project_hills_dirs(start: str | None = None) -> list[str]:
    """Every `.hills` folder at or above `start` (the cwd), nearest first."""
    if ONLY_HILLS_DIR is not None:
        return [ONLY_HILLS_DIR] if os.path.isdir(ONLY_HILLS_DIR) else []
    current = os.path.abspath(start or os.getcwd())
    found = []
    while True:
        candidate = os.path.join(current, HILLS_DIR)
        if os.path.isdir(candidate):
            found.append(candidate)
        parent = os.path.dirname(current)
        if parent == current:
            return found
        current = parent


def _is_hill(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "hill.yaml"))


def resolve(name_or_path: str) -> Hill:
    """A hill by name or by path. A name is looked up in the nearest
    `.hills/` at or above the cwd that holds it, then in the registry, where
    several projects may each hold a hill of that name: then the caller
    must pass a path."""
    if not name_or_path:
        raise UsageError("no hill given", hint="pass a hill name, e.g. -H circle-packing")
    if os.sep in name_or_path or name_or_path in (".", ".."):
        path = os.path.abspath(name_or_path)
        if not _is_hill(path):
            raise UsageError(f"'{name_or_path}' is not a hill folder (no hill.yaml)")
        return _checked(Hill(path))
    validate_name(name_or_path)
    for project in project_hills_dirs():
        path = os.path.join(project, name_or_path)
        if _is_hill(path):
            return _checked(Hill(path))
    candidates: list[str] = []
    for entry in state.load_registry()["hills"].get(name_or_path, []):
        if _is_hill(entry["path"]) and not any(state.same_path(entry["path"], seen) for seen in candidates):
            candidates.append(entry["path"])
    if len(candidates) == 1:
        return _checked(Hill(candidates[0]))
    if candidates:
        raise UsageError(f"hill '{name_or_path}' is ambiguous: {len(candidates)} registered hills have that name\n"
                         + "\n".join("  " + path for path in candidates),
                         hint="pass the path of the one you mean instead of its name, "
                              "or run the command inside its project")
    raise UsageError(f"no hill named '{name_or_path}'", hint=_unknown_name_hint(name_or_path))


def known_names() -> list[str]:
    """Names of the hills in the `.hills/` folders at or above the cwd and
    in the registry: what a mistyped name is compared with."""
    names: set[str] = set()
    for project in project_hills_dirs():
        try:
            names.update(entry for entry in os.listdir(project) if _is_hill(os.path.join(project, entry)))
        except OSError:
            continue
    names.update(name for name, entry in state.registry_entries() if _is_hill(entry["path"]))
    return sorted(names)


def _unknown_name_hint(name: str) -> str:
    import difflib

    known = known_names()
    # difflib's ratio undersells short names ('dd' for 'd' is 0.67): one
    # letter added, dropped or changed is close at any length.
    close = list(dict.fromkeys(difflib.get_close_matches(name, known, n=3, cutoff=0.75)
                               + [other for other in known if one_edit_apart(name, other)]))[:3]
    if not close:
        return f"see 'hills list', or create it with 'hills new {name}'"
    quoted = [f"'{match}'" for match in close]
    return "did you mean " + (quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]) + "?"


def one_edit_apart(first: str, second: str) -> bool:
    """Whether one letter added, dropped or changed makes `first` `second`."""
    if first == second or abs(len(first) - len(second)) > 1:
        return False
    if len(first) == len(second):
        return sum(a != b for a, b in zip(first, second)) == 1
    shorter, longer = sorted((first, second), key=len)
    return any(longer[:cut] + longer[cut + 1:] == shorter for cut in range(len(longer)))


def _checked(hill: Hill) -> Hill:
    if not os.path.isdir(os.path.join(hill.path, ".vc")):
        raise UsageError(f"hill '{hill.name}' has no version control folder '{os.path.join(hill.path, '.vc')}'",
                         hint="recreate the hill with 'hills new'")
    return hill


def shipped(folder: str) -> "Traversable":
    """A folder hills ships beside its code, kept once at the top of the
    repository: `examples` (the example hills, the templates of `hills new
    -t`), `hooks` (the pre-commit stub) or `skills` (the agent skill).

    The wheel carries them inside the package (pyproject.toml maps
    `hills.examples`, `hills.hooks` and `hills.skills` to them), where importlib.resources
    finds them. A checkout run through bin/, and the editable install, load
    the package from hills/ itself, which holds no copy: there the folder is
    the top-level one beside the package."""
    import importlib.resources
    import pathlib

    package = importlib.resources.files("hills")  # the package, not this layer
    inside = package.joinpath(folder)
    if inside.is_dir():
        return inside
    return package.parent.joinpath(folder) if isinstance(package, pathlib.Path) else inside


def templates() -> dict[str, str]:
    """{name: first line of its hill.yaml description}."""
    found = {}
    for entry in sorted(shipped("examples").iterdir(), key=lambda entry: entry.name):
        manifest_file = entry.joinpath("hill.yaml")
        if entry.is_dir() and manifest_file.is_file():
            description = ""
            for line in manifest_file.read_text(encoding="utf-8").splitlines():
                if line.startswith("description:"):
                    description = line.split(":", 1)[1].strip().strip("'\"")
                    break
            found[entry.name] = description
    return found


def install_hook(hill_dir: str) -> None:
    """Write the pre-commit stub into the hill's `.vc/hooks/`, naming this
    interpreter as the one to fall back on when `hills` is not on PATH."""
    hooks_dir = os.path.join(hill_dir, ".vc", "hooks")
    os.makedirs(hooks_dir, exist_ok=True)
    text = shipped("hooks").joinpath("pre-commit").read_text(encoding="utf-8")
    text = text.replace("@PYTHON@", sys.executable)
    state.atomic_write(os.path.join(hooks_dir, "pre-commit"), text, 0o755)


def excludes_text(blob_paths: Collection[str] = ()) -> str:
    """What `.vc/info/exclude` holds: the fixed excludes plus the committed blobs."""
    lines = ["# written by hills: what never enters this hill's git tree"] + BASE_EXCLUDES
    if blob_paths:
        lines.append(EXCLUDE_MARK)
        lines.extend("/" + _escape_glob(path) for path in sorted(blob_paths))
    return "\n".join(lines) + "\n"


def excluded_blobs(hill_dir: str) -> frozenset[str] | None:
    """The blob paths of `.vc/info/exclude` when the file is exactly what
    hills writes (the fixed excludes and those paths), else None."""
    try:
        with open(os.path.join(hill_dir, ".vc", "info", "exclude"), encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        return None
    head, mark, listed = text.partition(EXCLUDE_MARK + "\n")
    paths = []
    for line in listed.splitlines():
        if not line.startswith("/"):
            return None
        unescaped, escaped = [], False
        for ch in line[1:]:
            if escaped or ch != "\\":
                unescaped.append(ch)
                escaped = False
            else:
                escaped = True
        paths.append("".join(unescaped))
    return frozenset(paths) if excludes_text(paths) == text else None


def write_excludes(hill_dir: str, blob_paths: Collection[str] = ()) -> None:
    """`.vc/info/exclude`: the fixed excludes plus the committed blobs."""
    text = excludes_text(blob_paths)
    path = os.path.join(hill_dir, ".vc", "info", "exclude")
    try:
        with open(path, encoding="utf-8") as handle:
            if handle.read() == text:
                return
    except FileNotFoundError:
        pass
    state.atomic_write(path, text)


def _escape_glob(path: str) -> str:
    return "".join("\\" + ch if ch in "*?[]!#\\ " else ch for ch in path)



def staging_folder(hills_dir: str, name: str, purpose: str) -> tuple[str, str]:
    """(a fresh folder in `hills_dir`, the path of hill `name` inside it):
    where a hill is made whole before one rename moves it into place. The
    .hills folder is made if need be, with its .gitignore of `*`."""
    import tempfile

    os.makedirs(hills_dir, exist_ok=True)
    gitignore = os.path.join(hills_dir, ".gitignore")
    if not os.path.exists(gitignore):
        state.atomic_write(gitignore, "*\n")
    workdir = tempfile.mkdtemp(prefix=f".{purpose}-{name}-", dir=hills_dir)
    return workdir, os.path.join(workdir, name)

def create(name: str, template: str = "default", project_dir: str | None = None,
           populate: Callable[[str], object] | None = None) -> dict[str, Any]:
    """Create `.hills/NAME` from a template; on any failure leave nothing.

    `populate(staging)`, when given, writes the hill files instead of a
    template (`hills new --from-hillclimb`); `template` then only labels it."""
    import importlib.resources
    import shutil

    from . import uvenv

    validate_name(name)
    source = shipped("examples").joinpath(template) if template and "/" not in template else None
    if populate is None and (source is None or not source.joinpath("hill.yaml").is_file()):
        raise UsageError(f"unknown template '{template}'",
                         hint="available templates: " + ", ".join(templates()))
    project_dir = os.path.abspath(project_dir or os.getcwd())
    hills_dir = os.path.join(project_dir, HILLS_DIR)
    target = os.path.join(hills_dir, name)
    if os.path.lexists(target):
        raise UsageError(f"hill '{name}' already exists at '{target}'")
    # Another project may hold a hill of the same name: lookups prefer the
    # nearest .hills/, and elsewhere an ambiguous name asks for a path.
    uvenv.uv_binary()
    created_hills_dir = not os.path.isdir(hills_dir)
    home_created = state.ensure_home()
    workdir = None
    moved = False

    def register(registry: dict[str, Any]) -> None:
        entry = state.registry_entry(registry, name, target, add=True)
        entry.clear()
        entry.update({"path": target, "tree_hash": None, "template": template})

    try:
        workdir, staging = staging_folder(hills_dir, name, "new")
        if populate is not None:
            populate(staging)
        elif source is not None:
            with importlib.resources.as_file(source) as folder:
                state.copy_tree(folder, staging, ignore=_template_ignore(os.fspath(folder)))
        for rel in ("hill.yaml", "README.md", "pyproject.toml") if populate is None else ():
            path = os.path.join(staging, rel)
            if os.path.exists(path):
                with open(path, encoding="utf-8") as handle:
                    text = handle.read()
                with state.named_os_errors(path), open(path, "w", encoding="utf-8") as handle:
                    handle.write(text.replace("{{name}}", name))
        if populate is None:
            make_data(staging)
        from . import manifest

        manifest.load(staging)
        uvenv.lock(staging)
        repo = git.Repo(staging)
        repo.init()
        repo.run("symbolic-ref", "HEAD", "refs/heads/main")
        write_excludes(staging)
        install_hook(staging)
        os.rename(staging, target)
        moved = True
        state.update_registry(register)
    except BaseException:
        # The hill is whole and registered, or it is not there at all.
        if moved:
            shutil.rmtree(target, ignore_errors=True)
        if created_hills_dir:
            shutil.rmtree(hills_dir, ignore_errors=True)
        raise
    finally:
        if workdir and os.path.isdir(workdir):
            shutil.rmtree(workdir, ignore_errors=True)
    return {"path": target, "home_created": home_created, "template": template}


def _template_ignore(template_dir: str) -> Callable[[str, list[str]], set[str]]:
    """What a template's copy leaves out: bytecode and caches, and its own
    private/, if any: a hill's held-out data is made by the template's
    make_data.py at creation, from fresh randomness, never copied from
    the package, where anyone can read it."""
    import fnmatch

    def ignore(folder: str, names: list[str]) -> set[str]:
        dropped = {name for name in names if any(fnmatch.fnmatch(name, pattern)
                                                  for pattern in ("__pycache__", "*.pyc", ".pytest_cache"))}
        if os.path.abspath(folder) == os.path.abspath(template_dir) and "private" in names:
            dropped.add("private")
        return dropped

    return ignore


# A template that holds this script has it build the hill's data once, at
# creation; held-out data it draws goes to private/.
MAKE_DATA = "make_data.py"


def make_data(hill_dir: str) -> None:
    """Run the template's make_data.py, if it has one, in the new hill's
    folder with this interpreter (isolated, writing no bytecode): data a
    template cannot ship, such as a corpus drawn from the interpreter's
    own library, is made where the hill is. The script stays in the hill,
    the record of how its data was made; the locks freeze what it wrote."""
    import subprocess

    script = os.path.join(hill_dir, MAKE_DATA)
    if not os.path.isfile(script):
        return
    argv = [sys.executable, "-I", "-B", script, hill_dir]
    done = subprocess.run(argv, cwd=hill_dir, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if done.returncode != 0:
        from ..base.errors import CommandFailed

        raise CommandFailed(argv, done.returncode, done.stderr[-2000:],
                            hint=f"the template's {MAKE_DATA} could not build the hill's data")


def list_tree_files(hill: Hill) -> tuple[list[str], list[str]]:
    """Hill files that belong in the git tree or in blobs.lock.

    Uses the hill's `.gitignore` files and the fixed excludes against an empty
    private index, so nothing the user staged matters. Not `.vc/info/exclude`:
    it also lists the committed blobs (which would then vanish from the next
    blobs.lock), and not the user's global excludes file, which would make the
    tree depend on the machine. Returns (regular, blobs): sorted lists.
    """
    import tempfile

    rules = hill.manifest()["blobs"]
    excludes = ["--exclude=" + pattern for pattern in BASE_EXCLUDES]
    with tempfile.TemporaryDirectory(dir=hill.repo.git_dir, prefix="hills-list-") as scratch:
        out = hill.repo.run("ls-files", "-z", "--others", "--exclude-per-directory=.gitignore", *excludes,
                            env={"GIT_INDEX_FILE": os.path.join(scratch, "index")})
    regular, blobs = [], []
    for rel in out.split("\0"):
        if not rel or rel == ".vc" or rel.startswith((".vc/", "private/")):
            continue
        full = os.path.join(hill.path, rel)
        st = os.lstat(full)
        if stat_module.S_ISLNK(st.st_mode):
            raise UsageError(f"'{rel}' in hill '{hill.name}' is a symbolic link",
                             hint="a hill holds plain files; copy the target in instead")
        if manifest_locks(rel):
            regular.append(rel)
        elif manifest_blob(rel, st.st_size, rules):
            blobs.append(rel)
        else:
            regular.append(rel)
    return sorted(regular), sorted(blobs)


# Files hills itself reads from the tree: never blobs, whatever their size.
ALWAYS_IN_TREE = ("hill.yaml", "README.md", "pyproject.toml", "uv.lock", "private.lock", "blobs.lock")


def manifest_locks(rel: str) -> bool:
    return rel in ALWAYS_IN_TREE


def manifest_blob(rel: str, size: int, rules: Mapping[str, Any]) -> bool:
    from .locks import is_blob

    return is_blob(rel, size, rules)
