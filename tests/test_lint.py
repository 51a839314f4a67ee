"""The linter beside the type checker: ruff with the configuration in
pyproject.toml ([tool.ruff]: the line length, pyflakes and pycodestyle, and
click banned outside the front ends), over hills/ and tests/."""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

def _cache_dir():
    """ruff's cache: in the virtual environment, else in a temporary folder
    of this user's; never a `.ruff_cache` in the checkout."""
    if sys.prefix != sys.base_prefix:
        return Path(sys.prefix) / "ruff_cache"
    return Path(tempfile.gettempdir()) / f"hills-ruff-cache-{os.getuid()}"


def _ruff(*paths, source=None):
    """ruff's findings in `paths`, as (file relative to the checkout, code,
    the line as ruff prints it); with `source`, in that text, as if it were
    the one path given."""
    if importlib.util.find_spec("ruff") is None:
        pytest.fail("ruff is not installed: pip install -e '.[test]'")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--config", str(REPO_ROOT / "pyproject.toml"),
                           "--cache-dir", str(_cache_dir()), "--output-format", "json", "--exit-zero",
                           *(["--stdin-filename", *paths, "-"] if source is not None else paths)],
                          cwd=REPO_ROOT, input=source or "", capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    found = []
    for finding in json.loads(done.stdout):
        path = Path(finding["filename"]).resolve().relative_to(REPO_ROOT).as_posix()
        row = finding["location"]["row"]
        found.append((path, finding["code"], f"{path}:{row}: {finding['code']} {finding['message']}"))
    return found


def test_ruff_finds_nothing_in_hills():
    found = [shown for _, _, shown in _ruff("hills")]
    assert not found, "\n".join(found)


def test_ruff_finds_nothing_in_tests():
    found = _ruff("tests")
    assert not found, f"{len(found)} findings: " + ", ".join(
        f"{count} {code}" for code, count in Counter(code for _, code, _ in found).most_common()) + "\n" + "\n".join(
        shown for _, _, shown in found)


def test_click_outside_the_front_ends_is_found():
    """The banned-import rule holds with this configuration: a core module
    importing click, at the top or inside a function, is named; a command
    module may."""
    text = "import click\n\n\ndef f() -> None:\n    from click import echo\n\n    echo(click.style('x'))\n"
    core = _ruff("hills/lint_probe.py", source=text)
    assert [shown.split(": ", 1)[0] for _, code, shown in core if code == "TID251"] == \
        ["hills/lint_probe.py:1", "hills/lint_probe.py:5"], core
    assert _ruff("hills/commands/lint_probe.py", source=text) == []
