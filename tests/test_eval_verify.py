"""`hills verify` and `hills-sign` on reports made by `hills eval`: valid,
tampered, signed on another machine, not a report; self-signed JSON is
never official."""

import json
import os
import subprocess
import stat
from concurrent.futures import ThreadPoolExecutor

import pytest

from testing.eval_fixtures import hills, official_report, real


@pytest.fixture(scope="module")
def report_file(module_machine, tmp_path_factory):
    """A report of a passing official eval, written with -o."""
    return official_report(module_machine, tmp_path_factory, "verified")


def tampered_copy(report_file, tmp_path, change):
    report = json.loads(report_file.read_text())
    change(report)
    target = tmp_path / "tampered.json"
    target.write_text(json.dumps(report, indent=2))
    return target


@pytest.mark.parametrize("runner", ["in-process", "executable"])
def test_valid_report(report_file, runner):
    result = hills("verify", report_file) if runner == "in-process" else real("hills", "verify", report_file)
    assert result.code == 0, result.output
    assert result.out.startswith("signature valid: verified @ ")
    assert "PASSED" in result.out and "total=7" in result.out


@pytest.mark.parametrize("change", [
    lambda r: r["metrics"][0].update(value=8.0),
    lambda r: r.update(passed=False),
    lambda r: r.update(official=False),
    lambda r: r.update(extra="field"),
    lambda r: r.pop("details"),
], ids=["metric", "passed", "official", "added-key", "removed-key"])
def test_tampered_report_is_invalid(report_file, tmp_path, change):
    tampered = tampered_copy(report_file, tmp_path, change)
    for result in (hills("verify", tampered), real("hills", "verify", tampered)):
        assert result.code == 1, result.output
        assert "signature INVALID" in result.out


def test_report_without_signature_is_invalid(report_file, tmp_path):
    tampered = tampered_copy(report_file, tmp_path, lambda r: r.pop("signature"))
    result = real("hills", "verify", tampered)
    assert result.code == 1 and "INVALID" in result.out and "no signature" in result.out


def test_report_from_another_machine_is_invalid(report_file, tmp_path):
    other = dict(os.environ, HILLS_HOME=str(tmp_path / "other-machine"))
    signed = subprocess.run(["hills-sign"], input='{"note": "gives this machine its own key"}', env=other,
                            capture_output=True, text=True, timeout=60)
    assert signed.returncode == 0, signed.stderr
    result = real("hills", "verify", report_file, env=other)
    assert result.code == 1, result.output
    assert "signature INVALID" in result.out and "a key this machine does not trust" in result.out
    assert json.loads(report_file.read_text())["signer"] in result.out


def test_one_invalid_among_many_fails_the_whole_run(report_file, tmp_path):
    tampered = tampered_copy(report_file, tmp_path, lambda r: r["metrics"][0].update(value=0))
    result = real("hills", "verify", report_file, tampered)
    assert result.code == 1, result.output
    lines = result.out.splitlines()
    assert lines[0].startswith("signature valid") and lines[0].endswith(f"({report_file})")
    assert any(line.startswith("signature INVALID") and line.endswith(f"({tampered})") for line in lines)


@pytest.mark.parametrize("content, words", [
    ("not json at all", ["is not valid JSON", "line 1 column 1"]),
    ("[1, 2]", ["is not a JSON object", "a list"]),
    ('{"a": 1, "a": 2}', ["duplicate key 'a'"]),
    ('{"a": NaN}', ["NaN is not a finite number"]),
])
def test_a_file_that_is_not_a_report_is_a_usage_error_naming_it(report_file, tmp_path, content, words):
    bad = tmp_path / "notes.txt"
    bad.write_text(content)
    for result in (hills("verify", bad), real("hills", "verify", bad)):
        assert result.code == 2, result.output
        assert f"error: report '{bad}'" in result.err
        for word in words:
            assert word in result.err


def test_missing_report_is_a_usage_error(report_file, tmp_path):
    result = real("hills", "verify", tmp_path / "gone.json")
    assert result.code == 2 and "does not exist" in result.err and "gone.json" in result.err
    assert "hint: pass a report" in result.err
    assert hills("verify").code == 2


def test_hills_sign_is_unofficial_and_self_reported(report_file):
    signed = real("hills-sign", input=json.dumps({"score": 0.9, "official": True, "trust": "evaluator",
                                                  "signature": "hmac-sha256:forged"}))
    assert signed.code == 0, signed.output
    report = json.loads(signed.out)
    assert report["official"] is False and report["trust"] == "self-reported"
    assert report["score"] == 0.9 and report["signature"] != "hmac-sha256:forged"
    target = report_file.parent / "self-signed.json"
    target.write_text(signed.out)
    result = real("hills", "verify", target)
    assert result.code == 0, result.output
    assert "signature valid" in result.out and "unofficial" in result.out
    # Not passed off as a hill's report, nor shown as '? @ working tree'.
    assert result.out.splitlines()[0] == "signature valid: self-reported object (hills-sign)"
    shown = real("hills", "show", target)
    assert shown.code == 0 and shown.out.splitlines()[1].startswith("self-reported object (hills-sign)  ")
    again = real("hills-sign", "--verify", target)
    assert again.code == 0 and again.out == result.out
    assert real("hills-sign", "--verify", report_file).code == 0


def test_hills_sign_refuses_what_is_not_an_object(report_file):
    result = real("hills-sign", input="[1, 2, 3]")
    assert result.code == 2 and "JSON object" in result.err
    result = real("hills-sign", input="{broken")
    assert result.code == 2 and "'<stdin>' is not valid JSON" in result.err
    assert "hint: hills-sign reads one JSON object on stdin" in result.err


@pytest.mark.parametrize("argv", [["hills-sign", "--verify"], ["hills", "sign", "--verify"]])
def test_hills_sign_verify_without_a_report_says_what_to_pass(report_file, argv):
    result = real(*argv)
    assert result.code == 2, result.output
    assert result.err.splitlines() == ["error: option '--verify' requires an argument",
                                       f"hint: see '{' '.join(argv[:-1])} --help'"]


def test_hills_sign_cannot_make_an_official_report_from_an_official_one(report_file):
    signed = real("hills-sign", input=report_file.read_text())
    assert signed.code == 0, signed.output
    report = json.loads(signed.out)
    assert report["official"] is False and report["trust"] == "self-reported"
    target = report_file.parent / "resigned.json"
    target.write_text(signed.out)
    verified = real("hills", "verify", target)
    assert verified.code == 0, verified.output
    assert verified.out.splitlines()[0] == ("signature valid: self-reported object (hills-sign), "
                                            f"naming hill 'verified' @ {report['tree_hash'][:12]}")


def test_racing_first_uses_create_one_key(module_machine, tmp_path):
    fresh = dict(os.environ, HILLS_HOME=str(tmp_path / "fresh-machine"))
    with ThreadPoolExecutor(max_workers=8) as pool:
        signed = list(pool.map(lambda n: real("hills-sign", input=json.dumps({"n": n}), env=fresh), range(8)))
    key = tmp_path / "fresh-machine" / "key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert sorted(p.name for p in key.parent.iterdir() if p.name.startswith(".key")) == []
    for number, result in enumerate(signed):
        assert result.code == 0, result.output
        target = tmp_path / f"signed-{number}.json"
        target.write_text(result.out)
        assert real("hills", "verify", target, env=fresh).code == 0
