"""Read-only views: `hills status` (lock drift included), `hills log`,
`hills describe`, `hills list` and `hills home`."""

import json
import os

import pytest

from testing.util import git, run_bin, run_cli


def test_status_before_the_first_commit(project):
    assert run_cli("new", "demo").code == 0
    result = run_cli("status", "demo")
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0] == "hill 'demo': no commits yet"
    assert "  added      hill.yaml" in lines and "  added      eval.py" in lines


@pytest.mark.slow
def test_status_shows_changes_and_lock_drift(committed_hill):
    hill = committed_hill
    (hill / "private").mkdir()
    (hill / "private" / "keep.txt").write_text("same\n")
    (hill / "private" / "edit.txt").write_text("before\n")
    (hill / "private" / "drop.txt").write_text("bye\n")
    assert run_cli("commit", "circle-packing", "-m", "held-out data").code == 0
    clean = run_cli("status", "circle-packing")
    head = git(hill, "rev-parse", "HEAD").out.strip()
    assert clean.out.splitlines() == [f"hill 'circle-packing' at {head[:12]}", "nothing changed since the last commit"]

    (hill / "private" / "edit.txt").write_text("after!\n")
    (hill / "private" / "drop.txt").unlink()
    (hill / "private" / "new.txt").write_text("hello\n")
    with open(hill / "README.md", "a", encoding="utf-8") as handle:
        handle.write("\nOne more line.\n")
    (hill / "notes.md").write_text("new file\n")
    (hill / "examples" / "grid" / "circles.json").unlink()

    result = run_cli("status", "circle-packing")
    assert result.code == 0
    assert result.out.splitlines()[1:] == [
        "  modified   README.md",
        "  deleted    examples/grid/circles.json",
        "  added      notes.md",
        "  removed    private/drop.txt  (private.lock)",
        "  changed    private/edit.txt  (private.lock)",
        "  added      private/new.txt  (private.lock)",
    ]
    as_json = json.loads(run_cli("status", "circle-packing", "--json").out)
    assert as_json["head"] == head
    assert as_json["private"] == [["removed", "private/drop.txt"], ["changed", "private/edit.txt"],
                                  ["added", "private/new.txt"]]
    assert ["modified", "README.md"] in as_json["files"] and as_json["blobs"] == []
    # Looking does not change anything: the locks on disk are untouched.
    assert git(hill, "status", "--porcelain", "--", "private.lock").out == ""


@pytest.mark.slow
def test_status_exit_code_says_whether_anything_changed(committed_hill):
    hill = committed_hill
    (hill / "private").mkdir()
    answer = hill / "private" / "answer.txt"
    answer.write_text("42\n")
    assert run_cli("commit", "circle-packing", "-m", "held-out data").code == 0
    clean = run_cli("status", "circle-packing", "--exit-code")
    assert clean.code == 0 and clean.out.splitlines()[1] == "nothing changed since the last commit"
    assert run_cli("status", "circle-packing", "--exit-code", "--json").code == 0

    readme = hill / "README.md"
    original = readme.read_text()
    readme.write_text(original + "\nOne more line.\n")
    changed = run_cli("status", "circle-packing", "--exit-code")
    assert changed.code == 1, changed.output
    assert changed.out.splitlines()[1:] == ["  modified   README.md"] and changed.err == ""
    assert run_cli("status", "circle-packing", "--exit-code", "--json").code == 1
    assert run_cli("status", "circle-packing").code == 0  # without --exit-code: 0 either way
    readme.write_text(original)

    answer.write_text("43\n")  # lock drift alone counts too
    drifted = run_bin("git", "hill", "status", "circle-packing", "--exit-code", cwd=hill)
    assert drifted.code == 1, drifted.output
    assert drifted.out.splitlines()[1:] == ["  changed    private/answer.txt  (private.lock)"]
    answer.write_text("42\n")
    assert run_cli("status", "circle-packing", "--exit-code").code == 0


def test_status_exit_code_before_the_first_commit(project):
    assert run_cli("new", "demo").code == 0
    result = run_cli("status", "demo", "--exit-code")
    assert result.code == 1, result.output
    assert result.out.splitlines()[0] == "hill 'demo': no commits yet"


@pytest.mark.slow
def test_log_lists_versions_newest_first(committed_hill):
    hill = committed_hill
    first_tree = git(hill, "rev-parse", "HEAD^{tree}").out.strip()
    with open(hill / "README.md", "a", encoding="utf-8") as handle:
        handle.write("\nA clarification.\n")
    second = run_cli("commit", "circle-packing", "-m", "clarify the task")
    assert second.code == 0
    second_tree, second_commit = second.out.split()
    versions = json.loads(run_cli("log", "circle-packing", "--json").out)
    assert [(v["tree_hash"], v["message"], v["evals"]) for v in versions] == [
        (second_tree, "clarify the task", 0), (first_tree, "first version", 0)]
    assert versions[0]["commit"] == second_commit
    assert versions[0]["date"] == "2026-01-01T00:00:00+00:00"
    text = run_cli("log", "circle-packing")
    assert text.code == 0
    lines = text.out.splitlines()
    assert lines == [
        "TREE          COMMIT        DATE                       EVALS  MESSAGE",
        f"{second_tree[:12]}  {second_commit[:12]}  2026-01-01T00:00:00+00:00      0  clarify the task",
        f"{first_tree[:12]}  {versions[1]['commit'][:12]}  2026-01-01T00:00:00+00:00      0  first version",
    ]


def test_log_without_commits(project):
    assert run_cli("new", "demo").code == 0
    result = run_cli("log", "demo")
    assert (result.code, result.out) == (0, "hill 'demo': no commits yet\n")
    assert run_cli("log", "demo", "--json").out.strip() == "[]"


@pytest.mark.slow
def test_describe_text(shared_hill, project):
    result = run_cli("describe", "circle-packing")
    assert result.code == 0, result.output
    out = result.out
    tree = git(shared_hill, "rev-parse", "HEAD^{tree}").out.strip()
    assert out.startswith(f"# circle-packing 0.1.0  (tree {tree[:12]})\n")
    assert "## Submission contract" in out and "hills eval DIR -H circle-packing" in out
    assert "- example submissions: examples/grid" in out
    assert "- evaluator: function shape, watchdog 60s" in out
    assert "- n: int in [1, 100], default 26 (primary: reports compare only with equal values)" in out
    assert "- tolerance: float in [0.0, 0.001], default 1e-09" in out
    readme = (shared_hill / "README.md").read_text()
    assert out.rstrip().endswith(readme.rstrip())
    assert out.index("## Params") < out.index("## Metrics") < out.index("## Task")


@pytest.mark.slow
def test_describe_json(shared_hill, project):
    result = run_cli("describe", "circle-packing", "--json")
    assert result.code == 0
    described = json.loads(result.out)
    assert described["hill"] == "circle-packing"
    assert described["params"]["n"]["type"] == "int" and described["params"]["n"]["default"] == 26
    assert described["params"]["n"]["primary"] is True
    assert described["params"]["tolerance"] == {**described["params"]["tolerance"], "type": "float",
                                                "default": 1e-9, "primary": False}
    assert described["readme"] == (shared_hill / "README.md").read_text()
    assert described["tree_hash"] == git(shared_hill, "rev-parse", "HEAD^{tree}").out.strip()
    assert described["examples"] == ["grid"]


def test_describe_by_path_and_from_elsewhere(shared_hill, project, tmp_path, monkeypatch):
    by_path = run_cli("describe", str(shared_hill), "--json")
    assert by_path.code == 0 and json.loads(by_path.out)["hill"] == "circle-packing"
    # Outside the project the registry finds it.
    monkeypatch.chdir(tmp_path)
    assert json.loads(run_cli("describe", "circle-packing", "--json").out)["path"] == str(shared_hill)


def test_list_and_home(shared_hill, project, hermetic):
    home = run_cli("home")
    assert (home.code, home.out) == (0, f"{hermetic.hills_home}\n")
    tree = git(shared_hill, "rev-parse", "HEAD^{tree}").out.strip()
    listed = run_cli("list")
    assert listed.code == 0
    assert listed.out.splitlines() == [f"circle-packing  {tree[:12]}  {shared_hill}"]
    rows = json.loads(run_cli("list", "--json").out)
    assert rows == [{"name": "circle-packing", "path": str(shared_hill), "tree_hash": tree, "exists": True}]


def test_list_when_empty_and_home_default(project, monkeypatch, hermetic):
    empty = run_cli("list")
    assert (empty.code, empty.out) == (0, "")
    assert "no hills yet" in empty.err
    monkeypatch.delenv("HILLS_HOME")
    assert run_cli("home").out == os.path.join(str(hermetic.home), ".autolab", "hills") + "\n"


def test_list_marks_a_missing_hill(project):
    assert run_cli("new", "gone").code == 0
    import shutil

    shutil.rmtree(project / ".hills" / "gone")
    assert run_cli("list").out.rstrip().endswith("(missing)")
    result = run_cli("status", "gone")
    assert result.code == 2
    assert result.error_lines == ["error: no hill named 'gone'"]


def test_read_only_commands_through_the_executables(shared_hill, project):
    for argv in (("hills", "status", "circle-packing"), ("git", "hill", "log", "circle-packing"),
                 ("hills", "describe", "circle-packing", "--json")):
        result = run_bin(*argv, cwd=project)
        assert result.code == 0, (argv, result.output)
    assert run_bin("git", "hill", "home", cwd=project).out.strip() == os.environ["HILLS_HOME"]


def test_current_scores_a_hill_before_its_first_commit(project):
    created = run_cli("new", "draft", "-t", "circle-packing")
    assert created.code == 0, created.output
    example = project / ".hills" / "draft" / "examples" / "grid"
    refused = run_cli("eval", str(example), "-H", "draft")
    assert refused.code == 5
    assert refused.error_lines == ["error: hill 'draft' has no commits yet"]
    assert "--current" in refused.err
    scored = run_cli("eval", str(example), "-H", "draft", "--current")
    assert scored.code == 0, scored.output
    report = json.loads(scored.out)
    assert report["official"] is False and report["tree_hash"] is None and report["commit"] is None
    assert report["status"] == "passing"
