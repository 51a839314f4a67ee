"""Per-hill uv environments: locking, building once per version, reusing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ..base import state
from ..base.digests import sha256
from ..base.errors import CommandFailed, EnvironmentProblem

MARKER = ".hills-env.json"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from pathlib import Path


def uv_binary() -> str:
    """The uv executable: the one installed with hills, else the one on PATH."""
    override = os.environ.get("HILLS_UV")
    if override:
        if not os.path.isfile(override) or not os.access(override, os.X_OK):
            raise EnvironmentProblem(f"uv not found at '{override}' (from HILLS_UV)")
        return override
    try:
        import uv

        path: str | None = uv.find_uv_bin()
        if path and os.path.isfile(path):
            return path
    except (ImportError, FileNotFoundError):
        pass
    import shutil

    path = shutil.which("uv")
    if not path:
        raise EnvironmentProblem("uv is not installed or not on PATH",
                                 hint="reinstall hills (it depends on uv), or set HILLS_UV to a uv executable")
    return path


def _uv_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT"))}
    env.setdefault("UV_PYTHON_DOWNLOADS", "never")
    # The machine's own certificate store, as pip and git use it: behind a
    # proxy with its own root, uv's bundled roots fail every download.
    if "UV_NATIVE_TLS" not in env:
        env.setdefault("UV_SYSTEM_CERTS", "1")
    env["UV_NO_PROGRESS"] = "1"
    # Package files shared with uv's cache, whatever the caller set: a
    # clone where the file system makes one (btrfs, XFS: the environment's
    # files are its own inodes on the cache's blocks), else a hard link
    # (ext4: the cache's inode itself), else a copy. A torch environment
    # then costs its bytecode, not a second 5 GB. The seal stays honest
    # either way (changed_since_built): an edit of a file shared with the
    # cache moves the inode's ctime, which no user can set back, and a
    # ctime that moved alone (a link added or removed elsewhere) is judged
    # by the file's content against its digest taken at the build.
    env["UV_LINK_MODE"] = "clone"
    return env


def _run(argv: list[str], cwd: Path | str,
         extra_env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = _uv_env()
    if extra_env:
        env.update(extra_env)
    try:
        done = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except FileNotFoundError:
        raise EnvironmentProblem(f"could not run '{argv[0]}'")
    return done


def interpreter() -> str:
    """The Python a hill environment is built on: this one, unless HILLS_PYTHON_BASE says."""
    return os.environ.get("HILLS_PYTHON_BASE") or sys.executable


def lock(hill_dir: Path | str) -> None:
    """Write or refresh the hill's uv.lock."""
    argv = [uv_binary(), "lock", "--quiet", "--python", interpreter()]
    done = _run(argv, hill_dir)
    if done.returncode != 0:
        raise CommandFailed(argv, done.returncode, done.stderr,
                            hint="check the dependencies in the hill's pyproject.toml")


def lock_is_current(hill_dir: Path | str) -> tuple[bool, str]:
    """(True, "") when uv.lock matches pyproject.toml, else (False, why)."""
    if not os.path.isfile(os.path.join(hill_dir, "uv.lock")):
        return False, f"uv.lock is missing in '{hill_dir}'; write it with: {lock_command(hill_dir)}"
    uv = uv_binary()
    # uv's answer depends only on these two files, the interpreter and uv
    # itself: remember a yes (sealed) and skip the ~0.3 s call next time.
    st = os.stat(uv)
    answer_key = [env_digest(hill_dir), os.path.realpath(uv), st.st_size, st.st_mtime_ns]
    remembered = os.path.join(state.home(), "cache", "uv-lock-current.json")
    if state.sealed_read(remembered) == answer_key:
        return True, ""
    argv = [uv, "lock", "--check", "--quiet", "--python", interpreter()]
    done = _run(argv, hill_dir)
    if done.returncode == 0:
        state.ensure_home()
        state.sealed_write(remembered, answer_key)
        return True, ""
    # uv's own hint ("run `uv lock`") names neither the folder nor the
    # interpreter the hill locks for: say both.
    lines = [line for line in done.stderr.strip().splitlines() if not line.lower().startswith("hint:")]
    said = lines[-1].removeprefix("error: ").strip() if lines else ""
    why = f" (uv: {said})" if said and "needs to be updated" not in said else ""
    return False, (f"uv.lock in '{hill_dir}' is out of date with its pyproject.toml{why}; "
                   f"refresh it with: {lock_command(hill_dir)}")


def lock_command(hill_dir: Path | str) -> str:
    """The shell line that writes the hill's uv.lock as hills locks it."""
    import shlex
    import shutil

    uv = uv_binary()
    shown = "uv" if shutil.which("uv") == uv else uv
    return " ".join(shlex.quote(str(word)) for word in (shown, "lock", "--directory", hill_dir,
                                                        "--python", interpreter()))


def env_digest(hill_dir: Path | str) -> str:
    """Identity of an environment: its pyproject.toml, uv.lock and base interpreter."""
    digest = sha256()
    for name in ("pyproject.toml", "uv.lock"):
        try:
            with open(os.path.join(hill_dir, name), "rb") as handle:
                digest.update(name.encode() + b"\0" + handle.read() + b"\0")
        except FileNotFoundError:
            digest.update(name.encode() + b"\0missing\0")
    digest.update(interpreter().encode())
    return digest.hexdigest()[:32]


def env_path(name: str, key: str) -> str:
    return os.path.join(state.envs_dir(name), key)


def python_of(env_dir: str) -> str:
    return os.path.join(env_dir, "bin", "python")


def seal_path(env_dir: str) -> str:
    # Beside the environment, not in it: sealed with the machine key.
    return env_dir + ".seal.json"


def shared_path(env_dir: str) -> str:
    # The content digests of the files the environment shares (hard links), sealed beside it.
    return env_dir + ".shared.json"


def _signature(env_dir: str) -> dict[str, list[str | int]]:
    """state.folder_signature of the environment, less its marker. Each
    file's ctime counts: one edited in place, its size and mtime put back,
    still shows."""
    return state.folder_signature(env_dir, skip=(MARKER,))


def _seal(env_dir: str, known: Mapping[str, str] | None = None) -> None:
    """Seal the environment as it is, with the content digest of each file
    it shares with another name (a hard link from uv's cache or from a
    twin): those in `known` (rel -> digest, of these very inodes) as
    given, the others read."""
    _record_shared(env_dir, known or {})
    state.sealed_write(seal_path(env_dir), _signature(env_dir))


def _shared_files(env_dir: str) -> dict[str, int]:
    """{relative path: inode} of each regular file with more than one name."""
    import stat as stat_module

    found: dict[str, int] = {}
    for current, _dirs, files in os.walk(env_dir):
        for name in files:
            full = os.path.join(current, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if stat_module.S_ISREG(st.st_mode) and st.st_nlink > 1:
                found[os.path.relpath(full, env_dir)] = st.st_ino
    return found


def _record_shared(env_dir: str, known: Mapping[str, str]) -> dict[str, str]:
    """Digest each shared file (or take it from `known`) and seal the table."""
    from .locks import file_digest

    table = {rel: known.get(rel) or file_digest(os.path.join(env_dir, rel)) for rel in _shared_files(env_dir)}
    state.sealed_write(shared_path(env_dir), table)
    return table


def shared_digests(env_dir: str) -> dict[str, str]:
    """The sealed content digests of the environment's shared files (none when missing or edited)."""
    table = state.sealed_read(shared_path(env_dir))
    return {str(rel): str(digest) for rel, digest in table.items()} if isinstance(table, dict) else {}


def cache_edited(env_dir: str) -> bool:
    """Whether a file the environment shares with uv's cache (or a twin)
    differs from its seal: the cached file itself was edited, and a build
    that links it again would hold the edit (`ensure` then builds
    without uv's cache)."""
    sealed = state.sealed_read(seal_path(env_dir))
    if not isinstance(sealed, dict):
        return False
    now = _signature(env_dir)
    return any(rel in now and now[rel] != sealed[rel] for rel in shared_digests(env_dir) if rel in sealed)


def changed_since_built(env_dir: str) -> str | None:
    """None when the environment is as it was built, else what differs. A
    file whose ctime alone moved (its size, mtime and inode as sealed) is
    one a link was added to or removed from elsewhere (uv linking it into
    another environment, or pruning its cache): it is as built when its
    content is the digest sealed at the build, and the environment is then
    sealed again; anything else is a change."""
    sealed = state.sealed_read(seal_path(env_dir))
    if sealed is None:
        return "it has no seal from its build"
    now = _signature(env_dir)
    if sealed == now:
        return None
    changed = "a file in it was added, removed or edited"
    if not isinstance(sealed, dict) or sealed.keys() != now.keys():
        return changed
    moved = [rel for rel, entry in now.items() if entry != sealed[rel]]
    if any(now[rel][:3] + now[rel][4:] != list(sealed[rel])[:3] + list(sealed[rel])[4:] or now[rel][0] != "f"
           for rel in moved):
        return changed
    from .locks import file_digest

    digests = shared_digests(env_dir)
    for rel in moved:
        full = os.path.join(env_dir, rel)
        if rel not in digests or os.lstat(full).st_ctime_ns != now[rel][3]:
            return changed
        if file_digest(full) != digests[rel]:
            return f"its file {rel}, shared with uv's cache, was edited"
    try:
        state.sealed_write(seal_path(env_dir), now)
    except OSError:
        pass  # judged by content again next time
    return None


def ready(name: str, key: str) -> str | None:
    """The interpreter of the environment `key` of hill `name` when it is
    built and as it was built (what `ensure` would return without building
    anything), else None."""
    env_dir = env_path(name, key)
    if os.path.isfile(os.path.join(env_dir, MARKER)) and os.path.exists(python_of(env_dir)) \
            and changed_since_built(env_dir) is None:
        return python_of(env_dir)
    return None


def ensure(name: str, key: str, source_dir: Path | str, say: Callable[[str], object] | None = None) -> str:
    """The interpreter of the environment `key` of hill `name`, built from
    `source_dir` (pyproject.toml + uv.lock) on first use, then reused as is
    while its seal holds; a changed environment is rebuilt."""
    env_dir = env_path(name, key)
    marker = os.path.join(env_dir, MARKER)
    refresh = False
    if os.path.isfile(marker) and os.path.exists(python_of(env_dir)):
        problem = changed_since_built(env_dir)
        if problem is None:
            return python_of(env_dir)
        refresh = cache_edited(env_dir)
        if say:
            say(f"hills: the environment of hill '{name}' changed since it was built ({problem}); rebuilding it"
                + (", its packages fetched anew" if refresh else ""))
    import shutil

    state.ensure_home()
    with state.file_lock(env_dir + ".lock"):
        if os.path.isfile(marker) and os.path.exists(python_of(env_dir)) and changed_since_built(env_dir) is None:
            return python_of(env_dir)
        shutil.rmtree(env_dir, ignore_errors=True)
        digest, packages = env_digest(source_dir), packages_digest(source_dir)
        built = {"key": key, "built_from": str(source_dir), "digest": digest, "packages": packages}
        twin = _link_twin(name, digest, packages, env_dir)
        if twin is not None:
            state.atomic_write(marker, json.dumps(built) + "\n")
            _seal(env_dir, twin)
            return python_of(env_dir)
        # Bytecode is compiled here, before the seal: evals write none, so a
        # large package (torch) would otherwise compile its modules at
        # every import.
        # Without uv's cache when a file shared with it was edited: uv then
        # fetches and unpacks the packages anew (into a cache of its own,
        # gone after) instead of linking the edited file again.
        argv = [uv_binary(), "sync", "--frozen", "--no-install-project", "--compile-bytecode",
                *(["--no-cache"] if refresh else []), "--python", interpreter()]
        returncode, stderr = build(argv, source_dir, env_dir, name, say)
        if returncode != 0:
            shutil.rmtree(env_dir, ignore_errors=True)
            raise CommandFailed(argv, returncode, stderr,
                                hint="check the hill's pyproject.toml and uv.lock ('hills check' runs the same build)")
        state.atomic_write(marker, json.dumps(built) + "\n")
        _seal(env_dir)
    return python_of(env_dir)


# How often the live line's count of an environment being built is taken.
COUNT_EVERY_S = 2.0


def build(argv: list[str], source_dir: Path | str, env_dir: str, name: str,
           say: Callable[[str], object] | None) -> tuple[int, str]:
    """Run uv's build of `env_dir`: (exit code, its stderr). A build can
    take minutes (torch is 5 GB), so on a terminal (`say` a live progress
    line) uv's lines are shown a line at a time and the live line counts
    the packages and bytes written so far; elsewhere one phase line says a
    build is under way and uv's lines are kept for an error alone."""
    import threading
    import time

    from ..base import progress

    begun = f"building the environment of hill '{name}' with uv"
    live = getattr(say, "mode", None) == progress.LIVE
    before = getattr(say, "current", None)
    progress.phase(say, begun)
    env = _uv_env()
    env["UV_PROJECT_ENVIRONMENT"] = env_dir
    try:
        proc = subprocess.Popen(argv, cwd=source_dir, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
    except FileNotFoundError:
        raise EnvironmentProblem(f"could not run '{argv[0]}'")
    done = threading.Event()

    def count() -> None:
        while not done.wait(COUNT_EVERY_S):
            packages, size = env_size(env_dir)
            progress.phase(say, f"{begun}: {packages} package(s), {human_bytes(size)} written")

    counter = threading.Thread(target=count, name="hills-env-count", daemon=True) if live else None
    if counter is not None:
        counter.start()
    started = time.monotonic()
    lines = []
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            lines.append(line)
            if live and say is not None and line.strip():
                say(f"  uv: {line.rstrip()}")
        returncode = proc.wait()
    finally:
        done.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if live and say is not None and returncode == 0:
        packages, size = env_size(env_dir)
        say(f"hills: built the environment of hill '{name}': {packages} package(s), {human_bytes(size)}, "
            f"in {time.monotonic() - started:.0f}s")
    if live and isinstance(before, str):
        progress.phase(say, before)  # the phase the build was part of goes on
    return returncode, "".join(lines)


def env_size(env_dir: str) -> tuple[int, int]:
    """(packages installed, bytes of files) of an environment, as far as
    it is written: a package is a `*.dist-info` folder."""
    packages = size = 0
    pending = [env_dir]
    while pending:
        try:
            listing = os.scandir(pending.pop())
        except OSError:
            continue
        with listing:
            for entry in listing:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                        packages += entry.name.endswith(".dist-info")
                    elif entry.is_file(follow_symlinks=False):
                        size += entry.stat(follow_symlinks=False).st_size
                except OSError:
                    continue
    return packages, size


def human_bytes(count: int) -> str:
    """A size as a person reads it: 5.4 GB, 812 MB, 3 kB (decimal units, as du -h --si)."""
    for unit, scale in (("GB", 10 ** 9), ("MB", 10 ** 6), ("kB", 10 ** 3)):
        if count >= scale:
            value = count / scale
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{count} B"


def packages_digest(source_dir: Path | str) -> str | None:
    """What an environment installs, whatever hill it is built for: uv.lock
    as parsed, less the name and version of the hill's own project (never
    installed: `--no-install-project`), pyproject.toml's `[tool.uv]` (how uv
    installs) and the base interpreter. Two hills whose digests agree get
    the same files; None when uv.lock cannot be read (no twin is looked for
    in other hills then)."""
    import tomllib

    try:
        with open(os.path.join(source_dir, "uv.lock"), "rb") as handle:
            locked = tomllib.load(handle)
        with open(os.path.join(source_dir, "pyproject.toml"), "rb") as handle:
            project = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError):
        return None
    packages = []
    for package in locked.get("package") or []:
        if not isinstance(package, dict):
            return None
        source = package.get("source")
        if isinstance(source, dict) and (source.get("virtual") == "." or source.get("editable") == "."):
            package = {key: value for key, value in package.items() if key not in ("name", "version")}
        packages.append(package)
    others = {key: value for key, value in locked.items() if key != "package"}
    tool = project.get("tool")
    settings = tool.get("uv") if isinstance(tool, dict) else None
    text = json.dumps([others, sorted(json.dumps(package, sort_keys=True, default=str) for package in packages),
                       settings, interpreter()], sort_keys=True, default=str)
    return sha256(text.encode()).hexdigest()[:32]


def _twins(name: str, digest: str, packages: str | None, env_dir: str) -> Iterator[str]:
    """The environments `env_dir` may be linked from, nearest first: the
    hill's own built from the same pyproject.toml, uv.lock and interpreter,
    then those of any hill of this machine state that install the same
    packages (packages_digest)."""
    own = os.path.dirname(env_dir)
    roots = [own]
    if packages is not None:
        try:
            roots += sorted(os.path.join(state.home(), "envs", entry)
                            for entry in os.listdir(os.path.join(state.home(), "envs")) if entry != name)
        except OSError:
            pass
    for root in roots:
        try:
            entries = sorted(os.listdir(root))
        except OSError:
            continue
        for entry in entries:
            twin = os.path.join(root, entry)
            try:
                with open(os.path.join(twin, MARKER), encoding="utf-8") as handle:
                    built = json.load(handle)
            except (OSError, ValueError):
                continue
            if twin == env_dir or not isinstance(built, dict):
                continue
            if (root == own and built.get("digest") == digest) or \
                    (packages is not None and built.get("packages") == packages):
                yield twin


def _link_twin(name: str, digest: str, packages: str | None, env_dir: str) -> dict[str, str] | None:
    """Make `env_dir` from an intact environment that installs the same
    files (its twin: the working tree's of a version just committed, or
    another hill's of the same packages, _twins): package files
    hard-linked, `bin/` and pyvenv.cfg copied with the twin's path
    replaced. A large environment (torch's is 5 GB) then costs seconds and
    no disk. Each environment keeps its own seal, and a seal holds each
    file's inode and ctime, so an edit through either name shows in both. A
    new link moves a file's ctime: the twin is sealed again when nothing but
    ctimes moved while it was linked, with the digests of the files it now
    shares (those it shared already as sealed). The content digests of the
    shared files, by path, for the new environment's seal; None when there
    is no twin, or linking failed (the caller builds it with uv)."""
    import shutil

    for twin in _twins(name, digest, packages, env_dir):
        if changed_since_built(twin) is not None:
            continue
        before = _signature(twin)
        known = shared_digests(twin)
        linked = True
        try:
            _link_tree(twin, env_dir)
        except OSError:
            shutil.rmtree(env_dir, ignore_errors=True)
            linked = False
        finally:
            after = _signature(twin)
            if after.keys() == before.keys() and all(after[rel][:3] + after[rel][4:] == entry[:3] + entry[4:]
                                                     for rel, entry in before.items()):
                _seal(twin, known)
                known = shared_digests(twin)
        return known if linked else None
    return None


def _link_tree(twin: str, env_dir: str) -> None:
    import shutil

    for current, dirs, files in os.walk(twin):
        rel = os.path.relpath(current, twin)
        target_dir = os.path.normpath(os.path.join(env_dir, rel))
        os.makedirs(target_dir, exist_ok=True)
        for name in dirs + files:
            source, target = os.path.join(current, name), os.path.join(target_dir, name)
            if os.path.islink(source):
                os.symlink(os.readlink(source), target)
                if name in dirs:
                    dirs.remove(name)
            elif name in dirs or (rel == "." and name == MARKER):
                continue
            elif rel == "bin" or (rel == "." and name == "pyvenv.cfg"):
                # Scripts name their environment's interpreter by path.
                with open(source, "rb") as handle:
                    content = handle.read().replace(os.fsencode(twin), os.fsencode(env_dir))
                with open(target, "wb") as handle:
                    handle.write(content)
                shutil.copymode(source, target)
            else:
                os.link(source, target)
