"""The holdout budget without reading the whole attempts log: a sealed
counter beside the log keeps the count up to a line, only the lines after
it are read, and no deleted or edited file hands the budget back."""

from pathlib import Path

import pytest

from testing.util import Result
from testing.eval_fixtures import SCORE_EVAL, attempts_log, hills, make_hill, submission, tree_of
from hills.base import state
from hills.evidence import chain, trust
from hills.run import logbook
from hills.base.errors import NotScored

NAME = "holdout"


@pytest.fixture
def spent_twice(tmp_path: Path) -> tuple[str, Path]:
    """A hill with a budget of 3 and two --final evals spent, with a plain
    eval between them; returns its tree hash and its attempts log."""
    hill_dir = make_hill(NAME, SCORE_EVAL, extra="final:\n  budget: 3\n")
    for final in (True, False, True):
        assert final_eval(tmp_path, final=final).code == 0
    tree = tree_of(hill_dir)
    return tree, attempts_log(NAME, tree)


def final_eval(tmp_path: Path, final: bool = True) -> Result:
    folder = submission(tmp_path / "sub", {"score.txt": "1\n"})
    return hills("eval", folder, "-H", NAME, *(["--final"] if final else []))


def counter(log: Path) -> Path:
    return log.parent / "final-count.json"


def count(tree: str) -> int:
    return logbook.final_count(NAME, tree, trust.machine_keys(for_signing=True))


def test_the_count_reads_only_the_lines_after_the_counter(spent_twice: tuple[str, Path], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    tree, log = spent_twice
    assert counter(log).is_file()
    assert final_eval(tmp_path, final=False).code == 0
    offsets: list[int] = []
    read_all = chain._read_all

    def noted(path: str, offset: int = 0) -> bytes | None:
        offsets.append(offset)
        return read_all(path, offset)

    monkeypatch.setattr(chain, "_read_all", noted)
    assert count(tree) == 2
    assert offsets and min(offsets) > 0


def test_a_deleted_or_edited_counter_counts_the_whole_log_again(spent_twice: tuple[str, Path],
                                                               tmp_path: Path) -> None:
    tree, log = spent_twice
    counter(log).unlink()
    assert count(tree) == 2
    assert counter(log).is_file()
    sealed = counter(log).read_text()
    counter(log).write_text(sealed.replace('"count": 2', '"count": 0').replace('"count":2', '"count":0'))
    assert counter(log).read_text() != sealed
    assert count(tree) == 2
    assert final_eval(tmp_path).code == 0
    spent = final_eval(tmp_path)
    assert spent.code == 5, spent.output
    assert f"the holdout budget of hill '{NAME}' is spent: 3 of 3" in spent.err


def test_a_log_cut_short_is_refused(spent_twice: tuple[str, Path], tmp_path: Path) -> None:
    tree, log = spent_twice
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:-1]))
    refused = final_eval(tmp_path)
    assert refused.code == 5, refused.output
    assert "line(s) missing at the end" in refused.err
    with pytest.raises(NotScored) as broken:
        count(tree)
    assert "is broken" in broken.value.message and "missing at the end" in broken.value.message


def test_a_log_cut_before_the_counted_line_is_refused_without_its_head(spent_twice: tuple[str, Path],
                                                                      tmp_path: Path) -> None:
    """Stronger than the head alone: with the head deleted too, the log
    still verifies, but it no longer holds the line the count was taken at."""
    tree, log = spent_twice
    assert final_eval(tmp_path, final=False).code == 0
    assert count(tree) == 2  # the counter now marks the last line
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:1]))
    Path(chain.head_path(log)).unlink()
    refused = final_eval(tmp_path)
    assert refused.code == 5, refused.output
    assert "is broken" in refused.err and "was cut or rewritten" in refused.err


def test_a_deleted_log_is_refused_while_its_count_is_kept(spent_twice: tuple[str, Path], tmp_path: Path) -> None:
    tree, log = spent_twice
    assert count(tree) == 2
    log.unlink()
    Path(chain.head_path(log)).unlink()
    refused = final_eval(tmp_path)
    assert refused.code == 5, refused.output
    assert "is broken (the log is missing, but a count of 2 was taken from it" in refused.err


def test_an_edited_line_after_the_counter_is_refused(spent_twice: tuple[str, Path], tmp_path: Path) -> None:
    tree, log = spent_twice
    assert final_eval(tmp_path, final=False).code == 0
    data = log.read_bytes()
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    log.write_bytes(data[:last_start] + data[last_start:].replace(b'"passed":true', b'"passed":false', 1))
    with pytest.raises(NotScored) as broken:
        count(tree)
    assert "is broken" in broken.value.message and "edited" in broken.value.message


# ------------------------------------------------------------------ chain.tally, the core

KEY = trust.Keys(None, None, b"k" * 32, can_sign=True)


def is_final(entry: dict) -> bool:
    return bool(entry.get("final"))


def test_tally_reads_on_from_its_counter_to_the_same_numbers_as_a_whole_read(tmp_path: Path) -> None:
    log, counter_path = tmp_path / "log.jsonl", str(tmp_path / "count.json")
    for index in range(50):
        chain.append(log, {"final": index % 5 == 0}, KEY)
    assert chain.tally(log, KEY, counter_path, is_final) == 10
    for index in range(7):
        chain.append(log, {"final": index % 2 == 0}, KEY)
    resumed = chain.verify_from(log, KEY, mark_of(counter_path))
    assert resumed is not None and resumed.report.ok and len(resumed.entries) == 7
    assert chain.tally(log, KEY, counter_path, is_final) == 14
    Path(counter_path).unlink()
    assert chain.tally(log, KEY, counter_path, is_final) == 14
    whole = chain.verify_from(log, KEY)
    assert whole is not None and whole.report.ok and len(whole.entries) == 57
    assert whole.mark == mark_of(counter_path)


def mark_of(counter_path: str) -> dict:
    kept = state.sealed_read(counter_path)
    return {name: kept[name] for name in ("seq", "mac", "end")}


def test_tally_names_the_problem_verify_names(tmp_path: Path) -> None:
    log, counter_path = tmp_path / "log.jsonl", str(tmp_path / "count.json")
    for index in range(5):
        chain.append(log, {"final": True}, KEY)
    assert chain.tally(log, KEY, counter_path, is_final) == 5
    chain.append(log, {"final": False}, KEY)
    data = log.read_bytes()
    log.write_bytes(data.replace(b'"final":false', b'"final":null'))
    with pytest.raises(chain.Refused) as edited:
        chain.tally(log, KEY, counter_path, is_final)
    assert edited.value.message == chain.verify(log, KEY).problems[0]
    log.write_bytes(data[:data.index(b"\n") + 1])  # cut before the counted line, head kept
    with pytest.raises(chain.Refused) as cut:
        chain.tally(log, KEY, counter_path, is_final)
    assert cut.value.message == chain.verify(log, KEY).problems[0]
    assert "missing at the end" in cut.value.message


def test_final_on_a_hill_with_no_holdout_says_so_and_logs_nothing(project: Path, tmp_path: Path) -> None:
    hill_dir = make_hill("noholdout", SCORE_EVAL, extra="final:\n  budget: 0\n")
    assert tree_of(hill_dir)  # committed
    folder = submission(tmp_path / "sub", {"score.txt": "3\n"})
    refused = hills("eval", folder, "-H", "noholdout", "--final")
    assert refused.code == 5, refused.output
    assert refused.err.splitlines()[0] == ("error: hill 'noholdout' has no holdout split for --final: its hill.yaml "
                                           "sets final.budget to 0, so no eval may look at the holdout")
    assert "0 of 0" not in refused.err and refused.err.splitlines()[1].startswith("hint: evals without --final")
    assert not attempts_log("noholdout", tree_of(hill_dir)).exists()
    # Without --final it scores as any hill does.
    assert hills("eval", folder, "-H", "noholdout").code == 0
