import base64
import hashlib
import hmac
import io
import json
import os
import re
import sys

import pytest

from hills.base import ed25519, state
from hills.evidence import signing, trust
from hills.base.errors import UsageError

KEY = trust.Keys(None, None, b"\x01" * 32, can_sign=True)
OTHER_KEY = trust.Keys(None, None, b"\x02" * 32, can_sign=True)
LEGACY_SECRET = b"0123456789abcdef" * 4


def envelope():
    return {
        "hill": "circle-packing",
        "tree_hash": "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
        "passed": True,
        "status": "passing",
        "metrics": [{"name": "score", "value": 2.6358627564136983, "direction": "max"}],
        "config": [{"name": "n", "value": 26, "primary": True}],
        "details": {"note": "naïve packing ✓", "elapsed": 0.25, "count": 3},
        "official": True,
        "timestamp": "2024-05-01T12:00:00Z",
    }


def test_canonical_json_is_sorted_compact_utf8():
    data = signing.canonical_json({"b": 1, "a": "é", "c": [1.5, 2, None, True], "d": {"z": 0, "y": 1e20}})
    assert data == '{"a":"é","b":1,"c":[1.5,2,null,true],"d":{"y":1e+20,"z":0}}'.encode("utf-8")


@pytest.mark.parametrize("bad, path", [
    ({"metrics": [{"name": "score", "value": float("nan")}]}, "metrics[0].value"),
    ({"details": {"spread": {"max": float("inf")}}}, "details.spread.max"),
    ({"instances": {"case 1": float("-inf")}}, 'instances["case 1"]'),
])
def test_canonical_json_refuses_non_finite_numbers_naming_the_key(bad, path):
    with pytest.raises(UsageError) as caught:
        signing.canonical_json(bad)
    assert caught.value.exit_code == 2
    assert f"'{path}'" in caught.value.message
    assert "not a finite number" in caught.value.message


def test_canonical_json_refuses_non_json_values():
    with pytest.raises(UsageError) as caught:
        signing.canonical_json({"details": {"when": object()}})
    assert "'details.when'" in caught.value.message


def test_sign_is_an_sshsig_over_canonical_json_without_signature():
    report = envelope()
    report["signature"] = "sshsig:" + "0" * 64
    body = dict(report)
    del body["signature"]
    scheme, _, text = signing.sign(report, KEY).partition(":")
    assert scheme == "sshsig"
    public, namespace, raw = ed25519.parse_sshsig(base64.b64decode(text))
    assert public == KEY.public and namespace == "hills-report"
    signed = (b"SSHSIG" + (12).to_bytes(4, "big") + b"hills-report" + (0).to_bytes(4, "big")
              + (6).to_bytes(4, "big") + b"sha512" + (64).to_bytes(4, "big")
              + hashlib.sha512(signing.canonical_json(body)).digest())
    assert ed25519.verify(public, signed, raw)


def test_seal_names_the_signer_by_its_fingerprint():
    report = envelope()
    signing.seal(report, KEY)
    assert report["signer"] == KEY.fingerprint and report["signer"].startswith("SHA256:")
    assert signing.verify(report, KEY) == (True, "signature valid")
    assert signing.verify(report, KEY).signer == signing.LOCAL


def test_a_report_naming_another_signer_fails():
    report = envelope()
    signing.seal(report, KEY)
    report["signer"] = OTHER_KEY.fingerprint
    report["signature"] = signing.sign(report, KEY)
    ok, reason = signing.verify(report, KEY)
    assert not ok and f"names signer '{OTHER_KEY.fingerprint}'" in reason and KEY.fingerprint in reason


def test_a_report_signed_for_another_namespace_fails():
    report = envelope()
    signing.seal(report, KEY)
    signed = KEY.sign(ed25519.sshsig_signed_data("file", signing.message(report)))
    blob = ed25519.sshsig_blob(KEY.public, "file", signed)
    report["signature"] = "sshsig:" + base64.b64encode(blob).decode()
    ok, reason = signing.verify(report, KEY)
    assert not ok and "namespace 'file'" in reason


def test_an_old_hmac_report_verifies_with_the_kept_secret_only():
    report = envelope()
    body = signing.canonical_json(report)
    report["signature"] = "hmac-sha256:" + hmac.new(LEGACY_SECRET, body, hashlib.sha256).hexdigest()
    with_secret = trust.Keys(None, LEGACY_SECRET, b"\x01" * 32)
    assert signing.verify(report, with_secret) == (True, "signature valid")
    assert signing.verify(report, with_secret).signer == signing.LEGACY_SIGNER
    ok, reason = signing.verify(report, KEY)
    assert not ok and "old HMAC secret this machine does not have" in reason
    report["status"] = "failing"
    assert not signing.verify(report, with_secret).ok


def test_sign_verify_round_trip_through_a_file(tmp_path):
    report = envelope()
    signing.seal(report, KEY)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report, indent=2, ensure_ascii=True))
    loaded = signing.load_report(path)
    assert signing.verify(loaded, KEY) == (True, "signature valid")


def test_an_edited_value_fails():
    report = envelope()
    signing.seal(report, KEY)
    report["metrics"][0]["value"] = 2.7
    ok, reason = signing.verify(report, KEY)
    assert not ok
    assert reason.startswith("signature INVALID")
    assert "edited" in reason


def test_an_added_key_fails():
    report = envelope()
    signing.seal(report, KEY)
    report["extra"] = 1
    assert signing.verify(report, KEY)[0] is False


def test_another_machines_key_fails():
    report = envelope()
    signing.seal(report, KEY)
    ok, reason = signing.verify(report, OTHER_KEY)
    assert not ok and f"signed by {KEY.fingerprint}, a key this machine does not trust" in reason
    allowed = [trust.Signer("lab-1", KEY.public)]
    assert signing.verify(report, OTHER_KEY, allowed) == (True, "signature valid")
    assert signing.verify(report, OTHER_KEY, allowed).signer == "lab-1"


def test_no_signature():
    assert signing.verify(envelope(), KEY) == (False, "no signature")
    assert signing.verify({**envelope(), "signature": ""}, KEY) == (False, "no signature")


@pytest.mark.parametrize("signature, scheme", [("x:abc", "x"), ("deadbeef", "deadbeef"), ("hmac-md5:00", "hmac-md5")])
def test_unknown_scheme(signature, scheme):
    report = {**envelope(), "signature": signature}
    assert signing.verify(report, KEY) == (False, f"unknown signature scheme '{scheme}'")


def test_signature_that_is_not_a_string():
    ok, reason = signing.verify({**envelope(), "signature": 5}, KEY)
    assert not ok and "INVALID" in reason


def test_load_report_missing_file(tmp_path):
    path = tmp_path / "nope.json"
    with pytest.raises(UsageError) as caught:
        signing.load_report(path)
    assert caught.value.exit_code == 2
    assert f"'{path}'" in caught.value.message and "does not exist" in caught.value.message


def test_load_report_not_json_names_line_and_column(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{\n  "a": 1,\n  oops\n}\n')
    with pytest.raises(UsageError) as caught:
        signing.load_report(path)
    assert f"'{path}'" in caught.value.message
    assert "not valid JSON" in caught.value.message
    assert "line 3 column 3" in caught.value.message


def test_load_report_not_an_object(tmp_path):
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    with pytest.raises(UsageError) as caught:
        signing.load_report(path)
    assert "not a JSON object" in caught.value.message and "a list" in caught.value.message


def test_load_report_refuses_nan_and_duplicate_keys(tmp_path):
    path = tmp_path / "nan.json"
    path.write_text('{"score": NaN}')
    with pytest.raises(UsageError) as caught:
        signing.load_report(path)
    assert "NaN" in caught.value.message
    path.write_text('{"passed": false, "passed": true}')
    with pytest.raises(UsageError) as caught:
        signing.load_report(path)
    assert "duplicate key 'passed'" in caught.value.message


def test_load_report_folder_and_binary(tmp_path):
    with pytest.raises(UsageError) as caught:
        signing.load_report(tmp_path)
    assert "folder" in caught.value.message
    path = tmp_path / "binary.json"
    path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(UsageError) as caught:
        signing.load_report(path)
    assert "not UTF-8" in caught.value.message


def test_load_report_from_stdin(monkeypatch):
    report = envelope()
    stream = io.TextIOWrapper(io.BytesIO(json.dumps(report).encode("utf-8")))
    monkeypatch.setattr(sys, "stdin", stream)
    assert signing.load_report("-") == report


def test_self_reported_is_forced_unofficial_and_signed():
    payload = {**envelope(), "official": True, "trust": "evaluator",
               "official_reason": "clean HEAD", "signature": "sshsig:" + "1" * 64}
    signed = signing.self_reported(payload, KEY)
    assert signed["official"] is False
    assert signed["trust"] == "self-reported"
    assert signed["official_reason"] == "signed by hills-sign, not produced by an evaluator"
    assert signed["timestamp"] == "2024-05-01T12:00:00Z"
    assert signing.verify(signed, KEY) == (True, "signature valid")
    assert payload["official"] is True  # the caller's dict is left alone


def test_self_reported_adds_a_utc_timestamp():
    signed = signing.self_reported({"score": 1}, KEY)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", signed["timestamp"])
    assert signing.verify(signed, KEY)[0]


def test_self_reported_refuses_a_non_object():
    with pytest.raises(UsageError) as caught:
        signing.self_reported([1, 2], KEY)
    assert "JSON object" in caught.value.message


def test_machine_key_signs(tmp_path, monkeypatch):
    monkeypatch.setenv("HILLS_HOME", str(tmp_path / "home"))
    signed = signing.self_reported({"score": 0.5}, trust.machine_keys(for_signing=True))
    assert signing.verify(signed, trust.machine_keys())[0]
    assert oct(os.stat(state.key_path()).st_mode & 0o777) == "0o600"


def _report_signed_elsewhere(folder):
    path = folder / "elsewhere.json"
    path.write_text(json.dumps(signing.self_reported({"score": 0.5}, OTHER_KEY)), encoding="utf-8")
    return path


@pytest.mark.parametrize("how", ["fast path", "git hill", "click path", "hills-sign --verify"])
def test_verify_with_no_machine_state_creates_nothing(tmp_path, hermetic, how):
    from testing.util import run_bin, run_cli

    path = _report_signed_elsewhere(tmp_path)
    assert not hermetic.hills_home.exists()
    if how == "fast path":
        result = run_bin("hills", "verify", path)
    elif how == "git hill":
        result = run_bin("git", "hill", "verify", path)
    elif how == "click path":
        result = run_cli("verify", path)
    else:
        result = run_cli("--verify", path, prog="hills-sign")
    assert result.code == 1, result.output
    assert result.out.startswith(f"signature INVALID: signed by {OTHER_KEY.fingerprint}, "
                                 "a key this machine does not trust"), result.output
    assert "hint: " in result.err and "hills trust add" in result.err
    assert not hermetic.hills_home.exists()


def test_show_with_no_machine_state_creates_nothing(tmp_path, hermetic):
    from testing.util import run_cli

    result = run_cli("show", _report_signed_elsewhere(tmp_path))
    assert result.code == 1, result.output
    assert "does not trust" in result.out
    assert not hermetic.hills_home.exists()


def test_verify_with_an_empty_hills_home_leaves_it_empty(tmp_path, hermetic):
    from testing.util import run_bin

    hermetic.hills_home.mkdir()
    result = run_bin("hills", "verify", _report_signed_elsewhere(tmp_path))
    assert result.code == 1, result.output
    assert "does not trust" in result.out
    assert os.listdir(hermetic.hills_home) == []
