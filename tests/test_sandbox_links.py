"""Isolation through symlinks: machine state, the project and a hill's
folder reached through links still evaluate under bubblewrap, machine
state stays hidden through every alias, and `hills check` runs the same
confinement an eval uses."""

import os
from pathlib import Path

import pytest

from testing.util import needs_bwrap, new_and_commit, run_cli


@pytest.fixture
def linked(hermetic, monkeypatch, tmp_path):
    """HILLS_HOME, HOME and the project each reached through an absolute
    link, the project inside a linked parent."""
    real = tmp_path / "real"
    for folder in ("hills-home", "home", "parent/project"):
        (real / folder).mkdir(parents=True)
    links = tmp_path / "links"
    links.mkdir()
    (links / "hills-home").symlink_to(real / "hills-home")
    (links / "home").symlink_to(real / "home")
    (links / "parent").symlink_to(real / "parent")
    monkeypatch.setenv("HILLS_HOME", str(links / "hills-home"))
    monkeypatch.setenv("HOME", str(links / "home"))
    monkeypatch.chdir(links / "parent" / "project")
    return {"real": real, "links": links}


@pytest.mark.slow
@needs_bwrap
def test_eval_through_linked_home_and_project_scores(linked):
    hill = new_and_commit()
    result = run_cli("eval", hill / "examples" / "grid", "-H", "circle-packing")
    assert result.code == 0, result.output
    assert result.report["passed"] is True
    assert {"name": "isolation", "value": "bwrap", "primary": True} in result.report["config"]


READ_EVAL = """\
    import json
    from pathlib import Path

    def eval(submission, *, final=False, **params):
        seen = {}
        for path in json.loads((Path(submission) / "paths.json").read_text()):
            try:
                seen[path] = len(open(path, "rb").read())
            except OSError as exc:
                seen[path] = type(exc).__name__
        return {"passed": True, "metrics": [{"name": "total", "value": 1.0, "direction": "max"}],
                "details": {"seen": seen}}
    """


@needs_bwrap
def test_the_key_is_hidden_through_the_link_and_the_real_path(linked):
    import json

    from testing.eval_fixtures import make_hill, submission

    make_hill("reader", READ_EVAL, timeout=30)
    through_link = os.path.join(os.environ["HILLS_HOME"], "key")
    through_real = str(linked["real"] / "hills-home" / "key")
    assert Path(through_link).read_bytes() == Path(through_real).read_bytes()
    sub = submission(linked["links"] / "sub", {"paths.json": json.dumps([through_link, through_real])})
    result = run_cli("eval", sub, "-H", "reader", "--json")
    assert result.code == 0, result.output
    seen = result.report["details"]["seen"]
    assert seen == {through_link: "FileNotFoundError", through_real: "FileNotFoundError"}


@pytest.mark.slow
@needs_bwrap
def test_check_says_isolation_ok_through_links(linked):
    new_and_commit()
    checked = run_cli("check", "circle-packing")
    assert checked.code == 0, checked.output
    assert "ok" in next(line for line in checked.output.splitlines() if "isolation" in line)


@pytest.mark.slow
@needs_bwrap
def test_check_fails_when_the_sandboxed_probe_fails(committed_hill, monkeypatch, tmp_path):
    """A bwrap that works for a bare namespace but not for the eval's own
    mounts: the isolation line names the failure instead of saying ok."""
    from hills.run import sandbox

    broken = tmp_path / "bwrap"
    broken.write_text(f"#!/bin/sh\ncase \"$*\" in *--tmpfs*) echo 'bwrap: cannot mount tmpfs' >&2; exit 1;; esac\n"
                      f"exec {sandbox.bwrap_binary()} \"$@\"\n")
    broken.chmod(0o755)
    monkeypatch.setenv("HILLS_BWRAP", str(broken))
    # This wrapper is the test's, in a folder under the machine's /tmp:
    # trusted here only so that its mount failure, not its owner, is seen
    # (test_fail_closed.py tests the trust rule itself).
    monkeypatch.setattr(sandbox, "trust_problem", lambda path: None)
    checked = run_cli("check", "circle-packing")
    line = next(line for line in checked.output.splitlines() if "isolation" in line)
    assert "cannot mount tmpfs" in line, checked.output
    assert checked.code != 0, checked.output
