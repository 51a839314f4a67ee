"""The agent skill hills ships (the top-level skills/hills/ folder, in the
wheel as hills/skills/hills/): where each agent CLI looks for skills, how
a copy is installed there stamped with this hills' version, and whether an
installed copy is still the one this hills would install."""

from __future__ import annotations

import os

from .. import __version__
from ..base.errors import Refused, UsageError
from ..base.records import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any
    from importlib.resources.abc import Traversable

SKILL_NAME = "hills"
SKILL_FILE = "SKILL.md"
# The frontmatter key the installed SKILL.md names this hills' version
# under, and the one holding the digest of the files as shipped.
VERSION_KEY = "hills-version"
DIGEST_KEY = "hills-skill-digest"
# The install line as shipped; an installed copy gets the line that
# installed the running hills in its place (PyPI's `hills` is another
# project, so the shipped line can only point at a checkout).
INSTALL_PLACEHOLDER = "    pip install /path/to/a/checkout/of/hills\n"


@frozen
class Agent:
    """Where one agent CLI reads skills: `user` under the home folder,
    `project` under a project's root, and `marker`, the folder in the home
    whose presence says the CLI is used on this machine."""

    name: str
    label: str
    user: str
    project: str
    marker: str | None = None


# The generic layout (`.agents/skills`, which several CLIs read and the
# skills package manager installs into) last: it is the fallback.
AGENTS = (
    Agent("claude-code", "Claude Code", "~/.claude/skills", ".claude/skills", "~/.claude"),
    Agent("codex", "OpenAI Codex CLI", "~/.agents/skills", ".agents/skills", "~/.codex"),
    Agent("cursor", "Cursor", "~/.cursor/skills", ".cursor/skills", "~/.cursor"),
    Agent("gemini-cli", "Gemini CLI", "~/.gemini/skills", ".gemini/skills", "~/.gemini"),
    Agent("github-copilot", "GitHub Copilot", "~/.copilot/skills", ".github/skills", "~/.copilot"),
    Agent("opencode", "OpenCode", "~/.config/opencode/skills", ".opencode/skills", "~/.config/opencode"),
    Agent("agents", "the generic skills layout", "~/.agents/skills", ".agents/skills"),
)
GENERIC = AGENTS[-1]


@frozen
class Target:
    """One place the skill goes: `folder` is the skill's own folder
    (SKILL_NAME inside a skills folder), `agents` the CLIs that read it."""

    folder: str
    agents: tuple[str, ...]


@frozen
class Installed:
    """The state of the skill at one target: `state` is `current`,
    `stale`, `missing` or `foreign` (a folder hills did not write), and
    `version` the hills version the installed copy names."""

    target: Target
    state: str
    version: str | None
    detail: str


def agent(name: str) -> Agent:
    for known in AGENTS:
        if known.name == name:
            return known
    raise UsageError(f"unknown agent '{name}'", hint="one of: " + ", ".join(a.name for a in AGENTS))


def project_root(start: str | None = None) -> str:
    """The project around `start` (the current folder): the nearest folder
    up from it that holds `.hills` or `.git`, else `start` itself."""
    start = os.path.abspath(start or os.getcwd())
    current = start
    while True:
        if any(os.path.lexists(os.path.join(current, name)) for name in (".hills", ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return start
        current = parent


def targets(agents: Sequence[str] = (), folder: str | None = None, project: bool = False,
            root: str | None = None) -> list[Target]:
    """Where to install: into `folder` (a skills folder) when given; else
    for each named agent; else, in a project, for each agent whose skills
    folder the project has (so `--project --check` finds what `--project
    --agent NAME` installed); else for each agent CLI found on this
    machine (its marker folder exists), and the generic layout when none is."""
    if folder is not None:
        return [Target(os.path.join(os.path.abspath(os.path.expanduser(folder)), SKILL_NAME), tuple(agents))]
    chosen = [agent(name) for name in agents]
    base = project_root(root) if project else None
    if not chosen and base is not None:
        chosen = [a for a in AGENTS if os.path.isdir(os.path.join(base, a.project))]
    if not chosen:
        chosen = [a for a in AGENTS if a.marker and os.path.isdir(os.path.expanduser(a.marker))] or [GENERIC]
    by_folder: dict[str, list[str]] = {}
    for one in chosen:
        skills_dir = os.path.join(base, one.project) if base else os.path.expanduser(one.user)
        by_folder.setdefault(os.path.join(skills_dir, SKILL_NAME), []).append(one.name)
    return [Target(path, tuple(names)) for path, names in by_folder.items()]


def shipped() -> Traversable:
    from .hill import shipped as shipped_folder

    return shipped_folder("skills").joinpath(SKILL_NAME)


def _walk(folder: Traversable, prefix: str = "") -> Iterable[tuple[str, Traversable]]:
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.startswith(".") or entry.name == "__pycache__":
            continue
        rel = prefix + entry.name
        if entry.is_dir():
            yield from _walk(entry, rel + "/")
        else:
            yield rel, entry


def shipped_files() -> dict[str, bytes]:
    """{relative path: content} of the skill as shipped."""
    return {rel: entry.read_bytes() for rel, entry in _walk(shipped())}


def digest(files: dict[str, bytes]) -> str:
    """A digest over the shipped files' paths and contents."""
    from ..base.digests import blake2b

    hasher = blake2b(digest_size=32)
    for rel in sorted(files):
        hasher.update(rel.encode() + b"\0" + str(len(files[rel])).encode() + b"\0" + files[rel])
    return "blake2b:" + hasher.hexdigest()


def stamp(skill_md: str, version: str, files_digest: str) -> str:
    """SKILL.md with this hills' version and the files' digest in its
    frontmatter, under `metadata:` (the skill format's map for keys of
    its own), so the installed copy says which hills it goes with."""
    if not skill_md.startswith("---\n"):
        raise ValueError("the shipped SKILL.md has no frontmatter")
    end = skill_md.index("\n---\n", 4)
    head = skill_md[4:end]
    lines = [line for line in head.splitlines() if line.strip() != "metadata:"]
    lines += ["metadata:", f'  {VERSION_KEY}: "{version}"', f'  {DIGEST_KEY}: "{files_digest}"']
    return "---\n" + "\n".join(lines) + skill_md[end:]


@frozen
class Origin:
    """How the running hills was installed, as PEP 610's direct_url.json
    records it (None where it has none: an index install, or no install
    at all), and whether by `uv tool install` (its environment holds uv's
    receipt); `checkout` is the source tree the package runs from, if any."""

    direct_url: dict[str, Any] | None
    uv_tool: bool = False
    checkout: str | None = None


def install_line(origin: Origin) -> str | None:
    """The shell line that installs this hills again the way it was
    installed, or None where that is not known."""
    import shlex

    tool = "uv tool install" if origin.uv_tool else "pip install"
    record = origin.direct_url or {}
    url = record.get("url")
    if isinstance(url, str) and url:
        vcs = record.get("vcs_info")
        if isinstance(vcs, dict):
            commit = vcs.get("commit_id") or vcs.get("requested_revision")
            kind = vcs.get("vcs") or "git"
            return f"{tool} {shlex.quote(f'{kind}+{url}' + (f'@{commit}' if commit else ''))}"
        where = _local_path(url)
        editable = isinstance(record.get("dir_info"), dict) and record["dir_info"].get("editable") is True
        return f"{tool} {'-e ' if editable else ''}{shlex.quote(where or url)}"
    if origin.checkout is not None:
        return f"{tool} {shlex.quote(origin.checkout)}"
    return None


def _local_path(url: str) -> str | None:
    if not url.startswith("file://"):
        return None
    from urllib.parse import unquote, urlsplit

    return unquote(urlsplit(url).path) or None


def running_origin() -> Origin:
    """The Origin of the hills running now."""
    import json
    import sys
    from importlib import metadata

    direct_url = None
    try:
        dist = metadata.distribution("hills")
        text = dist.read_text("direct_url.json") if dist.version == __version__ else None
        loaded = json.loads(text) if text else None
        direct_url = loaded if isinstance(loaded, dict) else None
    except (metadata.PackageNotFoundError, ValueError, OSError):
        pass
    source = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    checkout = os.path.dirname(source)
    is_checkout = os.path.isfile(os.path.join(checkout, "pyproject.toml")) and os.path.isdir(
        os.path.join(checkout, "skills", SKILL_NAME))
    return Origin(direct_url, os.path.isfile(os.path.join(sys.prefix, "uv-receipt.toml")),
                  checkout if is_checkout else None)


def with_install_line(skill_md: str, line: str | None) -> str:
    """SKILL.md with `line` where the shipped one has its placeholder."""
    if line is None or INSTALL_PLACEHOLDER not in skill_md:
        return skill_md
    return skill_md.replace(INSTALL_PLACEHOLDER, f"    {line}\n", 1)


def rendered(origin: Origin | None = None) -> dict[str, bytes]:
    """The files as installed: the shipped ones, SKILL.md stamped and
    naming the line that installs the running hills (or `origin`'s)."""
    files = shipped_files()
    text = stamp(files[SKILL_FILE].decode("utf-8"), __version__, digest(files))
    line = install_line(origin if origin is not None else running_origin())
    files[SKILL_FILE] = with_install_line(text, line).encode("utf-8")
    return files


def _frontmatter_value(text: str, key: str) -> str | None:
    if not text.startswith("---\n") or "\n---\n" not in text[4:]:
        return None
    for line in text[4:text.index("\n---\n", 4)].splitlines():
        name, colon, value = line.strip().partition(":")
        if colon and name == key:
            return value.strip().strip('"\'')
    return None


def inspect(target: Target, wanted: dict[str, bytes] | None = None) -> Installed:
    """Whether the copy at `target` is the one this hills installs."""
    wanted = rendered() if wanted is None else wanted
    skill_md = os.path.join(target.folder, SKILL_FILE)
    if not os.path.lexists(target.folder):
        return Installed(target, "missing", None, "not installed")
    try:
        with open(skill_md, encoding="utf-8", errors="replace") as handle:
            text = handle.read(1024 * 1024)
    except OSError:
        return Installed(target, "foreign", None, f"'{target.folder}' holds no readable {SKILL_FILE}")
    version = _frontmatter_value(text, VERSION_KEY)
    if version is None:
        return Installed(target, "foreign", None, f"'{skill_md}' was not installed by hills")
    if version != __version__:
        return Installed(target, "stale", version, f"installed for hills {version}; this is hills {__version__}")
    changed = sorted(rel for rel, content in wanted.items() if _read(os.path.join(target.folder, rel)) != content)
    extra = sorted(set(_installed_files(target.folder)) - set(wanted))
    if changed or extra:
        named = ", ".join(changed + extra)
        return Installed(target, "stale", version, f"differs from the skill this hills ships: {named}")
    return Installed(target, "current", version, f"hills {version}")


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def _installed_files(folder: str) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "__pycache__"]
        for name in filenames:
            if not name.startswith("."):
                found.append(os.path.relpath(os.path.join(dirpath, name), folder).replace(os.sep, "/"))
    return found


def install(target: Target, force: bool = False) -> Installed:
    """Write the skill into `target.folder`, replacing a copy hills
    installed before (any version); a folder hills did not write is
    replaced only with `force`. The new copy is written beside the old
    and renamed over it, so a reader never sees half of one."""
    wanted = rendered()
    before = inspect(target, wanted)
    if before.state == "foreign" and not force:
        raise Refused(f"'{target.folder}' exists and was not installed by hills",
                      hint="move it away, or pass --force to replace it")
    if before.state == "current":
        return before
    import shutil
    import tempfile

    parent = os.path.dirname(target.folder)
    os.makedirs(parent, exist_ok=True)
    fresh = tempfile.mkdtemp(prefix=f".{SKILL_NAME}-", dir=parent)
    try:
        for rel, content in wanted.items():
            path = os.path.join(fresh, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as handle:
                handle.write(content)
        os.chmod(fresh, 0o755)
        old = None
        if os.path.lexists(target.folder):
            old = tempfile.mkdtemp(prefix=f".{SKILL_NAME}-old-", dir=parent)
            os.rename(target.folder, os.path.join(old, SKILL_NAME))
        os.rename(fresh, target.folder)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    return Installed(target, "current", __version__, f"hills {__version__}"
                     + (f" (was {before.version})" if before.version and before.version != __version__ else ""))


def check_all(chosen: Sequence[Target]) -> list[Installed]:
    wanted = rendered()
    return [inspect(target, wanted) for target in chosen]

