"""The suite's two tiers: `make test` (what CI runs, the README's command)
runs every test; `make test-fast`, for the edit loop, leaves out those
marked slow and still runs at least 80% of them. The modules the
scheduler groups by name exist."""

import re
import subprocess
import sys

import pytest

from testing.util import MACHINE_WIDE, REPO_ROOT, SPREAD


def make_dry_run(target: str) -> str:
    done = subprocess.run(["make", "-n", target], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return next(line for line in done.stdout.splitlines() if " -m pytest " in line)


def collected(*args: str) -> int:
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    found = re.search(r"^(\d+)(?:/\d+)? tests? (?:collected|selected)", done.stdout, re.MULTILINE)
    assert found, done.stdout[-2000:]
    return int(found.group(1))


def test_make_test_runs_every_test_and_test_fast_leaves_out_the_slow_ones():
    full = make_dry_run("test")
    assert not re.search(r"\s(-m|-k|--deselect|--ignore)\b", full.split(" -m pytest ", 1)[1]), full
    fast = make_dry_run("test-fast")
    assert fast.endswith("-m \"not slow\"") and fast.startswith(full), fast


def test_ci_runs_the_readmes_test_command():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    setup = readme.split("## Set-up", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    # The two set-up commands: the quickstart and the whole suite, which CI runs.
    assert [line.split("#")[0].strip() for line in setup.splitlines()] == ["make quickstart", "make test"], setup
    assert re.search(r"^make test-fast\s+#", readme, re.MULTILINE)
    ci = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "set -euo pipefail" in ci  # a failing `make test` fails the run
    assert ci.rstrip().splitlines()[-1] == "make test"


@pytest.mark.slow
def test_the_fast_tier_holds_at_least_80_percent_of_the_tests():
    total = collected()
    fast = collected("-m", "not slow")
    assert 0 < fast < total  # something is marked slow, and not everything
    assert fast >= 0.8 * total, f"make test-fast runs {fast} of {total} tests"


def test_the_grouped_modules_exist():
    for name in sorted(MACHINE_WIDE | SPREAD):
        assert (REPO_ROOT / "tests" / name).is_file(), f"tests/testing/util.py groups '{name}', which is not in tests/"
