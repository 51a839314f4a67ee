"""A trust claim is bound to the key that signs it: only the evaluation
service's own process signs `trust: "service"`, `hills verify` and `hills
show` name the trust mode and the signer, and a report that claims the
service with a key not trusted as a service's is INVALID. The service's
own reports are checked end to end in tests/test_service.py."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess

import pytest

from testing.eval_fixtures import SCORE_EVAL, attempts_log, hills, log_entries, make_hill, submission, tree_of
from hills.base import ed25519
from hills.evidence import caller, signing, trust

NAME = "bound"


@pytest.fixture
def hill(project):
    return make_hill(NAME, SCORE_EVAL)


def scored(tmp_path, value=3):
    return submission(tmp_path / f"sub-{value}", {"score.txt": f"{value}\n"})


def binding_off(monkeypatch):
    """The boundary switched off, for the controls only: every process is
    taken for the service's own."""
    monkeypatch.setattr(caller, "not_the_service", lambda: "")


def saved(tmp_path, report, name="report.json"):
    path = tmp_path / name
    path.write_text(json.dumps(report))
    return path


def resign(report, keys):
    """What a climber holding `keys` can do: edit a report and sign it again."""
    report.pop("signature", None)
    report["signer"] = keys.fingerprint
    message = ed25519.sshsig_signed_data(signing.NAMESPACE, signing.message(report))
    blob = ed25519.sshsig_blob(keys.public, signing.NAMESPACE, keys.sign(message))
    import binascii

    report["signature"] = "sshsig:" + binascii.b2a_base64(blob, newline=False).decode("ascii")
    return report


# ------------------------------------------------------------ the signing side

def test_a_caller_set_served_for_is_refused_and_nothing_is_logged(hill, tmp_path, monkeypatch):
    folder = scored(tmp_path)
    plain = hills("eval", folder, "-H", NAME)
    assert plain.code == 0, plain.output
    assert plain.report["trust"] == "same-user"
    log = attempts_log(NAME, tree_of(hill))
    before = len(log_entries(log))
    monkeypatch.setenv("HILLS_SERVICE", "off")
    monkeypatch.setenv("HILLS_SERVED_FOR", "someone")
    forged = hills("eval", folder, "-H", NAME)
    assert forged.code == 4, forged.output
    assert forged.out == ""
    assert "error: 'HILLS_SERVED_FOR' names user 'someone', but this process is not the hills service" in forged.err
    assert "hint: unset HILLS_SERVED_FOR" in forged.err
    assert len(log_entries(log)) == before, "a refused claim was logged"


def test_control_with_the_binding_off_the_forged_claim_is_signed_and_verify_rejects_it(hill, tmp_path,
                                                                                      monkeypatch):
    monkeypatch.setenv("HILLS_SERVICE", "off")
    monkeypatch.setenv("HILLS_SERVED_FOR", "someone")
    with monkeypatch.context() as switched:
        binding_off(switched)
        forged = hills("eval", scored(tmp_path), "-H", NAME)
        assert forged.code == 0, forged.output
    # The attack of old: a same-user report that says the service, for another user.
    assert forged.report["trust"] == "service" and forged.report["user"] == "someone"
    monkeypatch.delenv("HILLS_SERVED_FOR")
    checked = hills("verify", saved(tmp_path, forged.report))
    assert checked.code == 1, checked.output
    assert "signature INVALID as a service report: it claims trust 'service', but its signer, this machine's key" \
           in checked.out
    assert "is not trusted as a service key" in checked.out
    assert "hills trust add --service" in checked.err


def test_the_signer_refuses_a_service_claim_outside_the_service():
    keys = trust.Keys(None, None, b"\x01" * 32, can_sign=True)
    report = {"hill": "h", "trust": "service", "passed": True}
    from hills.base.errors import EnvironmentProblem

    with pytest.raises(EnvironmentProblem) as caught:
        signing.seal(report, keys)
    assert "refusing to sign a report that says trust 'service'" in caught.value.message
    assert "signature" not in report
    same_user = {"hill": "h", "trust": "same-user", "passed": True}
    signing.seal(same_user, keys)
    assert same_user["signature"].startswith("sshsig:")


# ------------------------------------------------------------ what the service check reads

@pytest.fixture
def service_layout(tmp_path):
    """A state folder as 'hills setup service' leaves it, for user nobody:
    the folder nobody's alone, service.json root's, naming nobody."""
    if os.geteuid() != 0:
        pytest.skip("making files owned by root and by another user needs root")
    nobody = pwd.getpwnam("nobody")
    state_dir = tmp_path / "state"
    (state_dir / "home").mkdir(parents=True)
    config = state_dir / "service.json"
    config.write_text(json.dumps({"user": "nobody", "socket": "/run/hills/hills.sock", "admins": [],
                                  "climbers": []}))
    os.chmod(config, 0o644)
    os.chown(state_dir, nobody.pw_uid, nobody.pw_gid)
    os.chmod(state_dir, 0o700)
    return state_dir, nobody.pw_uid


def test_the_service_is_the_user_root_recorded_beside_its_state(service_layout):
    state_dir, uid = service_layout
    home = str(state_dir / "home")
    assert caller._why_not(home, uid) == ""
    assert "runs as root" in caller._why_not(home, 0)
    config = state_dir / "service.json"
    config.write_text(json.dumps({"user": "daemon"}))
    assert "names another service user ('daemon')" in caller._why_not(home, uid)
    assert "is not the home of a service's state folder" in caller._why_not(str(state_dir), uid)


@pytest.mark.parametrize("change, words", [
    (lambda state_dir, uid: os.chown(state_dir / "service.json", uid, -1), "was not written by root"),
    (lambda state_dir, uid: os.chmod(state_dir / "service.json", 0o666), "was not written by root"),
    (lambda state_dir, uid: os.chmod(state_dir, 0o750), "is not its own user's alone"),
    (lambda state_dir, uid: os.unlink(state_dir / "service.json"), "is not there"),
    (lambda state_dir, uid: (state_dir / "service.json").write_text("{]"), "names no service user"),
])
def test_a_record_anyone_but_root_could_write_makes_no_service(service_layout, change, words):
    state_dir, uid = service_layout
    change(state_dir, uid)
    assert words in caller._why_not(str(state_dir / "home"), uid)


# ------------------------------------------------------------ the verify side

def test_verify_and_show_name_the_trust_mode_and_the_signer(hill, tmp_path):
    report = hills("eval", scored(tmp_path), "-H", NAME).report
    path = saved(tmp_path, report)
    checked = hills("verify", path)
    assert checked.code == 0, checked.output
    assert f"  key: this machine ({report['signer']})\n" in checked.out
    assert "  trust: same-user (signed with the key of the user who ran the eval" in checked.out
    shown = hills("show", path)
    assert shown.code == 0, shown.output
    lines = shown.out.splitlines()
    assert lines[0] == "signature valid"
    assert "  trust        same-user (signed with the key of the user who ran the eval, who could have signed " \
           "anything)" in lines
    assert f"  signer       this machine ({report['signer']})" in lines


def test_a_report_edited_to_claim_the_service_and_resigned_is_invalid(hill, tmp_path):
    report = hills("eval", scored(tmp_path), "-H", NAME).report
    keys = trust.machine_keys(for_signing=True)
    edited = resign(dict(report, trust="service", user="someone"), keys)
    assert signing.verify(edited, keys, []).reason.startswith("signature INVALID as a service report")
    path = saved(tmp_path, edited)
    checked = hills("verify", path)
    assert checked.code == 1, checked.output
    assert "claims trust 'service', but its signer, this machine's key" in checked.out
    shown = hills("show", path)
    assert shown.code == 1, shown.output
    assert shown.out.splitlines()[0].startswith("signature INVALID (signature INVALID as a service report")
    assert "hint: only an evaluation service's key signs a report that says trust 'service'" in shown.err
    exported = hills("verify", "--export", tmp_path / "export", path)
    assert exported.code == 1 and not (tmp_path / "export").exists()


def test_a_service_claim_holds_only_with_a_key_trusted_as_a_service(hermetic, tmp_path):
    other = trust.Keys(None, None, b"\x05" * 32, can_sign=True)
    line = ed25519.public_line(other.public, "hills@service-host")
    report = resign({"hill": "h", "tree_hash": None, "status": "passing", "passed": True, "official": True,
                     "trust": "service", "user": "climber", "timestamp": "2026-01-01T00:00:00Z"}, other)
    path = saved(tmp_path, report)
    assert hills("trust", "add", "lab-1", line).code == 0
    as_machine = hills("verify", path)
    assert as_machine.code == 1, as_machine.output
    assert f"its signer, 'lab-1' ({other.fingerprint}), is not trusted as a service key" in as_machine.out
    added = hills("trust", "add", "--service", "lab-1", line)
    assert added.code == 0 and "as a service key" in added.err
    assert (hermetic.hills_home / "allowed_signers").read_text() == \
        f'lab-1 namespaces="hills-report,hills-service" {line.rsplit(" ", 1)[0]}\n'
    as_service = hills("verify", path)
    assert as_service.code == 0, as_service.output
    assert f"  key: 'lab-1' ({other.fingerprint}), trusted as a service key\n" in as_service.out
    assert "  trust: service (signed by the evaluation service" in as_service.out
    listed = hills("trust", "list")
    assert listed.out.rstrip("\n").endswith("\tservice")
    assert json.loads(hills("trust", "list", "--json").out)[0]["role"] == "service"
    # Made a machine's again (added without --service), the claim no longer holds.
    assert hills("trust", "add", "lab-1", line).code == 0
    assert hills("verify", path).code == 1


@pytest.mark.parametrize("claim", ["gold", 1, ["service"]])
def test_a_trust_that_is_no_trust_mode_is_invalid(hermetic, tmp_path, claim):
    keys = trust.machine_keys(for_signing=True)
    report = resign({"hill": "h", "passed": True, "trust": claim}, keys)
    checked = hills("verify", saved(tmp_path, report))
    assert checked.code == 1, checked.output
    assert (f"trust {json.dumps(claim)} is no trust mode "
            "(expected one of service, same-user, self-reported, evaluator)") in checked.out


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen (openssh-client) is not installed")
def test_openssh_reads_a_service_keys_line_as_it_is(hermetic, tmp_path):
    other = trust.Keys(None, None, b"\x06" * 32, can_sign=True)
    report = resign({"hill": "h", "passed": True, "trust": "service"}, other)
    assert hills("trust", "add", "--service", "svc", ed25519.public_line(other.public)).code == 0
    (tmp_path / "message").write_bytes(signing.message(report))
    (tmp_path / "report.sig").write_text(ed25519.armor(signing.decode_signature(report["signature"])))
    with open(tmp_path / "message", "rb") as message:
        checked = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(hermetic.hills_home / "allowed_signers"),
                                  "-I", "svc", "-n", "hills-report", "-s", str(tmp_path / "report.sig")],
                                 stdin=message, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
