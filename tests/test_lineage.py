"""The git lineage of a submission (`submission_git`): branch and commit
read from the checkout's files, dirty asked of git on a git dir of hills'
own, so nothing of the checkout's configuration runs; no git at all where
git could find no checkout."""

import os
import subprocess

import pytest

from testing.eval_fixtures import SCORE_EVAL, hills, make_hill
from hills.base import git


@pytest.fixture
def no_git(monkeypatch):
    """Fail the test if git is run."""
    def refused(*args, **kwargs):
        raise AssertionError("git was run")

    monkeypatch.setattr(git, "_git", refused)


def commit_in(folder):
    for argv in (["init", "-q", "-b", "trunk"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t",
                                                               "commit", "-q", "-m", "x"]):
        subprocess.run(["git", *argv], cwd=folder, check=True, capture_output=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, check=True, capture_output=True,
                          text=True).stdout.strip()


def test_a_folder_outside_any_repository_has_no_lineage_and_costs_no_git(tmp_path, no_git):
    folder = tmp_path / "plain" / "deeper"
    folder.mkdir(parents=True)
    assert git.lineage(folder) is None


@pytest.mark.parametrize("marker", [".git", "HEAD"])
def test_a_marker_that_is_no_checkout_has_no_lineage_and_costs_no_git(tmp_path, no_git, marker):
    # An empty gitfile names no git dir; a HEAD is what a bare git dir
    # holds, which has no work tree: git would find no checkout either.
    (tmp_path / marker).write_text("")
    folder = tmp_path / "sub"
    folder.mkdir()
    assert git.lineage(folder) is None


def test_a_checkout_reached_through_a_link_is_found(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / "inner").mkdir(parents=True)
    (checkout / "inner" / "file.txt").write_text("x\n")
    sha = commit_in(checkout)
    link = tmp_path / "elsewhere" / "link"
    link.parent.mkdir()
    link.symlink_to(checkout / "inner")
    assert git.lineage(link) == {"ref": f"trunk@{sha}", "dirty": False, "subject": "x"}


def test_a_folder_inside_a_bare_git_dir_has_no_lineage(tmp_path, no_git):
    bare = tmp_path / "repo.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    (bare / "objects" / "sub").mkdir()
    assert git.lineage(bare / "objects" / "sub") is None


def test_a_linked_worktree_and_a_detached_head_are_read_from_files(tmp_path):
    main = tmp_path / "main"
    main.mkdir()
    (main / "file.txt").write_text("x\n")
    sha = commit_in(main)
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(tmp_path / "linked")], cwd=main, check=True)
    assert git.lineage(tmp_path / "linked") == {"ref": f"(detached)@{sha}", "dirty": False, "subject": "x"}
    subprocess.run(["git", "pack-refs", "--all"], cwd=main, check=True)
    assert git.lineage(main) == {"ref": f"trunk@{sha}", "dirty": False, "subject": "x"}
    (tmp_path / "linked" / "new.txt").write_text("y\n")
    assert git.lineage(tmp_path / "linked")["dirty"] is True


def test_untracked_files_the_checkout_excludes_are_not_dirty(tmp_path):
    folder = tmp_path / "checkout"
    folder.mkdir()
    (folder / "file.txt").write_text("x\n")
    sha = commit_in(folder)
    (folder / ".git" / "info").mkdir(exist_ok=True)
    (folder / ".git" / "info" / "exclude").write_text("*.log\n")
    (folder / "run.log").write_text("noise\n")
    assert git.lineage(folder) == {"ref": f"trunk@{sha}", "dirty": False, "subject": "x"}


# ---------------------------------------------- a checkout's config never runs

MARKER_NAME = "payload-ran"


def hostile_checkout(tmp_path, how):
    """A committed checkout whose own repository would run a command that
    writes a marker file on the next `git status`; (folder, marker)."""
    folder = tmp_path / "checkout"
    folder.mkdir()
    (folder / "score.txt").write_text("1\n")
    marker = tmp_path / MARKER_NAME
    payload = f"touch {marker}"
    if how == "filter":
        (folder / ".gitattributes").write_text("*.txt filter=evil\n")
    sha = commit_in(folder)
    config = ["git", "-C", str(folder), "config"]
    if how == "fsmonitor":
        subprocess.run([*config, "core.fsmonitor", payload], check=True)
    elif how == "filter":
        subprocess.run([*config, "filter.evil.clean", f"sh -c '{payload}; cat'"], check=True)
        # A changed stat makes git read the file again, through the filter.
        os.utime(folder / "score.txt", (1, 1))
    elif how == "submodule":
        inner = folder / "inner"
        inner.mkdir()
        (inner / "f").write_text("z\n")
        commit_in(inner)
        subprocess.run(["git", "-C", str(inner), "config", "core.fsmonitor", payload], check=True)
        subprocess.run(["git", "-C", str(folder), "update-index", "--add", "--cacheinfo",
                        f"160000,{commit_in_head(inner)},inner"], check=True)
        subprocess.run(["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                        "-m", "sub"], check=True)
    return folder, marker, sha


def commit_in_head(folder):
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.mark.parametrize("how", ["fsmonitor", "filter", "submodule"])
def test_a_checkouts_own_config_runs_nothing_when_lineage_is_read(tmp_path, how):
    folder, marker, sha = hostile_checkout(tmp_path, how)
    found = git.lineage(folder)
    assert not marker.exists(), f"the checkout's {how} ran"
    assert found is not None and found["ref"] == f"trunk@{commit_in_head(folder)}"
    # Control: git run the ordinary way, on the checkout's own config, runs it.
    subprocess.run(["git", "status", "--porcelain", "--ignore-submodules=none"], cwd=folder, capture_output=True)
    assert marker.exists(), f"the {how} payload is not live: the test proves nothing"


def test_a_submissions_own_fsmonitor_does_not_run_in_an_eval(tmp_path):
    make_hill("lineaged", SCORE_EVAL)
    folder, marker, sha = hostile_checkout(tmp_path, "fsmonitor")
    scored = hills("eval", folder, "-H", "lineaged")
    assert scored.code == 0, scored.output
    assert scored.report["submission_git"] == {"ref": f"trunk@{sha}", "dirty": False, "subject": "x"}
    assert not marker.exists(), "hills eval ran the submission's core.fsmonitor"
    subprocess.run(["git", "status", "--porcelain"], cwd=folder, capture_output=True)
    assert marker.exists(), "the fsmonitor payload is not live: the test proves nothing"


def test_a_sha256_repository_keeps_its_lineage(tmp_path):
    # The object format is the one key of the checkout's config the status
    # call cannot do without; it is carried over as a plain word.
    folder = tmp_path / "s256"
    folder.mkdir()
    subprocess.run(["git", "init", "-q", "--object-format=sha256", "-b", "main"], cwd=folder, check=True)
    (folder / "f.txt").write_text("a\n")
    subprocess.run(["git", "add", "."], cwd=folder, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x"], cwd=folder,
                   check=True)
    sha = commit_in_head(folder)
    assert len(sha) == 64
    assert git.lineage(folder) == {"ref": f"main@{sha}", "dirty": False, "subject": "x"}
    (folder / "f.txt").write_text("b\n")
    assert git.lineage(folder)["dirty"] is True


def test_the_subject_is_the_first_paragraph_on_one_line_and_only_a_loose_commit_has_one(tmp_path, no_git):
    folder = tmp_path / "checkout"
    folder.mkdir()
    (folder / "file.txt").write_text("x\n")
    message = "tune the\nlearning rate\x1b[31m\n\nwhy: the loss plateaued"
    for argv in (["init", "-q", "-b", "trunk"], ["add", "."],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--cleanup=verbatim", "-m", message]):
        subprocess.run(["git", *argv], cwd=folder, check=True, capture_output=True)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, check=True, capture_output=True,
                         text=True).stdout.strip()
    common = str(folder / ".git")
    assert git._loose_subject(common, sha) == "tune the learning rate [31m"
    subprocess.run(["git", "gc", "-q"], cwd=folder, check=True)
    assert not (folder / ".git" / "objects" / sha[:2] / sha[2:]).exists(), "gc left the commit loose"
    assert git._loose_subject(common, sha) is None
