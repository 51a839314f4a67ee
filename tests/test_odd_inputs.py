"""Inputs no evaluator would make but a person or a submission might: odd
file names, reports of any shape, text that is not valid Unicode. Each gets
a clear answer and a log line, never a crash."""

import json
import os

from conftest import new_and_commit, run_bin, run_cli


def test_a_file_name_that_is_not_utf8_is_refused_by_name_and_logged(project):
    new_and_commit()
    submission = project / "odd"
    submission.mkdir()
    os.symlink("/etc/passwd", os.path.join(os.fsencode(submission), b"\xff"))
    result = run_bin("hills", "eval", submission, "-H", "circle-packing")
    assert result.code == 1, result.output
    assert result.error_lines == ["error: submission symlink '\\udcff' points outside the submission "
                                  "(to '/etc/passwd')"]
    report = json.loads(result.out)
    assert report["status"] == "refused" and "\\udcff" in report["reason"]
    attempts = json.loads(run_cli("attempts", "circle-packing", "--json").out)
    assert [a["report"]["status"] for a in attempts["attempts"]] == ["refused"]
    assert attempts["chain"]["ok"]
    assert run_bin("hills", "verify", "-", input=result.out).code == 0


def test_hills_sign_refuses_text_that_is_not_unicode(project):
    result = run_bin("hills-sign", input='{"note": "\\ud800"}')
    assert result.code == 2, result.output
    assert result.error_lines == ["error: value holds text that is not valid Unicode (a lone surrogate)"]


def test_any_signed_object_verifies_and_shows(project, tmp_path):
    odd = '{"metrics": 5, "instances": [1], "report": {"zones": 5}, "spread": 3, "config": "x"}'
    signed = run_bin("hills-sign", input=odd)
    assert signed.code == 0, signed.output
    path = tmp_path / "odd.json"
    path.write_text(signed.out)
    verified = run_bin("hills", "verify", path)
    assert verified.code == 0, verified.output
    assert verified.out.startswith("signature valid: ")
    shown = run_cli("show", str(path))
    assert shown.code == 0, shown.output
    assert shown.out.startswith("signature valid\n")
