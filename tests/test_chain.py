import hashlib
import json
import multiprocessing
import os
import re

import pytest

from testing.util import lines_of, write_lines
from hills.base import ed25519, state
from hills.evidence import chain, trust
from hills.base.errors import Refused, UsageError
from hills.evidence.signing import canonical_json

KEY = trust.Keys(None, None, b"\x03" * 32, can_sign=True)
LINE_SHAPE = re.compile(rb'\{.*,"sig":"ed25519:[0-9a-f]{128}"\}\n\Z', re.S)


def record(index):
    return {"attempt": index, "score": index / 7, "status": "passing", "note": f"try {index} ✓"}


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "state" / "hill@abc" / "attempts.jsonl"
    for index in range(5):
        chain.append(path, record(index), KEY)
    return path


def drop_head_file(path):
    os.unlink(chain.head_path(path))


def test_append_five_and_verify(log):
    report = chain.verify(log, KEY)
    assert report.ok and report.count == 5 and report.problems == [] and report.break_line is None
    entries = chain.read(log)
    assert [entry["seq"] for entry in entries] == [0, 1, 2, 3, 4]
    assert entries[0]["prev"] == ""
    for before, after in zip(entries, entries[1:]):
        assert after["prev"] == before["mac"]
    assert chain.head(log) == {"seq": 4, "mac": entries[-1]["mac"]}


def test_line_format_is_canonical_body_plus_signature(log):
    prev = ""
    for raw in lines_of(log):
        assert LINE_SHAPE.match(raw)
        entry = json.loads(raw)
        assert list(entry)[-1] == "sig"
        assert entry["prev"] == prev
        sig = entry.pop("sig")
        body = canonical_json(entry)
        assert raw == body[:-1] + b',"sig":"' + sig.encode() + b'"}\n'
        assert ed25519.verify(KEY.public, body, bytes.fromhex(sig.removeprefix("ed25519:")))
        prev = "sha256:" + hashlib.sha256(raw[:-1]).hexdigest()


def test_append_returns_the_entry_written(tmp_path):
    path = tmp_path / "log.jsonl"
    first = chain.append(path, {"a": 1}, KEY)
    second = chain.append(path, {"a": 2}, KEY)
    assert first["seq"] == 0 and first["prev"] == "" and first["a"] == 1
    assert second["seq"] == 1 and second["prev"] == first["mac"]
    assert chain.read(path) == [first, second]


def test_head_file_is_signed_json(log):
    stored = json.loads(open(chain.head_path(log)).read())
    assert stored["seq"] == 4 and stored["mac"] == chain.read(log)[-1]["mac"]
    assert stored["signature"].startswith("ed25519:")
    body = canonical_json({"mac": stored["mac"], "seq": stored["seq"]})
    assert ed25519.verify(KEY.public, body, bytes.fromhex(stored["signature"].removeprefix("ed25519:")))


@pytest.mark.parametrize("name", ["seq", "prev", "mac", "sig"])
def test_reserved_fields_are_refused(tmp_path, name):
    with pytest.raises(UsageError) as caught:
        chain.append(tmp_path / "log.jsonl", {name: 1}, KEY)
    assert caught.value.exit_code == 2
    assert f"'{name}'" in caught.value.message and "reserved" in caught.value.message


def test_non_finite_record_value_is_refused(tmp_path):
    with pytest.raises(UsageError) as caught:
        chain.append(tmp_path / "log.jsonl", {"metrics": [{"value": float("nan")}]}, KEY)
    assert "'metrics[0].value'" in caught.value.message


def test_edited_line(log):
    lines = lines_of(log)
    lines[2] = lines[2].replace(b'"status":"passing"', b'"status":"failing"')
    write_lines(log, lines)
    report = chain.verify(log, KEY)
    assert not report.ok
    assert report.break_line == 3
    assert report.problems == ["line 3: signature does not match its content (edited)"]
    assert report.count == 4


def test_deleted_line(log):
    lines = lines_of(log)
    del lines[2]
    write_lines(log, lines)
    drop_head_file(log)
    report = chain.verify(log, KEY)
    assert report.break_line == 3
    assert report.problems[0] == "line 3: seq 3 follows seq 1 (a line was deleted or moved)"
    assert report.problems[1] == "line 3: prev does not match the link of line 2 (the chain is broken here)"
    assert len(report.problems) == 2
    assert report.count == 3


def test_swapped_lines(log):
    lines = lines_of(log)
    lines[1], lines[2] = lines[2], lines[1]
    write_lines(log, lines)
    report = chain.verify(log, KEY)
    assert report.break_line == 2
    assert report.problems[0] == "line 2: seq 2 follows seq 0 (a line was deleted or moved)"
    assert "line 3: seq 1 follows seq 2 (a line was moved or repeated)" in report.problems
    assert any(problem.startswith("line 4: seq 3 follows seq 1") for problem in report.problems)


def test_repeated_line(log):
    lines = lines_of(log)
    lines.insert(3, lines[2])
    write_lines(log, lines)
    drop_head_file(log)
    report = chain.verify(log, KEY)
    assert report.break_line == 4
    assert report.problems[0] == "line 4: seq 2 follows seq 2 (a line was moved or repeated)"


def test_garbage_line(log):
    lines = lines_of(log)
    lines.insert(2, b"this is not json\n")
    write_lines(log, lines)
    report = chain.verify(log, KEY)
    assert report.break_line == 3
    assert report.problems == ["line 3: not valid JSON"]
    assert report.count == 5


def test_empty_and_foreign_lines(log):
    lines = lines_of(log)
    lines.insert(1, b"\n")
    lines.insert(3, b'{"seq": 1, "prev": "x"}\n')
    write_lines(log, lines)
    report = chain.verify(log, KEY)
    assert report.problems[0] == "line 2: empty line"
    assert report.problems[1] == "line 4: no signature (not written by a hills log)"
    assert report.break_line == 2


def test_last_line_cut_in_half(log):
    data = log.read_bytes()
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    cut = last_start + (len(data) - last_start) // 2
    log.write_bytes(data[:cut])
    report = chain.verify(log, KEY)
    assert report.break_line == 5
    assert report.problems[0] == "line 5: truncated (no newline at end of file)"
    assert report.count == 4
    assert chain.head(log)["seq"] == 3
    with pytest.raises(Refused) as caught:
        chain.append(log, record(9), KEY)
    assert caught.value.exit_code == 1
    assert f"'{log}'" in caught.value.message
    assert "line 5" in caught.value.message and "truncated" in caught.value.message


def test_missing_final_newline_only(log):
    log.write_bytes(log.read_bytes()[:-1])
    report = chain.verify(log, KEY)
    assert report.problems[0] == "line 5: truncated (no newline at end of file)"


def test_last_two_lines_dropped_cleanly_is_caught_by_the_head_file(log):
    write_lines(log, lines_of(log)[:3])
    report = chain.verify(log, KEY)
    assert not report.ok
    assert report.problems == ["the log ends at seq 2 but its head records seq 4: 2 line(s) missing at the end"]
    assert report.break_line == 4
    assert report.count == 3
    with pytest.raises(Refused) as caught:
        chain.append(log, record(9), KEY)
    assert "2 line(s) missing" in caught.value.message and f"'{log}'" in caught.value.message


def test_caller_head_catches_a_dropped_tail_without_the_head_file(log):
    kept = chain.head(log)
    write_lines(log, lines_of(log)[:3])
    drop_head_file(log)
    assert chain.verify(log, KEY).ok  # nothing left to compare with
    report = chain.verify(log, KEY, head=kept)
    assert report.problems == ["the log ends at seq 2 but its head records seq 4: 2 line(s) missing at the end"]


def test_older_caller_head_still_matches(log):
    entries = chain.read(log)
    assert chain.verify(log, KEY, head={"seq": 2, "mac": entries[2]["mac"]}).ok


def test_caller_head_with_another_mac_means_rewritten(log):
    report = chain.verify(log, KEY, head={"seq": 2, "mac": "sha256:" + "0" * 64})
    assert report.problems == ["the entry with seq 2 does not match the head's mac (the log was rewritten)"]


def test_deleted_log_with_head_left(log):
    log.write_bytes(b"")
    report = chain.verify(log, KEY)
    assert report.problems == ["the log has no entries but its head records seq 4: 5 line(s) missing at the end"]
    with pytest.raises(Refused) as caught:
        chain.append(log, record(0), KEY)
    assert "deleted or emptied" in caught.value.message


def test_edited_head_file(log):
    target = chain.head_path(log)
    stored = json.loads(open(target).read())
    stored["seq"] = 2
    open(target, "w").write(json.dumps(stored))
    report = chain.verify(log, KEY)
    assert any("INVALID signature" in problem for problem in report.problems)
    with pytest.raises(Refused):
        chain.append(log, record(5), KEY)


def test_first_line_deleted(log):
    write_lines(log, lines_of(log)[1:])
    drop_head_file(log)
    report = chain.verify(log, KEY)
    assert report.break_line == 1
    assert report.problems[0].startswith("line 1: seq 1 where the log should start at seq 0")
    assert report.problems[1].startswith("line 1: prev is not empty on the first entry")


def test_edited_last_line_refuses_append(log):
    lines = lines_of(log)
    lines[-1] = lines[-1].replace(b'"attempt":4', b'"attempt":5')
    write_lines(log, lines)
    with pytest.raises(Refused) as caught:
        chain.append(log, record(5), KEY)
    assert "line 5" in caught.value.message and "valid signature" in caught.value.message


def test_wrong_key(log):
    report = chain.verify(log, trust.Keys(None, None, b"\x04" * 32))
    assert report.count == 0
    assert report.problems[0] == "line 1: signature does not match its content (edited)"


def test_append_after_a_crash_between_line_and_head(tmp_path):
    path = tmp_path / "log.jsonl"
    last = None
    for index in range(3):
        last = chain.append(path, record(index), KEY)
    line, _ = chain.encode_entry(record(3), 3, last["mac"], KEY)
    with open(path, "ab") as handle:
        handle.write(line)
    entry = chain.append(path, record(4), KEY)
    assert entry["seq"] == 4
    assert chain.verify(path, KEY).ok


def test_missing_and_empty_logs(tmp_path):
    path = tmp_path / "none.jsonl"
    report = chain.verify(path, KEY)
    assert report.ok and report.count == 0
    assert chain.read(path) == [] and chain.head(path) is None
    path.write_bytes(b"")
    assert chain.verify(path, KEY).ok


def test_relative_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    chain.append("log.jsonl", {"a": 1}, KEY)
    chain.append("log.jsonl", {"a": 2}, KEY)
    assert chain.verify("log.jsonl", KEY).count == 2


def test_read_keeps_broken_lines_and_flags_them(log):
    lines = lines_of(log)
    lines.insert(1, b"garbage\n")
    lines[3] = lines[3].replace(b'"attempt":2', b'"attempt":20')
    write_lines(log, lines)
    entries = chain.read(log, KEY)
    assert len(entries) == 6
    assert entries[1] == {"_line": 2, "_error": "not valid JSON", "_problem": "line 2: not valid JSON"}
    assert entries[3]["attempt"] == 20 and "edited" in entries[3]["_problem"]
    assert "_problem" not in entries[0] and "_problem" not in entries[5]
    assert [entry["attempt"] for entry in chain.read(log, last=2)] == [3, 4]


def test_escaped_seq_key_at_the_end_cannot_stand_in_for_seq(tmp_path):
    path = tmp_path / "log.jsonl"
    first = chain.append(path, {"report": {"n": 0}}, KEY)
    chain.append(path, {"report": {"n": 1}}, KEY)
    # Keyed but wrong: seq 5 in place of 1, with a key `z"seq` holding the expected number.
    line, _ = chain.encode_entry({"report": {"n": 2}, 'z"seq': 1}, 5, first["mac"], KEY)
    lines = lines_of(path)
    write_lines(path, [lines[0], line])
    drop_head_file(path)
    report = chain.verify(path, KEY)
    assert report.problems == ["line 2: seq 5 follows seq 0 (a line was deleted or moved)"]


def test_report_shaped_records_verify(tmp_path):
    path = tmp_path / "log.jsonl"
    for index in range(4):
        chain.append(path, {"report": {"seq": index, "prev": "", "metrics": [{"value": index}]}}, KEY)
    assert chain.verify(path, KEY).ok
    assert chain.verify(path, KEY, head=chain.head(path)).ok


def test_nested_seq_and_prev_keys_verify(tmp_path):
    path = tmp_path / "log.jsonl"
    for index in range(4):
        chain.append(path, {"details": {"seq": 0, "prev": "", 'odd"seq': 1}, "n": index}, KEY)
    assert chain.verify(path, KEY).ok


@pytest.mark.parametrize("field", ["details", "report", 'z"seq'])
def test_nested_markers_cannot_hide_deleted_lines(tmp_path, field):
    # A record that carries the seq and prev a later line would need after a
    # deletion must not fool the substring fast path, wherever the keys sort.
    path = tmp_path / "log.jsonl"
    entries = [chain.append(path, {field: {"n": index}}, KEY) for index in range(3)]
    chain.append(path, {field: {"seq": 3, "prev": entries[2]["mac"]}}, KEY)
    chain.append(path, {field: {"seq": 1, "prev": entries[0]["mac"]}}, KEY)
    assert chain.verify(path, KEY).ok
    lines = lines_of(path)
    write_lines(path, [lines[0], lines[4]])
    drop_head_file(path)
    report = chain.verify(path, KEY)
    assert report.break_line == 2
    assert report.problems[0] == "line 2: seq 4 follows seq 0 (a line was deleted or moved)"


def test_a_huge_record_appends(tmp_path):
    path = tmp_path / "log.jsonl"
    chain.append(path, {"blob": "x" * 300_000}, KEY)
    chain.append(path, {"blob": "y" * 300_000}, KEY)
    chain.append(path, {"small": 1}, KEY)
    assert chain.verify(path, KEY).ok
    assert chain.head(path)["seq"] == 2


def _append_many(path, worker, count):
    for index in range(count):
        chain.append(path, {"worker": worker, "index": index}, KEY)


@pytest.mark.slow
def test_concurrent_appends_keep_the_chain(tmp_path):
    path = str(tmp_path / "log.jsonl")
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    workers = [context.Process(target=_append_many, args=(path, worker, 25)) for worker in range(8)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(120)
        assert process.exitcode == 0
    report = chain.verify(path, KEY)
    assert report.ok, report.problems
    assert report.count == 200
    entries = chain.read(path)
    assert [entry["seq"] for entry in entries] == list(range(200))
    assert sorted((entry["worker"], entry["index"]) for entry in entries) == \
        [(worker, index) for worker in range(8) for index in range(25)]


def build_big_log(path, count):
    prev = ""
    lines = []
    for index in range(count):
        line, prev = chain.encode_entry({"attempt": index, "score": index * 0.001,
                                         "status": "passing", "hill": "circle-packing"}, index, prev, KEY)
        lines.append(line)
    path.write_bytes(b"".join(lines))
    return lines


@pytest.mark.slow
def test_hundred_thousand_lines(tmp_path):
    path = tmp_path / "big.jsonl"
    lines = build_big_log(path, 100_000)
    report = chain.verify(path, KEY)
    assert report.ok and report.count == 100_000 and report.last_seq == 99_999
    # A break deep in the log is found by the careful scan taking over.
    lines[60_000] = lines[60_000].replace(b'"status":"passing"', b'"status":"failing"')
    path.write_bytes(b"".join(lines))
    report = chain.verify(path, KEY)
    assert report.break_line == 60_001
    assert report.problems == ["line 60001: signature does not match its content (edited)"]
    assert report.count == 99_999


def test_machine_key(tmp_path, monkeypatch):
    monkeypatch.setenv("HILLS_HOME", str(tmp_path / "home"))
    path = os.path.join(state.state_dir("demo", "abc"), "attempts.jsonl")
    chain.append(path, {"a": 1}, trust.machine_keys(for_signing=True))
    assert chain.verify(path, trust.machine_keys()).ok


def _checked_while_others_append(path, unlocked=False):
    """Refusals check_appendable gives while four processes append to
    `path`; `unlocked`: checked without the appenders' lock (the control)."""
    import contextlib

    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    chain.append(path, {"first": True}, KEY)
    workers = [context.Process(target=_append_many, args=(path, worker, 60)) for worker in range(4)]
    for process in workers:
        process.start()
    locked = chain.file_lock
    if unlocked:  # only here: the appenders, already started, keep theirs
        chain.file_lock = lambda path: contextlib.nullcontext()
    refusals = checks = 0
    try:
        while any(process.is_alive() for process in workers):
            try:
                chain.check_appendable(path, KEY)
            except Refused:
                refusals += 1
            checks += 1
    finally:
        chain.file_lock = locked
    for process in workers:
        process.join(120)
        assert process.exitcode == 0
    assert checks > 10
    assert chain.verify(path, KEY).ok
    return refusals


@pytest.mark.slow
def test_a_log_being_appended_to_is_appendable_whenever_it_is_checked(tmp_path):
    assert _checked_while_others_append(str(tmp_path / "log.jsonl")) == 0
    # The control: read without the appenders' lock, the tail and the head
    # are seen from different moments, and a sound log looks broken.
    seen = sum(_checked_while_others_append(str(tmp_path / f"control-{attempt}.jsonl"), unlocked=True)
               for attempt in range(3))
    assert seen > 0
