"""`hills setup skill`: the skill shipped in the package lands where an
agent CLI reads skills, stamped with this hills' version, and --check says
when an installed copy is stale."""

import json
import os
import zipfile
from pathlib import Path

import pytest

from testing.util import REPO_ROOT, run_cli
from hills import __version__
from hills.disk import skill

SHIPPED = REPO_ROOT / "skills" / "hills"


@pytest.fixture(autouse=True)
def in_project(hermetic, monkeypatch):
    monkeypatch.chdir(hermetic.project)
    return hermetic.project


def test_the_skill_ships_with_its_references() -> None:
    files = skill.shipped_files()
    assert "SKILL.md" in files
    assert any(rel.startswith("references/") for rel in files), sorted(files)
    text = files["SKILL.md"].decode()
    for rel in files:
        if rel.startswith("references/"):
            assert rel in text, f"SKILL.md never points at {rel}"


def test_install_into_a_folder_stamps_the_version(tmp_path: Path) -> None:
    result = run_cli("setup", "skill", "--dir", tmp_path / "skills")
    assert result.code == 0, result.output
    folder = tmp_path / "skills" / "hills"
    assert result.out.strip() == str(folder)
    installed = (folder / "SKILL.md").read_text()
    assert installed.startswith("---\nname: hills\n")
    assert f'hills-version: "{__version__}"' in installed
    for rel in skill.shipped_files():
        assert (folder / rel).is_file(), rel
    checked = run_cli("setup", "skill", "--dir", tmp_path / "skills", "--check")
    assert checked.code == 0 and "current:" in checked.err, checked.output


def test_check_says_stale_for_another_version_and_for_an_edited_copy(tmp_path: Path) -> None:
    assert run_cli("setup", "skill", "--dir", tmp_path).code == 0
    skill_md = tmp_path / "hills" / "SKILL.md"
    text = skill_md.read_text()
    skill_md.write_text(text.replace(f'hills-version: "{__version__}"', 'hills-version: "0.0.1"'))
    old = run_cli("setup", "skill", "--dir", tmp_path, "--check")
    assert old.code == 1
    assert "stale:" in old.err and "installed for hills 0.0.1" in old.err
    assert "hint: run 'hills setup skill'" in old.err
    skill_md.write_text(text + "\nan edit\n")
    edited = run_cli("setup", "skill", "--dir", tmp_path, "--check", "--json")
    assert edited.code == 1
    [row] = json.loads(edited.out)
    assert row["state"] == "stale" and "SKILL.md" in row["detail"]
    again = run_cli("setup", "skill", "--dir", tmp_path)
    assert again.code == 0 and skill_md.read_text() == text


def test_check_of_a_missing_copy_exits_1(tmp_path: Path) -> None:
    result = run_cli("setup", "skill", "--dir", tmp_path, "--check")
    assert result.code == 1
    assert "missing:" in result.err and not (tmp_path / "hills").exists()


def test_a_folder_hills_did_not_write_is_kept_without_force(tmp_path: Path) -> None:
    mine = tmp_path / "hills"
    mine.mkdir()
    (mine / "SKILL.md").write_text("---\nname: hills\ndescription: my own\n---\nmine\n")
    refused = run_cli("setup", "skill", "--dir", tmp_path)
    assert refused.code == 1
    assert "was not installed by hills" in refused.err and "--force" in refused.err
    assert (mine / "SKILL.md").read_text().endswith("mine\n")
    forced = run_cli("setup", "skill", "--dir", tmp_path, "--force")
    assert forced.code == 0 and __version__ in (mine / "SKILL.md").read_text()


def test_without_options_each_agent_found_gets_it_else_the_generic_layout(hermetic) -> None:
    home = Path(os.environ["HOME"])
    generic = run_cli("setup", "skill")
    assert generic.code == 0, generic.output
    assert generic.out.split() == [str(home / ".agents" / "skills" / "hills")]
    (home / ".claude").mkdir()
    (home / ".gemini").mkdir()
    found = run_cli("setup", "skill")
    assert found.code == 0, found.output
    assert found.out.split() == [str(home / ".claude" / "skills" / "hills"), str(home / ".gemini" / "skills" / "hills")]


def test_project_puts_it_under_the_project_root(hermetic, monkeypatch) -> None:
    (hermetic.project / ".git").mkdir()
    below = hermetic.project / "src" / "deep"
    below.mkdir(parents=True)
    monkeypatch.chdir(below)
    result = run_cli("setup", "skill", "--project", "--agent", "claude-code", "--agent", "codex")
    assert result.code == 0, result.output
    assert result.out.split() == [str(hermetic.project / ".claude" / "skills" / "hills"),
                                  str(hermetic.project / ".agents" / "skills" / "hills")]


@pytest.mark.parametrize("argv,message", [
    (["--agent", "nobody"], "unknown agent 'nobody'"),
    (["--dir", "x", "--project"], "--dir and --project are exclusive"),
])
def test_bad_options(argv: list[str], message: str) -> None:
    result = run_cli("setup", "skill", *argv)
    assert result.code == 2
    assert message in result.err


@pytest.mark.slow
def test_the_wheel_carries_the_skill(tmp_path: Path) -> None:
    """Built from this checkout (pip fetches the build backend pyproject.toml
    names), the wheel holds skills/hills under the package."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                           "-w", str(tmp_path), str(REPO_ROOT)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [wheel] = tmp_path.glob("hills-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for rel in skill.shipped_files():
        assert f"hills/skills/hills/{rel}" in names, rel


def test_the_man_page_lists_every_agent_with_its_folders() -> None:
    page = (REPO_ROOT / "man" / "hills-setup.1.rst").read_text()
    agents = page[page.index("\nAGENTS\n"):page.index("\nEXIT STATUS\n")]
    for known in skill.AGENTS:
        assert f"**{known.name}**\n" in agents, known.name
        entry = agents[agents.index(f"**{known.name}**\n"):].split("\n\n")[0]
        assert f"``{known.user}/hills``" in entry and f"``{known.project}/hills``" in entry, entry
        if known.marker:
            assert f"found by ``{known.marker}``" in entry, entry
