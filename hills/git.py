"""The only module that runs git: plumbing calls on a hill's `.vc` git dir."""

from __future__ import annotations

import os
import subprocess

from .errors import CommandFailed, EnvironmentProblem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Mapping
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


class Repo:
    """A hill's git dir (`git_dir`) with its work tree (`work_tree`)."""

    def __init__(self, work_tree: Path | str, git_dir: Path | str | None = None) -> None:
        self.work_tree = os.fspath(work_tree)
        self.git_dir = os.fspath(git_dir or os.path.join(self.work_tree, ".vc"))

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
        exit_code, out = _git(argv, clean_env(env), input, self.work_tree, ok_codes)
        self.last_exit_code = exit_code
        return out if binary else out.decode("utf-8", "replace")

    def append_note(self, ref: str, target: str, text: str) -> None:
        """`git notes --ref=REF append` of the one-line `text` to object
        `target`: written in Python in the plain case (hills.gitobjects,
        the same objects), else by git."""
        from . import gitobjects

        if not gitobjects.append_note(self.git_dir, ref, target, text, clean_env()):
            # Through stdin: a report can be far larger than one argument may be.
            self.run("notes", f"--ref={ref}", "append", "--file=-", target, input=text)

    def init(self) -> None:
        os.makedirs(self.git_dir, exist_ok=True)
        _git(["init", "-q", "--bare", self.git_dir], clean_env(), None, None, (0,))
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
    checkout, else None. One git call, none outside any repository. Never
    raises: lineage is metadata."""
    if not _may_be_in_repository(folder):
        return None
    try:
        exit_code, out = _git(["-C", os.fspath(folder), "--no-optional-locks", "status", "--porcelain=v2", "--branch",
                               "-z", "--untracked-files=normal", "--", "."], clean_env(), None, None, (0, 128))
    except (CommandFailed, EnvironmentProblem):
        return None
    if exit_code != 0:
        return None
    sha, branch, dirty = None, None, False
    for record in out.decode("utf-8", "replace").split("\0"):
        if record.startswith("# branch.oid "):
            sha = record.split(" ", 2)[2]
        elif record.startswith("# branch.head "):
            branch = record.split(" ", 2)[2]
        elif record and not record.startswith("#"):
            dirty = True
    if not sha or sha == "(initial)":
        return None
    return {"ref": f"{branch}@{sha}", "dirty": dirty}


def _may_be_in_repository(folder: Path | str) -> bool:
    """False only when git would find no repository from `folder`: no
    folder from it up to the root holds a `.git` (a folder, a gitfile or a
    link) or a `HEAD` (a bare git dir, as git checks each folder for).
    git walks up the physical path, as realpath gives it; the GIT_*
    variables that could point it elsewhere are stripped by clean_env."""
    current = os.path.realpath(folder)
    while True:
        if os.path.lexists(os.path.join(current, ".git")) or os.path.lexists(os.path.join(current, "HEAD")):
            return True
        parent = os.path.dirname(current)
        if parent == current:
            return False
        current = parent
