"""Finding a hill by name: the nearest `.hills/` first, then the machine
registry; two projects may each hold a hill of the same name, and a name
that matches none is answered with the closest ones."""

import json
import os

import pytest

from testing.util import new_and_commit, run_cli
from hills.base import state
from hills.run import sandbox


def _new(folder, monkeypatch, name="demo", template="default"):
    folder.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(folder)
    created = run_cli("new", name, "-t", template)
    assert created.code == 0, created.output
    return created.out.strip()


@pytest.fixture
def two_demos(project, tmp_path, monkeypatch):
    """Hills named 'demo' in two projects: (first path, second path)."""
    first = _new(project, monkeypatch)
    second = _new(tmp_path / "other-project", monkeypatch)
    return first, second


def _path_of(name):
    described = run_cli("describe", name, "--json")
    assert described.code == 0, described.output
    return json.loads(described.out)["path"]


def test_two_projects_may_each_hold_a_hill_of_the_same_name(two_demos, hermetic):
    first, second = two_demos
    assert first != second
    registry = json.loads((hermetic.hills_home / "registry.json").read_text())
    assert registry["version"] == 2
    assert [entry["path"] for entry in registry["hills"]["demo"]] == [first, second]
    listed = json.loads(run_cli("list", "--json").out)
    assert [(row["name"], row["path"]) for row in listed] == [("demo", first), ("demo", second)]


def test_the_nearest_hills_folder_wins(two_demos, project, tmp_path, monkeypatch):
    first, second = two_demos
    monkeypatch.chdir(project)
    assert _path_of("demo") == first
    deeper = project / "src" / "deep"
    deeper.mkdir(parents=True)
    monkeypatch.chdir(deeper)
    assert _path_of("demo") == first
    monkeypatch.chdir(tmp_path / "other-project")
    assert _path_of("demo") == second


def test_an_ambiguous_name_from_elsewhere_lists_the_candidates(two_demos, tmp_path, monkeypatch):
    first, second = two_demos
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = run_cli("status", "demo")
    assert result.code == 2, result.output
    assert result.error_lines == ["error: hill 'demo' is ambiguous: 2 registered hills have that name"]
    assert f"  {first}\n  {second}\n" in result.err
    assert "hint: pass the path of the one you mean" in result.err
    by_path = run_cli("describe", second, "--json")
    assert by_path.code == 0 and json.loads(by_path.out)["path"] == second


def test_a_missing_hill_is_no_candidate(two_demos, tmp_path, monkeypatch):
    import shutil

    first, second = two_demos
    shutil.rmtree(first)
    monkeypatch.chdir(tmp_path)
    assert _path_of("demo") == second
    listed = run_cli("list")
    assert listed.code == 0
    assert f"{first}  (missing)" in listed.out


def test_a_new_hill_where_a_removed_one_was_replaces_its_entry(project, hermetic, monkeypatch):
    import shutil

    path = _new(project, monkeypatch)
    shutil.rmtree(project / ".hills")
    assert _new(project, monkeypatch) == path
    registry = json.loads((hermetic.hills_home / "registry.json").read_text())
    assert [entry["path"] for entry in registry["hills"]["demo"]] == [path]


def test_a_registry_of_the_first_format_is_read_and_upgraded(project, hermetic, tmp_path, monkeypatch):
    first = _new(project, monkeypatch)
    old = {"version": 1, "hills": {"demo": {"path": first, "tree_hash": None, "template": "default"}}}
    (hermetic.hills_home / "registry.json").write_text(json.dumps(old))
    monkeypatch.chdir(tmp_path)
    assert _path_of("demo") == first
    second = _new(tmp_path / "other-project", monkeypatch)
    registry = json.loads((hermetic.hills_home / "registry.json").read_text())
    assert registry["version"] == 2
    assert [entry["path"] for entry in registry["hills"]["demo"]] == [first, second]
    assert registry["hills"]["demo"][0]["template"] == "default"


def test_a_registry_of_an_unknown_shape_is_an_environment_problem(project, hermetic):
    hermetic.hills_home.mkdir()
    (hermetic.hills_home / "registry.json").write_text('{"version": 2, "hills": {"demo": 5}}')
    result = run_cli("list")
    assert result.code == 4, result.output
    assert result.error_lines[0].startswith(f"error: registry '{hermetic.hills_home / 'registry.json'}'")
    assert "'demo'" in result.err and "hint: " in result.err


def test_a_mistyped_name_suggests_the_closest(project, monkeypatch):
    _new(project, monkeypatch, "circle-packing")
    result = run_cli("status", "circle-pakcing")
    assert result.code == 2, result.output
    assert result.error_lines == ["error: no hill named 'circle-pakcing'"]
    assert "hint: did you mean 'circle-packing'?" in result.err


def test_a_mistyped_name_suggests_registered_hills_from_elsewhere(project, tmp_path, monkeypatch):
    _new(project, monkeypatch, "bin-packing")
    _new(project, monkeypatch, "bin-parking")
    monkeypatch.chdir(tmp_path)
    result = run_cli("eval", str(tmp_path), "-H", "bin-pakcing")
    assert result.code == 2, result.output
    assert result.error_lines == ["error: no hill named 'bin-pakcing'"]
    assert "hint: did you mean 'bin-parking' or 'bin-packing'?" in result.err


def test_a_name_close_to_nothing_points_at_the_list(project):
    result = run_cli("status", "zzz")
    assert result.code == 2, result.output
    assert result.error_lines == ["error: no hill named 'zzz'"]
    assert "hint: see 'hills list', or create it with 'hills new zzz'" in result.err


def test_other_private_folders_of_the_same_name_are_hidden(two_demos):
    first, second = two_demos
    for path in (first, second):
        os.makedirs(os.path.join(path, "private"), exist_ok=True)
    assert sandbox.private_elsewhere(first) == [os.path.join(second, "private")]
    assert sandbox.private_elsewhere(second) == [os.path.join(first, "private")]


@pytest.mark.slow
def test_approval_belongs_to_one_hill_not_to_its_name(project, tmp_path, monkeypatch):
    first = str(new_and_commit())
    other = tmp_path / "other-project"
    other.mkdir()
    monkeypatch.chdir(other)
    created = run_cli("new", "circle-packing", "-t", "circle-packing")
    assert created.code == 0, created.output
    second = created.out.strip()
    with open(os.path.join(second, "README.md"), "a", encoding="utf-8") as handle:
        handle.write("\nAnother project's copy.\n")
    assert run_cli("commit", "circle-packing", "-m", "other copy").code == 0
    monkeypatch.chdir(project)
    pinned = run_cli("pin", "circle-packing")
    assert pinned.code == 0, pinned.output
    monkeypatch.chdir(other)
    result = run_cli("eval", os.path.join(second, "examples", "grid"), "-H", "circle-packing", "--json")
    assert result.code == 0, result.output
    report = json.loads(result.out)
    assert report["official"] is True, report["official_reason"]
    assert report["tree_hash"] != pinned.out.strip()
    # The working-tree logs of the two hills are apart too.
    assert state.state_dir("circle-packing", None, first) != state.state_dir("circle-packing", None, second)
