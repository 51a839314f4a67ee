"""The git lineage of a submission (`submission_git`): read with one git
call inside a checkout, and with none where git could find no repository."""

import subprocess

import pytest

from hills import git


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
def test_a_folder_under_a_git_marker_asks_git(tmp_path, monkeypatch, marker):
    (tmp_path / marker).write_text("")  # a gitfile, or what a bare git dir holds
    folder = tmp_path / "sub"
    folder.mkdir()
    asked = []
    monkeypatch.setattr(git, "_git", lambda argv, *rest: asked.append(argv) or (128, b""))
    assert git.lineage(folder) is None
    assert asked and asked[0][:2] == ["-C", str(folder)]


def test_a_checkout_reached_through_a_link_is_found(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / "inner").mkdir(parents=True)
    (checkout / "inner" / "file.txt").write_text("x\n")
    sha = commit_in(checkout)
    link = tmp_path / "elsewhere" / "link"
    link.parent.mkdir()
    link.symlink_to(checkout / "inner")
    assert git.lineage(link) == {"ref": f"trunk@{sha}", "dirty": False}


def test_a_bare_git_dir_above_is_found_as_git_finds_it(tmp_path):
    bare = tmp_path / "repo.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    (bare / "objects" / "sub").mkdir()
    # git finds the bare repository, which has no commit: no lineage, but git was asked.
    assert git._may_be_in_repository(bare / "objects" / "sub")
    assert git.lineage(bare / "objects" / "sub") is None
