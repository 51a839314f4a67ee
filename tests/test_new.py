"""`hills new` and `hills examples`: what a new hill is made of, which names
and templates are refused, and that a refused or failed creation leaves
nothing behind and never touches the user's own repository."""

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from testing.util import BIN_DIR, run_bin, run_cli
from hills.disk import hill

TEMPLATES = ["bin-packing", "circle-packing", "dataset", "default", "nanogpt-10min"]


def tree_snapshot(folder):
    """{relative path: bytes} of every file under `folder`."""
    found = {}
    for current, _dirs, files in os.walk(folder):
        for name in files:
            path = os.path.join(current, name)
            with open(path, "rb") as handle:
                found[os.path.relpath(path, folder)] = handle.read()
    return found


def test_new_lays_out_the_hill(project, hermetic):
    result = run_cli("new", "circle-packing", "-t", "circle-packing")
    assert result.code == 0, result.output
    hill = project / ".hills" / "circle-packing"
    assert result.out.strip() == str(hill)
    assert "created .hills/circle-packing" in result.err
    assert (project / ".hills" / ".gitignore").read_text() == "*\n"
    for rel in ("hill.yaml", "README.md", "eval.py", "pyproject.toml", "uv.lock", "examples/grid/circles.json",
                "tests/test_eval.py"):
        assert (hill / rel).is_file(), rel
    assert "{{name}}" not in (hill / "hill.yaml").read_text()
    hook = hill / ".vc" / "hooks" / "pre-commit"
    assert hook.is_file() and hook.stat().st_mode & stat.S_IXUSR
    assert "hills hook pre-commit" in hook.read_text()
    head = run_bin("git", "--git-dir=.vc", "symbolic-ref", "HEAD", cwd=hill)
    assert head.out.strip() == "refs/heads/main"
    registry = json.loads((hermetic.hills_home / "registry.json").read_text())
    assert registry["hills"]["circle-packing"] == [{"path": str(hill), "tree_hash": None,
                                                     "template": "circle-packing"}]
    key = hermetic.hills_home / "key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    # No staging folder is left next to the hill.
    assert sorted(os.listdir(project / ".hills")) == [".gitignore", "circle-packing"]


def test_new_never_touches_the_users_repository(project):
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "notes.txt").write_text("mine\n")
    subprocess.run(["git", "add", "notes.txt"], cwd=project, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "user commit"], cwd=project, check=True)
    before = tree_snapshot(project / ".git")
    result = run_cli("new", "demo")
    assert result.code == 0, result.output
    status = run_bin("git", "status", "--porcelain", "--untracked-files=all", cwd=project)
    assert status.code == 0 and status.out == ""
    assert tree_snapshot(project / ".git") == before
    assert (project / "notes.txt").read_text() == "mine\n"


def test_examples_lists_every_template(project):
    result = run_cli("examples")
    assert result.code == 0
    names = [line.split()[0] for line in result.out.splitlines()]
    assert names == TEMPLATES
    assert "circles" in result.out
    # One line each: the name, then the first line of its description.
    assert len(result.out.splitlines()) == len(TEMPLATES)
    lines = dict(line.split(None, 1) for line in result.out.splitlines())
    assert lines["nanogpt-10min"].startswith("Train a small GPT on Python source bytes within a wall-clock budget")
    assert lines["dataset"].startswith("Predict the digit in 8x8 handwritten-looking images")
    as_json = json.loads(run_cli("examples", "--json").out)
    assert list(as_json) == TEMPLATES and all(as_json.values())


@pytest.mark.slow
def test_a_template_with_make_data_builds_its_data_at_creation(project):
    result = run_cli("new", "digits", "-t", "dataset")
    assert result.code == 0, result.output
    hill = project / ".hills" / "digits"
    for rel in ("data/train.csv", "data/validation/inputs.csv", "private/holdout/inputs.csv",
                "private/labels/validation.csv", "private/labels/holdout.csv", "make_data.py"):
        assert (hill / rel).is_file(), rel
    assert (hill / "data" / "train.csv").read_text().splitlines()[0].endswith(",p63,label")
    # The images are drawn from fresh randomness: a second hill holds others.
    again = run_cli("new", "digits-2", "-t", "dataset")
    assert again.code == 0, again.output
    for rel in ("data/train.csv", "private/holdout/inputs.csv", "private/labels/holdout.csv"):
        assert (hill / rel).read_bytes() != (project / ".hills" / "digits-2" / rel).read_bytes(), rel


@pytest.mark.parametrize("name", ["Bad", "../x", "a/b", "", "a" * 64, "-x", "x.lock", "a..b"])
def test_bad_names_are_refused_and_leave_nothing(project, hermetic, name):
    result = run_cli("new", "--", name)
    assert result.code == 2, result.output
    assert result.error_lines == [f"error: invalid hill name '{name}'"]
    assert "hint: use 1-63 lowercase letters" in result.err
    assert not (project / ".hills").exists()
    assert not (project.parent / "x").exists()
    assert os.listdir(project) == []


def test_longest_name_is_accepted(project):
    assert run_cli("new", "a" * 63).code == 0


def test_existing_hill_name_is_refused(project):
    assert run_cli("new", "demo").code == 0
    before = tree_snapshot(project / ".hills")
    result = run_cli("new", "demo", "-t", "circle-packing")
    assert result.code == 2
    assert result.error_lines[0].startswith("error: hill 'demo' already exists at ")
    assert tree_snapshot(project / ".hills") == before


def test_a_name_registered_in_another_project_is_accepted(project, tmp_path, monkeypatch):
    assert run_cli("new", "demo").code == 0
    other = tmp_path / "other-project"
    other.mkdir()
    monkeypatch.chdir(other)
    result = run_cli("new", "demo")
    assert result.code == 0, result.output
    assert result.out.strip() == str(other / ".hills" / "demo")


def test_unknown_template_names_the_available_ones(project):
    result = run_cli("new", "demo", "-t", "nope")
    assert result.code == 2
    assert result.error_lines == ["error: unknown template 'nope'"]
    assert "hint: available templates: " + ", ".join(TEMPLATES) in result.err
    assert not (project / ".hills").exists()


def test_missing_uv_is_an_environment_problem(project, monkeypatch, hermetic):
    monkeypatch.setenv("HILLS_UV", "/nonexistent")
    result = run_cli("new", "demo")
    assert result.code == 4
    assert result.error_lines == ["error: uv not found at '/nonexistent' (from HILLS_UV)"]
    assert os.listdir(project) == []
    assert not (hermetic.hills_home / "registry.json").exists()


@pytest.fixture
def failing_uv(tmp_path):
    fake = tmp_path / "fake-uv"
    fake.write_text("#!/bin/sh\necho 'uv exploded' >&2\nexit 3\n")
    fake.chmod(0o755)
    return fake


def test_failed_step_leaves_nothing_behind(project, monkeypatch, failing_uv, hermetic):
    monkeypatch.setenv("HILLS_UV", str(failing_uv))
    result = run_cli("new", "demo")
    assert result.code == 4
    assert result.error_lines[0].startswith(f"error: command failed with exit code 3: {failing_uv} lock ")
    assert "uv exploded" in result.err
    assert os.listdir(project) == []
    registry = hermetic.hills_home / "registry.json"
    assert not registry.exists() or "demo" not in json.loads(registry.read_text())["hills"]


def test_failed_step_keeps_existing_hills(project, monkeypatch, failing_uv):
    assert run_cli("new", "first").code == 0
    before = tree_snapshot(project / ".hills")
    monkeypatch.setenv("HILLS_UV", str(failing_uv))
    assert run_cli("new", "second").code == 4
    assert tree_snapshot(project / ".hills") == before


def test_missing_git_is_an_environment_problem(project, hermetic, python_bin):
    env = dict(os.environ)
    # bin/ and a python3 only: no git anywhere on PATH.
    env["PATH"] = os.pathsep.join([str(BIN_DIR), str(python_bin)])
    result = run_bin("hills", "new", "demo", cwd=project, env=env)
    assert result.code == 4, result.output
    assert result.error_lines == ["error: git is not installed or not on PATH"]
    assert "hint: install git" in result.err
    assert "Traceback" not in result.err
    assert os.listdir(project) == []


def test_new_through_the_real_executable(project):
    result = run_bin("hills", "new", "demo", cwd=project)
    assert result.code == 0, result.output
    assert result.out.strip() == str(project / ".hills" / "demo")
    listed = run_bin("git", "hill", "list", "--json", cwd=project)
    assert listed.code == 0, listed.output
    assert [row["name"] for row in json.loads(listed.out)] == ["demo"]


def test_a_templates_own_private_folder_is_not_copied(project, tmp_path, monkeypatch):
    """Held-out data is drawn by make_data.py at creation: a template that
    holds a private/ (anyone can read the package) does not pass it on."""
    import shutil

    templates = tmp_path / "templates"
    shutil.copytree(Path(str(hill.shipped("examples"))) / "default", templates / "leaky")
    (templates / "leaky" / "private").mkdir()
    (templates / "leaky" / "private" / "answers.json").write_text('{"q1": 42}\n')
    (templates / "leaky" / "data" / "private").mkdir(parents=True)
    (templates / "leaky" / "data" / "private" / "kept.txt").write_text("a folder of that name deeper is kept\n")
    shipped = hill.shipped
    monkeypatch.setattr(hill, "shipped", lambda folder: templates if folder == "examples" else shipped(folder))
    created = run_cli("new", "copied", "-t", "leaky")
    assert created.code == 0, created.output
    made = Path(created.out.strip())
    assert (made / "hill.yaml").is_file() and (made / "data" / "private" / "kept.txt").is_file()
    assert not (made / "private").exists()
