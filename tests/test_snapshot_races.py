"""The submission snapshot against a folder that changes while it is
copied: an entry swapped for a link to a secret, deleted, or a folder
replaced by a link between the listing and the open is refused by name and
never followed; a link is judged on the text read once, within the
snapshot; and a link flipped between an inside file and the held-out data
while evals run never scores the held-out data and never crashes hills."""

import os
import threading

import pytest

from testing.eval_fixtures import hills, last_report, make_hill, submission, tree_of
from hills.run import snapshot
from hills.base.errors import Refused

MARKER = "the-answer-key-7731"


@pytest.fixture
def outside(tmp_path):
    """A secret next to the submission, and the submission."""
    (tmp_path / "secret").write_text(MARKER)
    sub = submission(tmp_path / "sub", {"a.txt": "inside\n", "deep/b.txt": "deeper\n"})
    return sub


def copied(target):
    """{relative path: text} of every file readable in the copy, links followed."""
    seen = {}
    for folder, _, files in os.walk(target):
        for name in files:
            path = os.path.join(folder, name)
            try:
                with open(path) as handle:
                    seen[os.path.relpath(path, target)] = handle.read()
            except OSError:
                pass
    return seen


def after_lstat(monkeypatch, name, change):
    """Run `change()` once, right after the snapshot lstats entry `name`."""
    real_stat = os.stat
    done = []

    def stat(path, *args, **kwargs):
        result = real_stat(path, *args, **kwargs)
        if path == name and kwargs.get("dir_fd") is not None and not done:
            done.append(True)
            change()
        return result

    monkeypatch.setattr(os, "stat", stat)


def refused_by_name(sub, target, rel):
    with pytest.raises(Refused) as refused:
        snapshot.snapshot(sub, target)
    assert refused.value.message == f"submission entry '{rel}' changed while it was copied"
    assert MARKER not in "".join(copied(target).values())


def test_a_file_swapped_for_a_link_to_a_secret_after_its_lstat_is_refused(outside, tmp_path, monkeypatch):
    def swap():
        os.unlink(outside / "a.txt")
        os.symlink("../secret", outside / "a.txt")

    after_lstat(monkeypatch, "a.txt", swap)
    refused_by_name(outside, tmp_path / "copy", "a.txt")


def test_a_file_deleted_after_its_lstat_is_refused(outside, tmp_path, monkeypatch):
    after_lstat(monkeypatch, "a.txt", lambda: os.unlink(outside / "a.txt"))
    refused_by_name(outside, tmp_path / "copy", "a.txt")


def test_a_file_replaced_by_another_after_its_lstat_is_refused(outside, tmp_path, monkeypatch):
    def replace():
        (outside / "other").write_text("other\n")
        os.replace(outside / "other", outside / "a.txt")

    after_lstat(monkeypatch, "a.txt", replace)
    refused_by_name(outside, tmp_path / "copy", "a.txt")


def test_a_file_swapped_for_a_fifo_after_its_lstat_is_refused_without_blocking(outside, tmp_path, monkeypatch):
    def swap():
        os.unlink(outside / "a.txt")
        os.mkfifo(outside / "a.txt")

    after_lstat(monkeypatch, "a.txt", swap)
    refused_by_name(outside, tmp_path / "copy", "a.txt")


def test_a_folder_replaced_by_a_link_after_its_lstat_is_refused(outside, tmp_path, monkeypatch):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "b.txt").write_text(MARKER)

    def swap():
        os.rename(outside / "deep", tmp_path / "moved")
        os.symlink("../elsewhere", outside / "deep")

    after_lstat(monkeypatch, "deep", swap)
    refused_by_name(outside, tmp_path / "copy", "deep")


def test_an_entry_that_vanishes_after_the_listing_is_refused(outside, tmp_path, monkeypatch):
    real_listdir = os.listdir

    def listdir(fd):
        names = real_listdir(fd)
        if "a.txt" in names:
            os.unlink(outside / "a.txt")
        return names

    monkeypatch.setattr(os, "listdir", listdir)
    refused_by_name(outside, tmp_path / "copy", "a.txt")


def test_a_file_that_grows_while_it_is_copied_is_refused(outside, tmp_path, monkeypatch):
    real_read = os.read

    def read(fd, size):
        chunk = real_read(fd, size)
        if chunk == b"inside\n":
            with open(outside / "a.txt", "a") as handle:
                handle.write("more\n")
        return chunk

    monkeypatch.setattr(os, "read", read)
    refused_by_name(outside, tmp_path / "copy", "a.txt")


def flip_after_reading(monkeypatch, outside, first, then):
    """The link `leak` points at `first`; right after hills reads its text,
    it is replaced by one pointing at `then`."""
    os.symlink(first, outside / "leak")
    real_readlink = os.readlink

    def readlink(path, *args, **kwargs):
        text = real_readlink(path, *args, **kwargs)
        os.unlink(outside / "leak")
        os.symlink(then, outside / "leak")
        return text

    monkeypatch.setattr(os, "readlink", readlink)


def test_a_link_is_judged_on_the_text_read_once(outside, tmp_path, monkeypatch):
    # Read while it points outside, flipped inside just after: still refused.
    flip_after_reading(monkeypatch, outside, "../secret", "a.txt")
    with pytest.raises(Refused, match="submission symlink 'leak' points outside the submission"):
        snapshot.snapshot(outside, tmp_path / "copy")


def test_a_link_read_inside_and_flipped_outside_is_copied_as_read(outside, tmp_path, monkeypatch):
    flip_after_reading(monkeypatch, outside, "a.txt", "../secret")
    snapshot.snapshot(outside, tmp_path / "copy")
    assert os.readlink(tmp_path / "copy" / "leak") == "a.txt"
    assert MARKER not in "".join(copied(tmp_path / "copy").values())


@pytest.mark.parametrize("links", [
    {"here": ".", "leak": "here/../secret"},
    {"deep/up": "..", "leak": "deep/up/../secret"},
    {"deep/top": "..", "deep/out": "top/../secret"},
])
def test_a_chain_of_links_climbing_out_is_refused(outside, tmp_path, links):
    for name, text in links.items():
        os.symlink(text, outside / name)
    with pytest.raises(Refused, match="points outside the submission"):
        snapshot.snapshot(outside, tmp_path / "copy")


def test_links_through_links_inside_are_kept(outside, tmp_path):
    os.symlink("deep", outside / "d")
    os.symlink("d/../a.txt", outside / "via")
    os.symlink("d/b.txt", outside / "b")
    snapshot.snapshot(outside, tmp_path / "copy")
    assert copied(tmp_path / "copy")["via"] == "inside\n"
    assert copied(tmp_path / "copy")["b"] == "deeper\n"


# -- the flip, raced for real ----------------------------------------------

def flipping(link, targets):
    """A thread that flips `link` between `targets` until stopped."""
    stop = threading.Event()

    def flip():
        turn = 0
        spare = str(link) + ".next"
        while not stop.is_set():
            turn += 1
            try:
                os.symlink(targets[turn % 2], spare)
                os.replace(spare, link)
            except OSError:
                pass

    thread = threading.Thread(target=flip, daemon=True)
    thread.start()
    return stop, thread


@pytest.mark.slow
def test_a_flipped_link_never_copies_the_secret_in_1000_snapshots(outside, tmp_path):
    os.symlink("a.txt", outside / "leak")
    stop, thread = flipping(outside / "leak", ["a.txt", "../secret"])
    outcomes = {"copied": 0, "refused": 0, "leaked": 0}
    try:
        for turn in range(1000):
            target = tmp_path / f"copy{turn}"
            try:
                snapshot.snapshot(outside, target)
            except Refused:
                outcomes["refused"] += 1
            else:
                outcomes["copied"] += 1
                outcomes["leaked"] += MARKER in "".join(copied(target).values())
            snapshot.remove(target)
    finally:
        stop.set()
        thread.join()
    assert outcomes["leaked"] == 0, outcomes
    assert outcomes["copied"] and outcomes["refused"], outcomes  # the race did run both ways


READS_THE_ANSWER_EVAL = """\
    from pathlib import Path

    def eval(submission, *, final=False, **params):
        try:
            text = (Path(submission) / "answer").read_text()
        except OSError:
            text = ""
        leaked = "{marker}"[::-1] in text
        return {{"passed": not leaked,
                 "metrics": [{{"name": "leaked", "value": 1.0 if leaked else 0.0, "direction": "max"}}]}}
    """


@pytest.mark.slow
def test_a_link_flipped_to_the_answer_key_during_100_evals_never_scores_it(tmp_path):
    # Spelled backwards: an evaluator holding the answer key fails the answer-leak scan.
    hill = make_hill("flipped", READS_THE_ANSWER_EVAL.format(marker=MARKER[::-1]),
                     private={"labels.json": MARKER + "\n"})
    sub = submission(tmp_path / "sub", {"inside.txt": "nothing here\n"})
    os.symlink("inside.txt", sub / "answer")
    stop, thread = flipping(sub / "answer", ["inside.txt", "../hill/private/labels.json"])
    codes: dict[int, int] = {}
    try:
        for _ in range(100):
            result = hills("eval", sub, "-H", "flipped", "--json")
            codes[result.code] = codes.get(result.code, 0) + 1
            assert result.code in (0, 1), result.output
            if result.code == 0:
                assert result.report["metrics"][0]["value"] == 0.0
            else:  # a scored answer key would be a failing report, not a refusal
                assert result.report["status"] == "refused", result.output
                assert "'answer" in result.report["reason"], result.output
    finally:
        stop.set()
        thread.join()
    assert codes.get(1), codes  # some evals did see the link pointing at the answer key
    logged = last_report("flipped", tree_of(hill))
    assert logged["status"] in ("passing", "refused")
