"""The only module that runs git: plumbing calls on a hill's `.vc` git dir."""

from __future__ import annotations

import os
import subprocess

from .errors import CommandFailed, EnvironmentProblem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping
    from pathlib import Path
    from typing import Literal, overload

# Pinned so a commit made by hills never depends on the caller's git config.
_IDENTITY = {
    "GIT_AUTHOR_NAME": "hills",
    "GIT_AUTHOR_EMAIL": "hills@localhost",
    "GIT_COMMITTER_NAME": "hills",
    "GIT_COMMITTER_EMAIL": "hills@localhost",
}


def clean_env(extra: Mapping[str, str] | None = None, keep_identity: bool = True) -> dict[str, str]:
    """A deliberate copy of os.environ without GIT_* (they would redirect git
    to another repository, e.g. when called from a hook)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    if keep_identity:
        for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME",
                    "GIT_COMMITTER_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):
            if key in os.environ:
                env[key] = os.environ[key]
    # The fallback identity: without it commit-tree fails on a machine with no
    # user.name/user.email configured, and a commit would depend on that config.
    for key, value in _IDENTITY.items():
        env.setdefault(key, value)
    env.setdefault("GIT_TERMINAL_PROMPT", "0")
    env["GIT_PAGER"] = "cat"
    env["GIT_CONFIG_NOSYSTEM"] = env.get("GIT_CONFIG_NOSYSTEM", "1")
    env["LC_ALL"] = "C"
    if extra:
        env.update(extra)
    return env


def _git(argv: list[str], env: Mapping[str, str], input: str | bytes | None, cwd: str | None,
         ok_codes: Collection[int]) -> tuple[int, bytes]:
    """Run git with an argument list (never a shell) and a deliberate
    environment; return (exit code, stdout bytes). A failure raises
    CommandFailed with the command, its exit code and its stderr."""
    if isinstance(input, str):
        input = input.encode("utf-8")
    try:
        done = subprocess.run(["git", *argv], env=env, cwd=cwd, input=input,
                              stdin=None if input is not None else subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise EnvironmentProblem("git is not installed or not on PATH", hint="install git and try again")
    if done.returncode not in ok_codes:
        raise CommandFailed(["git", *argv], done.returncode, done.stderr.decode("utf-8", "replace"))
    return done.returncode, done.stdout


# No system or global config: for git calls on a work tree whose files came
# from elsewhere (a bundle being unbundled), whose `.gitattributes` could
# otherwise pick a driver the user's global config defines.
NEUTRAL_CONFIG = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_ATTR_NOSYSTEM": "1"}


class Repo:
    """A hill's git dir (`git_dir`) with its work tree (`work_tree`);
    `neutral` runs git with no config but the git dir's own (hills')."""

    def __init__(self, work_tree: Path | str, git_dir: Path | str | None = None, neutral: bool = False) -> None:
        self.work_tree = os.fspath(work_tree)
        self.git_dir = os.fspath(git_dir or os.path.join(self.work_tree, ".vc"))
        self.neutral = neutral

    if TYPE_CHECKING:
        @overload
        def run(self, subcommand: str, *args: object, input: str | bytes | None = None,
                env: Mapping[str, str] | None = None, ok_codes: Collection[int] = (0,),
                binary: Literal[False] = False) -> str: ...

        @overload
        def run(self, subcommand: str, *args: object, input: str | bytes | None = None,
                env: Mapping[str, str] | None = None, ok_codes: Collection[int] = (0,),
                binary: Literal[True]) -> bytes: ...

    def run(self, subcommand: str, *args: object, input: str | bytes | None = None,
            env: Mapping[str, str] | None = None, ok_codes: Collection[int] = (0,),
            binary: bool = False) -> str | bytes:
        """Run `git <subcommand> args` and return stdout (str, or bytes when binary)."""
        argv = ["--git-dir=" + self.git_dir, "--work-tree=" + self.work_tree,
                "-c", "core.quotepath=off", "-c", "core.autocrlf=false",
                "-c", "commit.gpgsign=false", "-c", "core.hooksPath=" + os.path.join(self.git_dir, "hooks"),
                subcommand, *[str(a) for a in args]]
        exit_code, out = _git(argv, self._env(env), input, self.work_tree, ok_codes)
        self.last_exit_code = exit_code
        return out if binary else out.decode("utf-8", "replace")

    def _env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = clean_env(extra)
        if self.neutral:
            env.update(NEUTRAL_CONFIG)
        return env

    def append_note(self, ref: str, target: str, text: str) -> None:
        """`git notes --ref=REF append` of the one-line `text` to object
        `target`: written in Python in the plain case (hills.base.gitobjects,
        the same objects), else by git."""
        from . import gitobjects

        if not gitobjects.append_note(self.git_dir, ref, target, text, clean_env()):
            # Through stdin: a report can be far larger than one argument may be.
            self.run("notes", f"--ref={ref}", "append", "--file=-", target, input=text)

    def replace_note(self, ref: str, target: str, make: Callable[[str | None], str]) -> None:
        """Make the note of object `target` under `ref` the one line
        `make(its text now, or None)`, as `git notes --ref=REF add -f`:
        written in Python in the plain case (hills.base.gitobjects, the same
        objects), else by git. The caller holds the notes' lock."""
        from . import gitobjects

        if gitobjects.replace_note(self.git_dir, ref, target, make, clean_env()):
            return
        shown = self.run("notes", f"--ref={ref}", "show", target, ok_codes=(0, 1))
        text = make(shown if self.last_exit_code == 0 else None)
        # Through stdin: a report can be far larger than one argument may be.
        self.run("notes", f"--ref={ref}", "add", "-f", "--file=-", target, input=text)

    def init(self) -> None:
        os.makedirs(self.git_dir, exist_ok=True)
        _git(["init", "-q", "--bare", self.git_dir], self._env(), None, None, (0,))
        # A bare init marks the repo bare; we drive it with an explicit work tree.
        self.run("config", "core.bare", "false")
        self.run("config", "core.logAllRefUpdates", "true")

    def head(self) -> str | None:
        """The commit id HEAD points at, or None before the first commit."""
        commit_id = self._head_from_files()
        if commit_id:
            return commit_id
        out = self.run("rev-parse", "--verify", "-q", "HEAD^{commit}", ok_codes=(0, 1))
        return out.strip() or None

    def _head_from_files(self) -> str | None:
        """HEAD read straight from `.vc` for the common case (a loose branch
        ref), saving a git process on every eval; None means "ask git"."""
        try:
            with open(os.path.join(self.git_dir, "HEAD"), encoding="ascii") as handle:
                head = handle.read().strip()
            if not head.startswith("ref: refs/heads/"):
                return None
            ref = head[5:]
            with open(os.path.join(self.git_dir, *ref.split("/")), encoding="ascii") as handle:
                commit_id = handle.read().strip()
        except (OSError, UnicodeDecodeError):
            return None
        if len(commit_id) == 40 and all(c in "0123456789abcdef" for c in commit_id):
            return commit_id
        return None

    def tree_of(self, commit: str) -> str:
        return self._tree_from_loose(commit) or self.run("rev-parse", "--verify", f"{commit}^{{tree}}").strip()

    def _tree_from_loose(self, commit: str) -> str | None:
        """The tree of `commit` read from its loose object, as a commit hills
        made is until git packs it, saving a git process on a re-commit; the
        object must hash to its name. None means "ask git"."""
        import hashlib
        import zlib

        if len(commit) != 40 or not all(c in "0123456789abcdef" for c in commit):
            return None
        try:
            with open(os.path.join(self.git_dir, "objects", commit[:2], commit[2:]), "rb") as handle:
                data = zlib.decompress(handle.read())
        except (OSError, zlib.error):
            return None
        header, _, body = data.partition(b"\0")
        if not header.startswith(b"commit ") or hashlib.sha1(data).hexdigest() != commit:
            return None
        tree = body[5:45].decode("ascii", "replace")
        if not body.startswith(b"tree ") or body[45:46] != b"\n" or not all(c in "0123456789abcdef" for c in tree):
            return None
        return tree

    if TYPE_CHECKING:
        @overload
        def show_blob(self, rev: str, path: str, binary: Literal[False] = False,
                      env: Mapping[str, str] | None = None) -> str | None: ...

        @overload
        def show_blob(self, rev: str, path: str, binary: Literal[True],
                      env: Mapping[str, str] | None = None) -> bytes | None: ...

    def show_blob(self, rev: str, path: str, binary: bool = False,
                  env: Mapping[str, str] | None = None) -> str | bytes | None:
        """The content of `path` at `rev` ("" for the index), or None when absent."""
        out = self.run("cat-file", "blob", f"{rev}:{path}", ok_codes=(0, 128), binary=True, env=env)
        if self.last_exit_code != 0:
            return None
        return out if binary else out.decode("utf-8")

    def ls_tree(self, rev: str) -> dict[str, tuple[str, str]]:
        """{path: (mode, object_id)} for every file at `rev`."""
        return _entries(self.run("ls-tree", "-r", "-z", "--full-tree", rev), id_field=2)

    def ls_index(self, env: Mapping[str, str] | None = None) -> dict[str, tuple[str, str]]:
        """{path: (mode, object_id)} for every entry of the index (`env` may
        name another one with GIT_INDEX_FILE)."""
        return _entries(self.run("ls-files", "-z", "--cached", "--stage", env=env), id_field=1)

    def object_sizes(self, object_ids: Collection[str]) -> dict[str, tuple[str, int]]:
        """{object_id: (type, size)} for the objects that exist."""
        if not object_ids:
            return {}
        out = self.run("cat-file", "--batch-check=%(objectname) %(objecttype) %(objectsize)",
                       input="\n".join(sorted(set(object_ids))) + "\n")
        found = {}
        for line in out.splitlines():
            parts = line.split(" ")
            if len(parts) == 3 and parts[2].isdigit():
                found[parts[0]] = (parts[1], int(parts[2]))
        return found

    def batch_check(self, names: list[str]) -> list[tuple[str, str, int] | None]:
        """(object id, type, size) for each of `names` (object ids or
        `REV:PATH`), in order; None where there is no such object."""
        if not names:
            return []
        out = self.run("cat-file", "--batch-check=%(objectname) %(objecttype) %(objectsize)",
                       input="\n".join(names) + "\n")
        answers: list[tuple[str, str, int] | None] = []
        for line in out.splitlines():
            parts = line.split(" ")
            answers.append((parts[0], parts[1], int(parts[2])) if len(parts) == 3 and parts[2].isdigit() else None)
        if len(answers) != len(names):
            raise CommandFailed(["git", "cat-file", "--batch-check"], 0,
                                f"{len(answers)} answers to {len(names)} object names")
        return answers

    def ref_tips(self) -> list[str]:
        """The object id of every ref: the tips of all history but HEAD and
        the reflogs. Read from `.vc/refs` and `.vc/packed-refs` when the refs
        are kept there as files, saving a git process on every commit; else
        asked of git."""
        tips = self._tips_from_files()
        if tips is None:
            tips = sorted(set(self.run("for-each-ref", "--format=%(objectname)").split()))
        return tips

    def _tips_from_files(self) -> list[str] | None:
        """The ref tips as the files say, or None for anything unexpected."""
        if os.path.exists(os.path.join(self.git_dir, "reftable")):
            return None
        named: dict[str, str] = {}
        try:
            with open(os.path.join(self.git_dir, "packed-refs"), encoding="ascii") as handle:
                for line in handle:
                    if not line.startswith(("#", "^")):
                        object_id, _, name = line.strip().partition(" ")
                        named[name] = object_id
        except FileNotFoundError:
            pass
        except (OSError, UnicodeDecodeError):
            return None
        root = os.path.join(self.git_dir, "refs")
        for folder, _dirs, files in os.walk(root):
            for file_name in files:
                if file_name.endswith(".lock"):  # a ref being written: git renames it into place
                    continue
                full = os.path.join(folder, file_name)
                try:
                    with open(full, encoding="ascii") as handle:
                        text = handle.read().strip()
                except (OSError, UnicodeDecodeError):
                    return None
                if not text.startswith("ref: "):  # a symbolic ref names another one, listed in its own right
                    # A loose ref overrides its packed copy.
                    named["refs/" + os.path.relpath(full, root).replace(os.sep, "/")] = text
        if not all(len(tip) == 40 and all(c in "0123456789abcdef" for c in tip) for tip in named.values()):
            return None
        return sorted(set(named.values()))


def _entries(out: str, id_field: int) -> dict[str, tuple[str, str]]:
    """Parse `ls-tree -z` or `ls-files --stage -z` records."""
    entries = {}
    for record in out.split("\0"):
        if not record:
            continue
        meta, path = record.split("\t", 1)
        fields = meta.split(" ")
        entries[path] = (fields[0], fields[id_field])
    return entries


def lineage(folder: Path | str) -> dict[str, str | bool] | None:
    """`{"ref": "branch@sha", "dirty": bool}` when `folder` is inside a git
    checkout, with `subject`, the commit's subject line, when the commit is
    a loose object (`_loose_subject`); else None. Never raises: lineage is
    metadata.

    The checkout is not hills' own, so nothing of its repository's
    configuration may run (a `core.fsmonitor`, a filter, a hook): the
    branch and commit are read from its files, and the one git call that
    says whether it is dirty runs on a git dir of hills' own making
    (`_status_dir`), which borrows the repository's objects, index and
    exclude patterns, data all, and none of its configuration."""
    found = _find_checkout(os.fspath(folder))
    if found is None:
        return None
    work_tree, git_dir, common_dir = found
    head = _read_head(git_dir, common_dir)
    if head is None:
        return None
    branch, sha = head
    dirty = _dirty(work_tree, git_dir, common_dir, sha, os.path.realpath(folder))
    if dirty is None:
        return None
    lineage_of: dict[str, str | bool] = {"ref": f"{branch}@{sha}", "dirty": dirty}
    subject = _loose_subject(common_dir, sha)
    if subject:
        lineage_of["subject"] = subject
    return lineage_of


# A subject names the attempt in the journal: a line, as a note is (-m).
MAX_SUBJECT = 200


def _loose_subject(common_dir: str, sha: str) -> str | None:
    """The subject of commit `sha` (its message's first paragraph, on one
    line, as git's %s), read from its loose object file: a commit a climber
    just made is loose, and a file read costs no git process and runs
    nothing of the checkout. None for a packed commit, or anything odd.
    Characters that are not printable become spaces; at most MAX_SUBJECT."""
    import zlib

    try:
        with open(os.path.join(common_dir, "objects", sha[:2], sha[2:]), "rb") as handle:
            packed = handle.read(1 << 20)
        raw = zlib.decompressobj().decompress(packed, 1 << 16)
    except (OSError, zlib.error):
        return None
    header, _, body = raw.partition(b"\0")
    if not header.startswith(b"commit "):
        return None
    _, _, message = body.partition(b"\n\n")
    paragraph = message.split(b"\n\n", 1)[0].decode("utf-8", "replace")
    line = "".join(char if char.isprintable() else " " for char in " ".join(paragraph.split("\n")))
    return " ".join(line.split())[:MAX_SUBJECT] or None


# What a checkout's own config may tell the status call: how files are
# compared, never a command. A key not here is left at git's default.
_BORROWED_KEYS = {"core.filemode", "core.symlinks", "core.ignorecase", "core.autocrlf", "core.eol",
                  "core.checkstat", "core.trustctime", "core.precomposeunicode", "extensions.objectformat"}
_PLAIN_VALUE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_HEX = frozenset("0123456789abcdef")


def _find_checkout(folder: str) -> tuple[str, str, str] | None:
    """(work tree, git dir, common dir) of the checkout git would find from
    `folder`, read without git: the first folder up from it holding `.git`
    (a folder, or a gitfile naming one), on the same file system, as git
    walks the physical path. None where git would find no work tree (no
    `.git`; a bare git dir; a `.git` that is neither) or where the
    repository is not the caller's (git's own safe.directory rule)."""
    current = os.path.realpath(folder)
    try:
        device = os.stat(current).st_dev
    except OSError:
        return None
    while True:
        marker = os.path.join(current, ".git")
        if os.path.isdir(marker):
            git_dir = os.path.realpath(marker)
            break
        if os.path.isfile(marker):
            named = _gitfile_target(marker)
            if named is None:
                return None
            git_dir = named
            break
        if os.path.lexists(marker) or os.path.lexists(os.path.join(current, "HEAD")):
            return None  # a broken marker, or a bare git dir: no work tree
        parent = os.path.dirname(current)
        try:
            if parent == current or os.stat(parent).st_dev != device:
                return None
        except OSError:
            return None
        current = parent
    common_dir = git_dir
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as handle:
            common_dir = os.path.realpath(os.path.join(git_dir, handle.read().strip()))
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError):
        return None
    try:
        if os.stat(git_dir).st_uid != os.geteuid():
            return None
    except OSError:
        return None
    return current, git_dir, common_dir


def _gitfile_target(path: str) -> str | None:
    """The git dir a gitfile (`gitdir: PATH`, a linked worktree's or a
    submodule's) names, or None when it names none."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(4096).strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir: "):
        return None
    target = os.path.realpath(os.path.join(os.path.dirname(path), text[8:].strip()))
    return target if os.path.isdir(target) else None


def _read_head(git_dir: str, common_dir: str) -> tuple[str, str] | None:
    """(branch, commit id) of HEAD, `(detached)` for a detached one, read
    from the files; None before the first commit or for a ref kept
    anywhere but a loose file or packed-refs (a reftable)."""
    try:
        with open(os.path.join(git_dir, "HEAD"), encoding="utf-8") as handle:
            head = handle.read(4096).strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not head.startswith("ref: "):
        return ("(detached)", head) if _is_object_id(head) else None
    ref = head[5:].strip()
    if not ref.startswith("refs/heads/") or ".." in ref.split("/"):
        return None
    sha = _read_ref(common_dir, ref)
    return (ref[len("refs/heads/"):], sha) if sha is not None else None


def _read_ref(common_dir: str, ref: str) -> str | None:
    try:
        with open(os.path.join(common_dir, *ref.split("/")), encoding="ascii") as handle:
            text = handle.read(200).strip()
        return text if _is_object_id(text) else None
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError):
        return None
    try:
        with open(os.path.join(common_dir, "packed-refs"), encoding="utf-8") as handle:
            for line in handle:
                object_id, _, name = line.strip().partition(" ")
                if name == ref and _is_object_id(object_id):
                    return object_id
    except (OSError, UnicodeDecodeError):
        pass
    return None


def _is_object_id(text: str) -> bool:
    return len(text) in (40, 64) and set(text) <= _HEX


def _borrowed_config(common_dir: str) -> dict[str, str]:
    """The `_BORROWED_KEYS` of a checkout's own config file, read as text
    (git's syntax, as far as plain `key = value` lines go), each value a
    plain word; nothing else of that file is read, and no include is
    followed."""
    values: dict[str, str] = {}
    try:
        with open(os.path.join(common_dir, "config"), encoding="utf-8") as handle:
            lines = handle.read(1 << 20).splitlines()
    except (OSError, UnicodeDecodeError):
        return values
    section = ""
    for raw in lines:
        line = raw.strip()
        if line.startswith("["):
            name = line[1:line.find("]")] if "]" in line else ""
            section = name.strip().lower() if " " not in name.strip() and "." not in name else ""
            line = line[line.find("]") + 1:].strip() if "]" in line else ""
        if not line or line.startswith(("#", ";")) or not section:
            continue
        key, equals, value = line.partition("=")
        full = f"{section}.{key.strip().lower()}"
        value = value.split("#")[0].split(";")[0].strip() if equals else "true"
        if full in _BORROWED_KEYS and value and set(value) <= _PLAIN_VALUE:
            values[full] = value
    return values


def _status_dir(folder: str, git_dir: str, common_dir: str, sha: str) -> str:
    """Fill `folder` as a git dir of hills' own for one status call: HEAD
    at `sha`, the checkout's objects by `alternates`, its exclude patterns
    and shared index files, and a config hills wrote, which names no
    command (no fsmonitor, hook, filter, driver, pager, helper)."""
    borrowed = _borrowed_config(common_dir)
    objectformat = borrowed.pop("extensions.objectformat", None)
    os.makedirs(os.path.join(folder, "objects", "info"))
    os.makedirs(os.path.join(folder, "refs"))
    os.makedirs(os.path.join(folder, "info"))
    lines = ["[core]", f"\trepositoryformatversion = {1 if objectformat else 0}", "\tbare = false",
             "\tfsmonitor = false", "\tuntrackedCache = false", f"\thooksPath = {os.devnull}"]
    lines += [f"\t{key.split('.', 1)[1]} = {value}" for key, value in sorted(borrowed.items())]
    if objectformat:
        lines += ["[extensions]", f"\tobjectformat = {objectformat}"]
    with open(os.path.join(folder, "config"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    with open(os.path.join(folder, "HEAD"), "w", encoding="ascii") as handle:
        handle.write(sha + "\n")
    with open(os.path.join(folder, "objects", "info", "alternates"), "w", encoding="utf-8") as handle:
        handle.write(os.path.join(common_dir, "objects") + "\n")
    exclude = os.path.join(common_dir, "info", "exclude")
    if os.path.isfile(exclude):
        os.symlink(exclude, os.path.join(folder, "info", "exclude"))
    for name in os.listdir(git_dir):
        if name.startswith("sharedindex."):  # a split index reads its base from the git dir
            os.symlink(os.path.join(git_dir, name), os.path.join(folder, name))
    return folder


def _dirty(work_tree: str, git_dir: str, common_dir: str, sha: str, folder: str) -> bool | None:
    """Whether `git status` lists anything under `folder` (tracked changes
    or untracked files), asked on a git dir of hills' own; None when git
    cannot say."""
    import shutil
    import tempfile

    scratch = tempfile.mkdtemp(prefix="hills-lineage-")
    try:
        view = _status_dir(os.path.join(scratch, "git"), git_dir, common_dir, sha)
        env = clean_env({"GIT_INDEX_FILE": os.path.join(git_dir, "index"), "GIT_CONFIG_GLOBAL": os.devnull,
                         "GIT_CONFIG_NOSYSTEM": "1", "GIT_ATTR_NOSYSTEM": "1", "GIT_OPTIONAL_LOCKS": "0",
                         "GIT_NO_REPLACE_OBJECTS": "1"})
        # --ignore-submodules: a submodule's status is its own repository's,
        # config and all; the submission's lineage does not look inside one.
        exit_code, out = _git(["--git-dir=" + view, "--work-tree=" + work_tree, "-C", folder,
                               "--no-optional-locks", "status", "--porcelain=v2", "-z", "--untracked-files=normal",
                               "--ignore-submodules=all", "--", "."], env, None, None, (0, 128))
    except (OSError, CommandFailed, EnvironmentProblem):
        return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if exit_code != 0:
        return None
    return any(record and not record.startswith("#") for record in out.decode("utf-8", "replace").split("\0"))
