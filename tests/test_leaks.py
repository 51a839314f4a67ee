"""The leak audit at commit (issue 5 item 4): `hills commit` (and the
pre-commit hook of a plain `git commit`) refuses, naming the path, when a
private file's exact bytes are reachable in `.vc` (an earlier commit, a
tag, a stash, a note, a reflog) or when a path under private/ appears in its
history. The leaks are planted with plain git plumbing, as a careless or
opportunistic climber would."""

import pytest

from testing.util import git
from testing.eval_fixtures import hills, make_hill, on_machine

SECRET = "the held-out answer is 4242\n"
EVAL = """\
    def eval(submission, *, final=False, **params):
        return {"passed": True, "metrics": [{"name": "m", "value": 1.0, "direction": "max"}]}
    """


@pytest.fixture(scope="module")
def guarded(module_machine):
    with on_machine(module_machine):
        return make_hill("guarded", EVAL, private={"secret.txt": SECRET, "nested/table.csv": "a,b\n1,2\n"})


@pytest.fixture
def hill(guarded):
    """The module's hill, cleaned of every planted leak after each test."""
    yield guarded
    for ref in git(guarded, "for-each-ref", "--format=%(refname)").out.split():
        if ref != "refs/heads/main" and not ref.startswith("refs/notes/hills/"):
            assert git(guarded, "update-ref", "-d", ref).code == 0
    head = git(guarded, "rev-parse", "HEAD").out.strip()
    assert git(guarded, "reflog", "expire", "--expire=now", "--expire-unreachable=now", "--all").code == 0
    assert git(guarded, "gc", "--quiet", "--prune=now").code == 0
    assert git(guarded, "rev-parse", "HEAD").out.strip() == head
    assert hills("commit", "guarded", "-m", "nothing changed").code == 1  # clean: only "nothing to commit"


def plumb(hill_dir, *args, input=None):
    done = git(hill_dir, *args, input=input)
    assert done.code == 0, done.output
    return done.out.strip()


def secret_blob(hill_dir):
    return plumb(hill_dir, "hash-object", "-w", "--", "private/secret.txt")


def commit_with(hill_dir, entries, parent=True, message="side"):
    """A commit (plumbing only) whose tree is `entries`: [(mode, kind, id, path)]."""
    tree = plumb(hill_dir, "mktree", input="".join(f"{m} {k} {i}\t{p}\n" for m, k, i, p in entries))
    args = ["commit-tree", tree, "-m", message]
    if parent:
        args += ["-p", plumb(hill_dir, "rev-parse", "HEAD")]
    return plumb(hill_dir, *args)


def refused_naming(hill_dir, *words):
    (hill_dir / "README.md").write_text((hill_dir / "README.md").read_text() + "\nOne more line.\n")
    try:
        result = hills("commit", "guarded", "-m", "after a leak")
    finally:
        git(hill_dir, "checkout", "--", "README.md")
    assert result.code == 1, result.output
    assert result.out == ""
    errors = [line for line in result.err.splitlines() if line.startswith("error: ")]
    assert errors, result.err
    for word in words:
        assert word in errors[0], (word, errors[0])
    assert "nothing was committed" in errors[0]
    return errors[0]


def content_refusal(hill_dir):
    return refused_naming(hill_dir, "'private/secret.txt'", "reachable", "hill 'guarded'")


@pytest.mark.slow
def test_private_bytes_in_an_earlier_commit_on_a_side_branch(hill):
    side = commit_with(hill, [("100644", "blob", secret_blob(hill), "notes.txt")])
    plumb(hill, "update-ref", "refs/heads/side", side)
    head_before = plumb(hill, "rev-parse", "HEAD")
    content_refusal(hill)
    assert plumb(hill, "rev-parse", "HEAD") == head_before


def test_private_bytes_in_a_tag(hill):
    plumb(hill, "tag", "-a", "-m", "a tag", "leaky", secret_blob(hill))
    content_refusal(hill)


@pytest.mark.slow
def test_private_bytes_in_a_lightweight_tag_to_a_blob(hill):
    plumb(hill, "update-ref", "refs/tags/raw", secret_blob(hill))
    content_refusal(hill)


def test_private_bytes_in_a_stash(hill):
    stash = commit_with(hill, [("100644", "blob", secret_blob(hill), "README.md")], message="WIP on main")
    plumb(hill, "update-ref", "refs/stash", stash)
    content_refusal(hill)


def test_private_bytes_in_a_note(hill):
    plumb(hill, "notes", "--ref=refs/notes/commits", "add", "-C", secret_blob(hill), "HEAD")
    content_refusal(hill)


def test_private_bytes_only_in_a_reflog(hill):
    """Reset away but still in the reflog: reachable, so refused."""
    head = plumb(hill, "rev-parse", "HEAD")
    leaky = commit_with(hill, [("100644", "blob", secret_blob(hill), "leak.txt")])
    plumb(hill, "update-ref", "-m", "leak", "refs/heads/main", leaky, head)
    plumb(hill, "update-ref", "-m", "undo", "refs/heads/main", head, leaky)
    content_refusal(hill)


def test_a_private_path_in_history(hill):
    other = plumb(hill, "hash-object", "-w", "--stdin", input="not the current private content\n")
    private_tree = plumb(hill, "mktree", input=f"100644 blob {other}\tx\n")
    side = commit_with(hill, [("040000", "tree", private_tree, "private")])
    plumb(hill, "update-ref", "refs/heads/old", side)
    message = refused_naming(hill, "'private", "in the history of hill 'guarded'")
    assert "private/x" in message or "'private'" in message


@pytest.mark.slow
def test_a_plain_git_commit_is_refused_by_the_hook_too(hill):
    side = commit_with(hill, [("100644", "blob", secret_blob(hill), "notes.txt")])
    plumb(hill, "update-ref", "refs/heads/side", side)
    (hill / "README.md").write_text((hill / "README.md").read_text() + "\nThrough git.\n")
    try:
        git(hill, "add", "README.md")
        done = git(hill, "commit", "-m", "through plain git")
        assert done.code != 0, done.output
        assert "'private/secret.txt'" in done.err and "reachable" in done.err
    finally:
        git(hill, "reset", "-q", "HEAD", "--", "README.md")
        git(hill, "checkout", "--", "README.md")


def test_an_unreachable_object_alone_does_not_block(hill):
    """A decision of the project: only what refs and reflogs reach can leave
    the machine with the repository, so a dangling blob (a `git add` undone)
    does not block; `git gc --prune=now` drops it."""
    secret_blob(hill)
    (hill / "README.md").write_text((hill / "README.md").read_text() + "\nStill clean.\n")
    result = hills("commit", "guarded", "-m", "a dangling blob is not a leak")
    assert result.code == 0, result.output


@pytest.mark.slow
def test_a_clean_hill_commits(hill):
    (hill / "README.md").write_text((hill / "README.md").read_text() + "\nClean.\n")
    result = hills("commit", "guarded", "-m", "clean")
    assert result.code == 0, result.output


@pytest.mark.slow
def test_a_private_path_hidden_behind_a_duplicate_tree(hill):
    """rev-list --objects names a tree once, by the first path it meets:
    the same tree under backup/ and private/ must still be found."""
    other = plumb(hill, "hash-object", "-w", "--stdin", input="an older held-out table\n")
    shared = plumb(hill, "mktree", input=f"100644 blob {other}\tx\n")
    side = commit_with(hill, [("040000", "tree", shared, "backup"), ("040000", "tree", shared, "private")])
    plumb(hill, "update-ref", "refs/heads/dup", side)
    refused_naming(hill, "'private/x'", "in the history of hill 'guarded'")
