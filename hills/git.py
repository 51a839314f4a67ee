"""The only module that runs git: plumbing calls on a hill's `.vc` git dir."""

import os

import sh

from .errors import CommandFailed, EnvironmentProblem

# Pinned so a commit made by hills never depends on the caller's git config.
_IDENTITY = {
    "GIT_AUTHOR_NAME": "hills",
    "GIT_AUTHOR_EMAIL": "hills@localhost",
    "GIT_COMMITTER_NAME": "hills",
    "GIT_COMMITTER_EMAIL": "hills@localhost",
}


def clean_env(extra=None, keep_identity=True):
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


class Repo:
    """A hill's git dir (`git_dir`) with its work tree (`work_tree`)."""

    def __init__(self, work_tree, git_dir=None):
        self.work_tree = os.fspath(work_tree)
        self.git_dir = os.fspath(git_dir or os.path.join(self.work_tree, ".vc"))

    def run(self, subcommand, *args, input=None, env=None, ok_codes=(0,), binary=False):
        """Run `git <subcommand> args` and return stdout (str, or bytes when binary)."""
        argv = ["--git-dir=" + self.git_dir, "--work-tree=" + self.work_tree,
                "-c", "core.quotepath=off", "-c", "core.autocrlf=false",
                "-c", "commit.gpgsign=false", "-c", "core.hooksPath=" + os.path.join(self.git_dir, "hooks"),
                subcommand, *[str(a) for a in args]]
        full_env = clean_env(env)
        try:
            git = sh.Command("git")
        except sh.CommandNotFound:
            raise EnvironmentProblem("git is not installed or not on PATH",
                                     hint="install git and try again")
        try:
            result = git(*argv, _env=full_env, _in=input, _cwd=self.work_tree,
                         _ok_code=list(ok_codes), _return_cmd=True, _tty_out=False,
                         _decode_errors="replace" if not binary else "strict",
                         _no_out=False)
        except sh.ErrorReturnCode as exc:
            raise CommandFailed(["git", subcommand, *[str(a) for a in args]],
                                exc.exit_code, exc.stderr.decode("utf-8", "replace"))
        out = result.stdout
        self.last_exit_code = result.exit_code
        return out if binary else out.decode("utf-8", "replace")

    def init(self):
        os.makedirs(self.git_dir, exist_ok=True)
        sh_git = ["git", "init", "-q", "--bare", self.git_dir]
        try:
            sh.Command("git")(*sh_git[1:], _env=clean_env(), _tty_out=False)
        except sh.CommandNotFound:
            raise EnvironmentProblem("git is not installed or not on PATH",
                                     hint="install git and try again")
        except sh.ErrorReturnCode as exc:
            raise CommandFailed(sh_git, exc.exit_code, exc.stderr.decode("utf-8", "replace"))
        # A bare init marks the repo bare; we drive it with an explicit work tree.
        self.run("config", "core.bare", "false")
        self.run("config", "core.logAllRefUpdates", "true")

    def head(self):
        """The commit id HEAD points at, or None before the first commit."""
        out = self.run("rev-parse", "--verify", "-q", "HEAD^{commit}", ok_codes=(0, 1))
        return out.strip() or None

    def tree_of(self, commit):
        return self.run("rev-parse", "--verify", f"{commit}^{{tree}}").strip()

    def show_blob(self, rev, path, binary=False, env=None):
        """The content of `path` at `rev` ("" for the index), or None when absent."""
        out = self.run("cat-file", "blob", f"{rev}:{path}", ok_codes=(0, 128), binary=True, env=env)
        if self.last_exit_code != 0:
            return None
        return out if binary else out.decode("utf-8")

    def ls_tree(self, rev):
        """{path: (mode, object_id)} for every file at `rev`."""
        out = self.run("ls-tree", "-r", "-z", "--full-tree", rev)
        entries = {}
        for record in out.split("\0"):
            if not record:
                continue
            meta, path = record.split("\t", 1)
            mode, _kind, object_id = meta.split(" ")
            entries[path] = (mode, object_id)
        return entries


def lineage(folder):
    """`{"ref": "branch@sha", "dirty": bool}` when `folder` is a git checkout's
    top level or inside one, else None. Never raises: lineage is metadata."""
    env = clean_env()
    try:
        git = sh.Command("git")
        top = git("-C", folder, "rev-parse", "--show-toplevel", _env=env, _tty_out=False).strip()
        sha = git("-C", folder, "rev-parse", "--verify", "-q", "HEAD", _env=env, _tty_out=False).strip()
        branch = git("-C", folder, "rev-parse", "--abbrev-ref", "HEAD", _env=env, _tty_out=False).strip()
        dirty = bool(git("-C", folder, "--no-optional-locks", "status", "--porcelain", "--", ".",
                         _env=env, _tty_out=False).strip())
    except (sh.ErrorReturnCode, sh.CommandNotFound):
        return None
    return {"ref": f"{branch}@{sha}", "dirty": dirty, "root": top}
