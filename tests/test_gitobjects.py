"""The note of an eval written in Python (hills.base.gitobjects) is what
`git notes append` writes: the same objects, ids, ref and reflog; anything
but the plain case is left to git, and then git writes it."""

import os
import subprocess
import time

import pytest

from hills.base import gitobjects
from hills.base.git import Repo, clean_env

REF = "refs/notes/hills/reports"


def make_repo(folder, *commits, object_format=None):
    """A hill-like repository at `folder` with one empty commit per message."""
    repo = Repo(folder)
    os.makedirs(repo.git_dir)
    argv = ["git", "init", "-q", "--bare", repo.git_dir]
    if object_format:
        argv.insert(3, f"--object-format={object_format}")
    subprocess.run(argv, check=True, env=clean_env())
    repo.run("config", "core.bare", "false")
    repo.run("config", "core.logAllRefUpdates", "true")
    tree = repo.run("mktree", input="").strip()
    ids, parent = [], []
    for message in commits:
        commit = repo.run("commit-tree", tree, *parent, "-m", message).strip()
        ids.append(commit)
        parent = ["-p", commit]
    repo.run("update-ref", "refs/heads/main", ids[-1])
    return repo, ids


def by_git(repo, target, text):
    repo.run("notes", f"--ref={REF}", "append", "--file=-", target, input=text)


def state_of(repo):
    """What a note append leaves: the ref, the reflog, every note's text."""
    ref = repo.run("rev-parse", REF).strip()
    log = open(os.path.join(repo.git_dir, "logs", *REF.split("/")), encoding="utf-8").read()
    listed = repo.run("notes", f"--ref={REF}", "list").split()
    notes = {listed[i + 1]: repo.run("notes", f"--ref={REF}", "show", listed[i + 1]) for i in range(0, len(listed), 2)}
    return ref, log, notes


@pytest.mark.parametrize("date", ["2026-01-01T00:00:00Z", "2026-03-04T05:06:07+05:30", "@1767225600 -0700"])
def test_python_notes_are_byte_for_byte_gits(tmp_path, monkeypatch, date):
    monkeypatch.setenv("GIT_AUTHOR_DATE", date)
    monkeypatch.setenv("GIT_COMMITTER_DATE", date)
    ours, [first, second] = make_repo(tmp_path / "ours", "one", "two")
    theirs, same = make_repo(tmp_path / "theirs", "one", "two")
    assert same == [first, second]
    texts = [(first, '{"report":{"n":1}}'), (first, '{"report":{"n":2}}'), (second, '{"report":{"n":3}}'),
             (first, '{"report":{"text":"caf\\u00e9 \\"quoted\\""}}')]
    for target, text in texts:
        assert gitobjects.append_note(ours.git_dir, REF, target, text, clean_env())
        by_git(theirs, target, text)
    assert state_of(ours) == state_of(theirs)
    assert ours.run("fsck", "--strict", "--no-dangling").strip() == ""
    assert state_of(ours)[2][first].count("\n\n") == 2  # three notes, a blank line apart


def test_without_a_date_the_note_carries_now_in_the_local_zone(tmp_path, monkeypatch):
    monkeypatch.delenv("GIT_AUTHOR_DATE", raising=False)
    monkeypatch.delenv("GIT_COMMITTER_DATE", raising=False)
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        repo, [commit] = make_repo(tmp_path / "r", "one")
        before = int(time.time())
        assert gitobjects.append_note(repo.git_dir, REF, commit, '{"a":1}', clean_env())
        line = [text for text in repo.run("cat-file", "commit", REF).splitlines() if text.startswith("committer ")][0]
        seconds, zone = line.split()[-2:]
        assert before <= int(seconds) <= int(time.time())
        assert zone in ("-0500", "-0400")
        assert repo.run("notes", f"--ref={REF}", "show", commit) == '{"a":1}\n'
    finally:
        monkeypatch.undo()
        time.tzset()


def test_what_is_not_the_plain_case_is_left_to_git_which_then_writes_it(tmp_path):
    cases = {}
    repo, [commit] = make_repo(tmp_path / "packed-objects", "one")
    by_git(repo, commit, '{"a":1}')
    repo.run("repack", "-adq")
    repo.run("prune-packed")
    cases["packed objects"] = (repo, commit, '{"b":2}')
    repo, [commit] = make_repo(tmp_path / "packed-refs", "one")
    by_git(repo, commit, '{"a":1}')
    repo.run("pack-refs", "--all")
    cases["packed ref"] = (repo, commit, '{"b":2}')
    repo, [commit] = make_repo(tmp_path / "lines", "one")
    cases["two lines"] = (repo, commit, '{"a":1}\n{"b":2}')
    repo, [commit] = make_repo(tmp_path / "space", "one")
    cases["trailing space"] = (repo, commit, '{"a":1} ')
    repo, [commit] = make_repo(tmp_path / "sha256", "one", object_format="sha256")
    cases["sha256"] = (repo, commit, '{"a":1}')
    repo, [commit] = make_repo(tmp_path / "locked", "one")
    lock = os.path.join(repo.git_dir, *REF.split("/")) + ".lock"
    os.makedirs(os.path.dirname(lock))
    open(lock, "w").close()
    cases["locked ref"] = (repo, commit, '{"a":1}')
    for name, (repo, commit, text) in cases.items():
        assert not gitobjects.append_note(repo.git_dir, REF, commit, text, clean_env()), name
    assert os.path.exists(lock)  # someone else's lock is left alone
    os.unlink(lock)
    for name, (repo, commit, text) in cases.items():
        twin, _ = make_repo(tmp_path / f"twin-{name.replace(' ', '-')}", "one",
                            object_format="sha256" if name == "sha256" else None)
        if name in ("packed objects", "packed ref"):
            by_git(twin, commit, '{"a":1}')
        repo.append_note(REF, commit, text)  # the fallback: git
        by_git(twin, commit, text)
        assert state_of(repo)[2] == state_of(twin)[2], name


@pytest.mark.slow
def test_a_tree_git_might_fan_out_is_left_to_git(tmp_path):
    repo, commits = make_repo(tmp_path / "many", *[f"c{i}" for i in range(gitobjects.MAX_PLAIN_NOTES + 1)])
    for commit in commits[:gitobjects.MAX_PLAIN_NOTES]:
        assert gitobjects.append_note(repo.git_dir, REF, commit, '{"a":1}', clean_env())
    assert not gitobjects.append_note(repo.git_dir, REF, commits[-1], '{"a":1}', clean_env())
    repo.append_note(REF, commits[-1], '{"a":1}')
    assert len(repo.run("notes", f"--ref={REF}", "list").splitlines()) == gitobjects.MAX_PLAIN_NOTES + 1


def git_status(hill_dir):
    return Repo(hill_dir).run("--no-optional-locks", "status", "--porcelain", "-z", "--untracked-files=all",
                              "--no-renames")


@pytest.fixture
def settled_hill(hermetic):
    """A committed circle-packing hill whose index was written a second
    after its files, so no entry is racily clean."""
    from testing.util import run_cli

    created = run_cli("new", "plain", "-t", "circle-packing")
    assert created.code == 0, created.output
    time.sleep(1.1)
    committed = run_cli("commit", "plain", "-m", "first")
    assert committed.code == 0, committed.output
    hill_dir = created.out.strip()
    return hill_dir, Repo(hill_dir).run("rev-parse", "HEAD^{tree}").strip()


def clean(hill_dir, tree):
    from hills.disk import hill

    blobs = hill.excluded_blobs(hill_dir)
    assert blobs is not None
    return gitobjects.clean_by_stat(os.path.join(hill_dir, ".vc"), hill_dir, tree, blobs)


@pytest.mark.slow
def test_a_clean_hill_is_known_clean_without_git_and_every_change_sends_the_question_to_git(settled_hill):
    from hills.run import plan
    from hills.disk.hill import Hill

    hill_dir, tree = settled_hill
    assert git_status(hill_dir) == "" and clean(hill_dir, tree)
    os.makedirs(os.path.join(hill_dir, "__pycache__"), exist_ok=True)
    open(os.path.join(hill_dir, "__pycache__", "eval.cpython-311.pyc"), "wb").close()
    open(os.path.join(hill_dir, "tests", "x.pyc"), "wb").close()
    assert git_status(hill_dir) == "" and clean(hill_dir, tree)  # ignored alike
    eval_py = os.path.join(hill_dir, "eval.py")
    original = open(eval_py).read()
    changes = {
        "edited": lambda: open(eval_py, "a").write("# edited\n"),
        "made executable": lambda: os.chmod(eval_py, 0o755),
        "untracked": lambda: open(os.path.join(hill_dir, "notes.txt"), "w").write("x"),
        "untracked in a new folder": lambda: (os.makedirs(os.path.join(hill_dir, "extra")),
                                              open(os.path.join(hill_dir, "extra", "a.py"), "w").write("x")),
        "deleted": lambda: os.unlink(eval_py),
        "staged": lambda: (open(eval_py, "a").write("# staged\n"),
                           Repo(hill_dir).run("add", "eval.py")),
        "a .gitignore": lambda: open(os.path.join(hill_dir, "tests", ".gitignore"), "w").write("!*.pyc\n"),
    }
    for name, change in changes.items():
        change()
        assert git_status(hill_dir) != "", name
        assert not clean(hill_dir, tree), name
        hill = Hill(hill_dir)
        assert plan.is_dirty(hill, tree) == plan.is_dirty(hill), name  # git's own list
        # Back to the committed state, the index included.
        Repo(hill_dir).run("reset", "-q", "--hard", "HEAD")
        for leftover in ("notes.txt", os.path.join("tests", ".gitignore")):
            if os.path.exists(os.path.join(hill_dir, leftover)):
                os.unlink(os.path.join(hill_dir, leftover))
        if os.path.isdir(os.path.join(hill_dir, "extra")):
            import shutil

            shutil.rmtree(os.path.join(hill_dir, "extra"))
        os.chmod(eval_py, 0o644)
        assert open(eval_py).read() == original and git_status(hill_dir) == "", name


def test_the_fixed_excludes_are_the_ones_hills_writes():
    from hills.disk import hill

    rules = ["/" + name + "/" for name in gitobjects.TOP_FOLDERS]
    rules += [name + "/" for name in gitobjects.ANY_FOLDERS if name not in gitobjects.ANY_FILES]
    rules += ["*.py[cod]"] if set(gitobjects.ANY_SUFFIXES) == {".pyc", ".pyo", ".pyd"} else []
    rules += list(gitobjects.ANY_FILES)
    assert sorted(rules) == sorted(hill.BASE_EXCLUDES)
    assert hill.excluded_blobs is not None
