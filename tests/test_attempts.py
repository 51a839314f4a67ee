"""`hills attempts` and `hills-chain`: the history of a hill version and the
exact line where its chained log breaks: an edited, deleted, moved or
garbage line, a cleanly cut tail (caught through the hill's notes even
without the `.head` file), and a deleted log."""

import json
import shutil

import pytest

from testing.util import lines_of, write_lines
from testing.eval_fixtures import hills, on_machine, real, submission, three_evals


@pytest.fixture(scope="module")
def pristine(module_machine, tmp_path_factory):
    """A hill with three logged evals (scores 1, 3, 2) and a copy of its log:
    six lines, each eval's started entry and then its outcome."""
    with on_machine(module_machine):
        _, log, saved = three_evals("tried", tmp_path_factory)
        return log, saved


@pytest.fixture
def log(pristine):
    """The log, restored before and after each test."""
    path, saved = pristine

    def restore():
        shutil.copy(saved / "log", path)
        shutil.copy(saved / "head", str(path) + ".head")

    restore()
    yield path
    restore()


def broken(line, *words):
    result = hills("attempts", "tried")
    assert result.code == 1, result.output
    assert f"chain BROKEN at line {line} of " in result.out
    for word in words:
        assert word in result.out
    as_json = hills("attempts", "tried", "--json")
    assert as_json.code == 1
    chain = json.loads(as_json.out)["chain"]
    assert chain["ok"] is False and chain["break_line"] == line
    return result


def test_intact_history_shows_attempts_best_and_chain(log):
    result = hills("attempts", "tried")
    assert result.code == 0, result.output
    assert "tried @ " in result.out and "3 attempt(s)" in result.out
    lines = result.out.splitlines()
    assert lines[1] == "     #  TIMESTAMP             SUBMISSION                VS BEST  RESULT"
    # Every column starts where its header does.
    for line in lines[2:5]:
        assert line[6] == " " and line[8:28].endswith("Z") and line[30:37] == "blake3:" and line[65:71] == "PASSED"
    # Scores 1, 3, 2: each against the best before it, a new best starred.
    assert [line[51:63].strip() for line in lines[2:5]] == ["first", "+2 *", "-1"]
    assert "chain intact: 6 entries" in result.out
    best = result.out.split("best:")[1]
    assert "#2:" in best and "total=3" in best and "(of 3 passing)" in best
    # One number per eval, 1, 2, 3, in the table as in the JSON; the log's seq counts started entries too.
    assert [line[2:6].strip() for line in lines[2:5]] == ["#1", "#2", "#3"]
    data = json.loads(hills("attempts", "tried", "--json").out)
    assert [a["seq"] for a in data["attempts"]] == [1, 3, 5] and data["unfinished"] == []
    assert [a["number"] for a in data["attempts"]] == [1, 2, 3]
    assert [a["report"]["metrics"][0]["value"] for a in data["attempts"]] == [1.0, 3.0, 2.0]
    assert data["best"][0]["report"]["metrics"][0]["value"] == 3.0
    assert data["chain"] == {"ok": True, "count": 6, "problems": [], "break_line": None}


def test_edited_line(log):
    lines = lines_of(log)
    lines[3] = lines[3].replace(b'"value":3.0', b'"value":30.0')
    write_lines(log, lines)
    broken(4, "line 4: signature does not match its content (edited)")


def test_deleted_line(log):
    lines = lines_of(log)
    del lines[1]
    write_lines(log, lines)
    broken(2, "line 2: seq 2 follows seq 0")


def test_moved_lines(log):
    lines = lines_of(log)
    lines[1], lines[2] = lines[2], lines[1]
    write_lines(log, lines)
    broken(2, "line 2: seq 2 follows seq 0")


def test_garbage_line(log):
    write_lines(log, lines_of(log) + [b"garbage, not json\n"])
    broken(7, "line 7: not valid JSON")


def test_half_written_last_line(log):
    data = log.read_bytes()
    log.write_bytes(data[:-40])
    broken(6, "line 6: truncated")


def test_cut_tail_is_caught_through_the_notes(log):
    write_lines(log, lines_of(log)[:-1])
    head_file = log.parent / (log.name + ".head")
    head_file.unlink()  # an attacker who cuts the tail removes the head file too
    result = broken(6, "1 line(s) missing at the end", "checked against the hill's notes")
    # The eval whose outcome was cut off is left with its started entry.
    assert "3 attempt(s), 1 abandoned" in result.out


def test_cut_tail_is_caught_by_the_head_file_too(log):
    write_lines(log, lines_of(log)[:-1])
    broken(6, "its head records seq 5")
    chain = real("hills-chain", "verify", log)
    assert chain.code == 1 and f"chain BROKEN at line 6 of {log}" in chain.out


def test_deleted_log_is_caught_through_the_notes(log):
    log.unlink()
    (log.parent / (log.name + ".head")).unlink()
    broken(1, "the log has no entries", "checked against the hill's notes")


def test_eval_refuses_to_extend_a_broken_chain(log, tmp_path):
    lines = lines_of(log)
    lines[-1] = lines[-1].replace(b'"value":2.0', b'"value":20.0')
    write_lines(log, lines)
    result = hills("eval", submission(tmp_path / "s", {"score.txt": "5"}), "-H", "tried")
    assert result.code == 5, result.output
    assert "line 6" in result.err and "refusing to extend a broken chain" in result.err
    assert "hint: " in result.err
    assert lines_of(log) == lines


def test_attempts_usage_errors(log):
    result = hills("attempts", "no-such-hill")
    assert result.code == 2 and "no hill named 'no-such-hill'" in result.err
    result = hills("attempts", "tried", "--current")
    assert result.code == 0 and "0 attempt(s)" in result.out


def test_hills_chain_on_a_file_of_its_own(module_machine, tmp_path):
    path = tmp_path / "mine.jsonl"
    for number in range(3):
        appended = real("hills-chain", "append", path, input=json.dumps({"n": number}))
        assert appended.code == 0, appended.output
        assert json.loads(appended.out)["seq"] == number
    verified = real("hills-chain", "verify", path)
    assert verified.code == 0 and f"chain intact: 3 entries in {path}" in verified.out
    shown = real("hills-chain", "show", path, "--json")
    assert [entry["n"] for entry in json.loads(shown.out)] == [0, 1, 2]
    assert len(real("hills", "chain", "show", path).out.splitlines()) == 3

    reserved = real("hills-chain", "append", path, input='{"seq": 9}')
    assert reserved.code == 2 and "record field 'seq' is reserved" in reserved.err
    not_object = real("hills-chain", "append", path, input="[1]")
    assert not_object.code == 2 and "JSON object" in not_object.err
    bad_head = real("hills-chain", "verify", path, "--head", "{nope")
    assert bad_head.code == 2 and "--head: not valid JSON" in bad_head.err

    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + lines[1].replace(b'"n":1', b'"n":7') + lines[2])
    verified = real("hills-chain", "verify", path)
    assert verified.code == 1 and f"chain BROKEN at line 2 of {path}" in verified.out
    assert "line 2: signature does not match its content (edited)" in verified.out


def test_each_eval_is_numbered_once_in_the_order_it_began():
    from hills.views.attempts import numbered

    entries = [{"seq": 0, "started": {"run_id": "a"}},            # 1: began first
               {"seq": 1, "started": {"run_id": "b"}},            # 2: still running, or abandoned
               {"seq": 2, "report": {"run_id": "a"}, "start": {"seq": 0, "mac": "m"}},   # 1, its outcome
               {"seq": 3, "report": {"run_id": "c"}, "start": None},  # 3: refused before it started
               {"seq": 4, "cluster": {"event": "lost"}},          # a note, no eval
               {"seq": 5, "report": {"run_id": "d"}},             # 4: from before started entries
               {"seq": 6, "started": {"run_id": "e"}},            # 5
               {"seq": 7, "report": {"run_id": "e"}, "start": {"seq": 6, "mac": "m"}}]  # 5
    assert numbered(entries) == {0: 1, 1: 2, 2: 1, 3: 3, 5: 4, 6: 5, 7: 5}
