"""The README's quickstart: examples/quickstart.sh runs end to end, and the
commands the README shows are the ones the script runs."""

import os
import re
from pathlib import Path

import pytest

from testing.util import run_bin

REPO = Path(__file__).resolve().parent.parent


def readme_quickstart_commands():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quickstart", 1)[1].split("## ", 1)[0]
    block = section.split("```sh", 1)[1].split("```", 1)[0]
    return [re.sub(r"\s+#.*$", "", line).strip() for line in block.strip().splitlines()]


@pytest.mark.slow
def test_quickstart_runs_end_to_end(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    result = run_bin("bash", REPO / "examples" / "quickstart.sh", cwd=tmp_path,
                     env=dict(os.environ, TMPDIR=str(scratch)))
    assert result.code == 0, result.output
    assert "quickstart: ok (tree hash " in result.out
    assert "signature valid: circle-packing @ " in result.out
    assert "signature INVALID: this report was edited" in result.out
    assert "chain intact: 2 entries" in result.out  # the eval's started entry, then its outcome
    assert re.search(r"\s1\s+initial$", result.out, re.MULTILINE)  # hills log: one eval of "initial"
    # It works in a temporary folder and removes it (uv may leave its own lock files).
    assert not list(scratch.glob("hills-quickstart.*"))


def test_readme_shows_what_the_script_runs():
    script = (REPO / "examples" / "quickstart.sh").read_text(encoding="utf-8")
    for command in readme_quickstart_commands():
        if command.startswith("hills verify tampered.json"):
            assert "hills verify tampered.json" in script
            continue
        shown = command.replace("hills ", "").strip()
        assert shown in script, f"README shows '{command}', which examples/quickstart.sh does not run"
