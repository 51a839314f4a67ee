"""The pre-commit hook through a real `git --git-dir=.vc --work-tree=. commit`:
the same gate and lock regeneration as `hills commit`, and it never stages
anything behind the user's back."""

import json
import os
import shutil
import subprocess
import sys


import pytest

from testing.util import git, run_cli
from hills.disk import locks


def head(hill):
    return git(hill, "rev-parse", "HEAD").out.strip()


@pytest.mark.slow
def test_stale_lock_fails_the_commit_until_it_is_staged(committed_hill):
    hill = committed_hill
    before = head(hill)
    (hill / "private").mkdir()
    (hill / "private" / "answers.txt").write_text("42\n")
    with open(hill / "README.md", "a", encoding="utf-8") as handle:
        handle.write("\nNow with held-out answers.\n")
    assert git(hill, "add", "README.md").code == 0

    refused = git(hill, "commit", "-q", "-m", "add answers")
    assert refused.code != 0
    assert refused.error_lines == ["error: private.lock did not match the files on disk and was regenerated; "
                                   "nothing was committed"]
    assert "hint: stage the regenerated lock(s) and commit again: git --git-dir=.vc --work-tree=. add private.lock" \
        in refused.err
    assert head(hill) == before
    # The hook rewrote the lock but did not stage it.
    assert git(hill, "status", "--porcelain", "--", "private.lock").out == " M private.lock\n"
    assert "private/answers.txt" in (hill / "private.lock").read_text()

    assert git(hill, "add", "private.lock").code == 0
    accepted = git(hill, "commit", "-q", "-m", "add answers")
    assert accepted.code == 0, accepted.output
    assert head(hill) != before
    committed_lock = git(hill, "show", "HEAD:private.lock").out
    assert locks.decode(committed_lock, "private.lock")["private/answers.txt"]["size"] == 3
    assert git(hill, "ls-tree", "-r", "--name-only", "HEAD", "--", "private").out == ""
    # hills sees the plain git commit as a version like any other.
    versions = run_cli("log", "circle-packing", "--json")
    assert '"message": "add answers"' in versions.out
    assert run_cli("status", "circle-packing").out.endswith("nothing changed since the last commit\n")


@pytest.mark.slow
def test_staged_private_file_is_refused_by_name(committed_hill):
    hill = committed_hill
    before = head(hill)
    (hill / "private").mkdir()
    (hill / "private" / "x").write_text("held out\n")
    assert git(hill, "add", "-f", "private/x").code == 0
    refused = git(hill, "commit", "-q", "-m", "leak")
    assert refused.code != 0
    assert refused.error_lines == ["error: 'private/x' is staged, but it must never enter git (held-out data)"]
    assert "hint: unstage it: git --git-dir=.vc rm --cached -- 'private/x'" in refused.err
    assert head(hill) == before


@pytest.mark.slow
def test_failing_hill_tests_block_a_plain_commit(committed_hill):
    hill = committed_hill
    before = head(hill)
    (hill / "tests" / "test_broken.py").write_text("def test_broken():\n    assert False, 'hill is broken'\n")
    assert git(hill, "add", "tests/test_broken.py").code == 0
    refused = git(hill, "commit", "-q", "-m", "broken")
    assert refused.code != 0
    assert refused.error_lines[0].startswith("error: hill 'circle-packing' failed check 'tests': ")
    assert "nothing was committed" in refused.err
    assert head(hill) == before


@pytest.mark.slow
def test_broken_manifest_blocks_a_plain_commit(committed_hill):
    hill = committed_hill
    manifest = hill / "hill.yaml"
    manifest.write_text(manifest.read_text().replace("timeout: 60", "timout: 60"))
    assert git(hill, "add", "hill.yaml").code == 0
    refused = git(hill, "commit", "-q", "-m", "typo")
    assert refused.code != 0
    assert refused.error_lines[0].startswith("error: hill 'circle-packing' failed check 'manifest': ")
    assert "unknown key 'timout'" in refused.err


@pytest.mark.slow
def test_hook_without_hills_explains_how_to_remove_it(committed_hill):
    hill = committed_hill
    env = dict(os.environ)
    git_dir = os.path.dirname(shutil.which("git"))
    env["PATH"] = os.pathsep.join([git_dir, "/bin"])
    assert not shutil.which("hills", path=env["PATH"])
    hook = hill / ".vc" / "hooks" / "pre-commit"
    # Neither `hills` on PATH nor the interpreter recorded at install time.
    assert sys.executable in hook.read_text()
    hook.write_text(hook.read_text().replace(sys.executable, "/nonexistent/python3"))
    with open(hill / "README.md", "a", encoding="utf-8") as handle:
        handle.write("\nedit\n")
    assert git(hill, "add", "README.md").code == 0
    refused = git(hill, "commit", "-q", "-m", "no hills", env=env)
    assert refused.code != 0
    assert refused.error_lines == ["error: hills is not installed, and this hill's commits are gated by it"]
    assert "rm .vc/hooks/pre-commit" in hook.read_text()


@pytest.mark.slow
def test_staged_blob_is_refused_by_name(committed_hill):
    hill = committed_hill
    before = head(hill)
    with open(hill / "hill.yaml", "a", encoding="utf-8") as handle:
        handle.write("blobs:\n  track: ['data/*.bin']\n")
    (hill / "data").mkdir()
    (hill / "data" / "weights.bin").write_bytes(b"\0" * 64)
    assert git(hill, "add", "hill.yaml").code == 0
    assert git(hill, "add", "-f", "data/weights.bin").code == 0
    refused = git(hill, "commit", "-q", "-m", "blob in git")
    assert refused.code != 0
    assert refused.error_lines == ["error: 'data/weights.bin' is staged, but it must never enter git (a blob)"]
    assert head(hill) == before


@pytest.mark.slow
def test_plain_commit_keeps_private_content_out_of_git(committed_hill):
    hill = committed_hill
    marker = b"hook-private-marker-5be0"
    (hill / "private").mkdir()
    (hill / "private" / "key.txt").write_bytes(marker + b"\n")
    assert git(hill, "add", "-A").code == 0  # private/ is excluded: nothing of it is staged
    assert git(hill, "commit", "-q", "-m", "first try").code != 0
    assert git(hill, "add", "private.lock").code == 0
    assert git(hill, "commit", "-q", "-m", "with key").code == 0
    listing = git(hill, "cat-file", "--batch-all-objects", "--batch-check").out.split("\n")
    ids = "\n".join(line.split()[0] for line in listing if line) + "\n"
    contents = subprocess.run(["git", "--git-dir=.vc", "cat-file", "--batch"], cwd=hill, input=ids.encode(),
                              capture_output=True, check=True).stdout
    assert marker not in contents
    assert git(hill, "status", "--porcelain").out == ""


@pytest.mark.slow
def test_list_shows_the_tree_of_a_plain_git_commit(committed_hill):
    hill = committed_hill
    with open(hill / "README.md", "a", encoding="utf-8") as handle:
        handle.write("\nedit\n")
    assert git(hill, "commit", "-q", "-am", "plain").code == 0
    tree = git(hill, "rev-parse", "HEAD^{tree}").out.strip()
    assert json.loads(run_cli("list", "--json").out)[0]["tree_hash"] == tree


@pytest.mark.slow
def test_index_that_differs_from_the_working_tree_is_refused(committed_hill):
    hill = committed_hill
    evaluator = hill / "eval.py"
    good = evaluator.read_text()
    evaluator.write_text(good + "\nthis is not python(\n")
    assert git(hill, "add", "eval.py").code == 0
    evaluator.write_text(good)  # the gate would see a good file, git would commit a broken one
    before = head(hill)
    refused = git(hill, "commit", "-q", "-m", "broken in the index")
    assert refused.code != 0
    assert refused.error_lines == ["error: 'eval.py' differs between the index and the working tree: the gate "
                                   "checks the working tree, so it would not vouch for what git commits; "
                                   "nothing was committed"]
    assert head(hill) == before


@pytest.mark.slow
def test_copy_of_private_data_is_refused_on_both_paths(committed_hill):
    hill = committed_hill
    (hill / "private").mkdir(exist_ok=True)
    (hill / "private" / "answers.txt").write_text("the held-out answers\n")
    (hill / "notes.txt").write_text("the held-out answers\n")
    before = head(hill)
    expected = ["error: hill 'circle-packing' failed check 'answer leak': held-out content where submitted code "
                "can see it: 'notes.txt' is a copy of 'private/answers.txt'"]
    by_hills = run_cli("commit", "circle-packing", "-m", "copy")
    assert by_hills.code == 1
    assert by_hills.error_lines == expected
    assert git(hill, "add", "-A").code == 0
    by_git = git(hill, "commit", "-q", "-m", "copy")
    assert by_git.code != 0
    assert by_git.error_lines == expected
    assert head(hill) == before
