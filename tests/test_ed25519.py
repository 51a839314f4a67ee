"""Ed25519 reports anyone can verify offline: the plain-Python check against
RFC 8032 and `cryptography`, the machine key (0600, made atomically, an old
HMAC secret kept as key.hmac), `hills key` and `hills trust`, a report
verified on a second machine only once its key is trusted, `hills verify
--export` checked by OpenSSH's ssh-keygen, and the signed, hash-chained
attempts log."""

import base64
import hashlib
import hmac
import json
import os
import shutil
import stat
import subprocess

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from testing.util import lines_of, write_lines
from testing.eval_fixtures import attempts_log, hills, official_report, on_machine, real, tree_of
from hills.base import ed25519, state
from hills.evidence import chain, signing, trust

# RFC 8032 section 7.1, tests 1 to 3: (secret, public, message, signature).
RFC8032 = [
    ("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
     "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
    ("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
     "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
    ("c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
     "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"),
]
L = 2**252 + 27742317777372353535851937790883648493
SSH_KEYGEN = shutil.which("ssh-keygen")
needs_ssh_keygen = pytest.mark.skipif(SSH_KEYGEN is None, reason="ssh-keygen (Debian package openssh-client) "
                                                                 "is not installed; bash .ci/run installs it")


# ---------------------------------------------------------------- the plain-Python check

@pytest.mark.parametrize("secret, public, message, signature", RFC8032)
def test_rfc8032_vectors(secret, public, message, signature):
    public_bytes, message_bytes, signature_bytes = map(bytes.fromhex, (public, message, signature))
    assert ed25519.public_from_seed(bytes.fromhex(secret)) == public_bytes
    assert ed25519.verify(public_bytes, message_bytes, signature_bytes)
    assert not ed25519.verify(public_bytes, message_bytes + b"x", signature_bytes)


def test_written_out_constants():
    p = 2**255 - 19
    assert ed25519._D == -121665 * pow(121666, p - 2, p) % p
    assert ed25519._SQRT_M1 == pow(2, (p - 1) // 4, p)
    assert ed25519._BASE == ed25519._decode((4 * pow(5, p - 2, p) % p).to_bytes(32, "little"))


def test_plain_check_agrees_with_cryptography():
    for size in range(0, 200, 13):
        private = Ed25519PrivateKey.generate()
        public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        message = os.urandom(size)
        signature = private.sign(message)
        assert ed25519.verify(public, message, signature)
        assert trust.check(public, message, signature)
        for index in (0, 31, 32, 63):
            bad = bytearray(signature)
            bad[index] ^= 0x40
            assert not ed25519.verify(public, message, bytes(bad))


def test_malleable_and_malformed_signatures_are_refused():
    secret, public, message, signature = (bytes.fromhex(value) for value in RFC8032[1])
    s = int.from_bytes(signature[32:], "little")
    # s + L passes the curve equation but is not the canonical signature: refused, as OpenSSL does.
    assert not ed25519.verify(public, message, signature[:32] + (s + L).to_bytes(32, "little"))
    assert not ed25519.verify(public, message, signature[:63])
    assert not ed25519.verify(public[:31], message, signature)
    assert not ed25519.verify(b"\xff" * 32, message, signature)  # y >= p is no point


def test_public_line_and_fingerprint_match_ssh_keygen(tmp_path):
    public = bytes.fromhex(RFC8032[0][1])
    line = ed25519.public_line(public, "hills@test")
    assert line.startswith("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI") and line.endswith(" hills@test")
    assert ed25519.parse_public(line) == public
    digest = base64.b64encode(hashlib.sha256(ed25519.public_blob(public)).digest()).decode().rstrip("=")
    assert ed25519.fingerprint(public) == "SHA256:" + digest
    if SSH_KEYGEN:
        (tmp_path / "key.pub").write_text(line + "\n")
        shown = subprocess.run([SSH_KEYGEN, "-l", "-f", str(tmp_path / "key.pub")],
                               capture_output=True, text=True, check=True).stdout
        assert ed25519.fingerprint(public) in shown


# ---------------------------------------------------------------- the machine key

def test_key_file_is_pkcs8_pem_0600_and_reads_back(tmp_path, monkeypatch):
    monkeypatch.setenv("HILLS_HOME", str(tmp_path / "home"))
    keys = trust.machine_keys(for_signing=True)
    path = tmp_path / "home" / "key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_bytes()
    assert text.startswith(b"-----BEGIN PRIVATE KEY-----\n")
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    loaded = load_pem_private_key(text, password=None)
    assert loaded.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw) == keys.public
    assert [name for name in os.listdir(tmp_path / "home") if name.startswith(".key")] == []


def test_key_is_created_by_a_link_of_a_finished_file(tmp_path, monkeypatch):
    # Atomic: the key appears by one link of a complete, private file, never
    # written in place, and a key already there is never replaced.
    monkeypatch.setenv("HILLS_HOME", str(tmp_path / "home"))
    linked = []
    real_link = os.link

    def watching_link(source, target, *args, **kwargs):
        if os.path.basename(target) == "key":
            assert stat.S_IMODE(os.stat(source).st_mode) == 0o600
            assert open(source, "rb").read().endswith(b"-----END PRIVATE KEY-----\n")
            linked.append(target)
        return real_link(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "link", watching_link)
    state.load_key()
    assert linked == [str(tmp_path / "home" / "key")]
    first = (tmp_path / "home" / "key").read_bytes()
    state.load_key()
    assert (tmp_path / "home" / "key").read_bytes() == first and len(linked) == 1


def test_a_damaged_key_is_an_environment_problem(tmp_path, monkeypatch):
    monkeypatch.setenv("HILLS_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "key").write_bytes(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    from hills.base.errors import EnvironmentProblem

    with pytest.raises(EnvironmentProblem) as caught:
        trust.machine_keys()
    assert caught.value.exit_code == 4 and "not an Ed25519 private key" in caught.value.message


def test_hills_key_prints_one_openssh_line(hermetic):
    result = real("hills", "key")
    assert result.code == 0, result.output
    line = result.out.strip()
    assert "\n" not in line
    kind, body, comment = line.split(" ")
    assert kind == "ssh-ed25519" and body.startswith("AAAA") and comment.startswith("hills@")
    assert ed25519.parse_public(line) == trust.machine_keys().public
    assert json.loads(hills("key", "--json").out)["fingerprint"] == trust.machine_keys().fingerprint


# ---------------------------------------------------------------- an old machine

def test_an_old_hmac_machine_keeps_its_secret_and_gets_an_ed25519_key(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HILLS_HOME", str(home))
    home.mkdir()
    secret = os.urandom(32).hex().encode()
    (home / "key").write_bytes(secret)
    # What that machine signed and logged before.
    old_report = {"hill": "h", "status": "passing"}
    old_report["signature"] = "hmac-sha256:" + hmac.new(secret, signing.canonical_json(old_report),
                                                       hashlib.sha256).hexdigest()
    log = tmp_path / "attempts.jsonl"
    prev = ""
    for seq in range(3):
        body = signing.canonical_json({"n": seq, "seq": seq, "prev": prev})
        prev = "hmac-sha256:" + hmac.new(secret, body, hashlib.sha256).hexdigest()
        with open(log, "ab") as handle:
            handle.write(body[:-1] + b',"mac":"' + prev.encode() + b'"}\n')
    head = {"mac": prev, "seq": 2}
    head["signature"] = "hmac-sha256:" + hmac.new(secret, signing.canonical_json(head), hashlib.sha256).hexdigest()
    (tmp_path / "attempts.jsonl.head").write_bytes(signing.canonical_json(head) + b"\n")

    # Reading changes nothing: the old secret still checks both.
    assert signing.verify(old_report, trust.machine_keys()).ok
    assert chain.verify(log, trust.machine_keys()).ok
    assert sorted(os.listdir(home)) == ["key"]
    sealed_before = state.existing_key()

    keys = trust.machine_keys(for_signing=True)  # the first command that signs
    assert (home / "key.hmac").read_bytes() == secret
    assert stat.S_IMODE((home / "key").stat().st_mode) == 0o600
    assert (home / "key").read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert state.existing_key() == sealed_before  # caches, counters and pins it sealed stay valid
    assert signing.verify(old_report, trust.machine_keys()) == (True, "signature valid")
    entry = chain.append(log, {"n": 3}, keys)
    assert entry["prev"] == prev and entry["sig"].startswith("ed25519:")
    report = chain.verify(log, trust.machine_keys())
    assert report.ok and report.count == 4, report.problems
    new_report = {"hill": "h"}
    signing.seal(new_report, keys)
    assert new_report["signature"].startswith("sshsig:")
    # Elsewhere, without the old secret, the old lines are named, the new report verifies.
    os.unlink(home / "key.hmac")
    elsewhere = trust.machine_keys()
    assert elsewhere.legacy is None
    problems = chain.verify(log, elsewhere).problems
    assert problems[0] == "line 1: its mac was made with an old HMAC secret this machine does not have (key.hmac)"
    ok, reason = signing.verify(old_report, elsewhere)
    assert not ok and "old HMAC secret" in reason
    assert signing.verify(new_report, elsewhere).ok


# ---------------------------------------------------------------- hills trust

LINE = ed25519.public_line(bytes.fromhex(RFC8032[0][1]), "hills@lab-1")


def test_trust_add_list_remove(hermetic):
    result = hills("trust", "add", "lab-1", LINE)
    assert result.code == 0, result.output
    assert "trusted 'lab-1' (SHA256:" in result.err
    text = (hermetic.hills_home / "allowed_signers").read_text()
    assert text == f'lab-1 namespaces="hills-report" {LINE.rsplit(" ", 1)[0]}\n'
    listed = hills("trust", "list")
    assert listed.code == 0 and listed.out.startswith("lab-1\tSHA256:")
    assert json.loads(hills("trust", "list", "--json").out)[0]["name"] == "lab-1"
    assert not (hermetic.hills_home / "key").exists()  # trusting another key makes none of this machine's
    removed = hills("trust", "remove", "lab-1")
    assert removed.code == 0 and "no longer trusted: 'lab-1'" in removed.err
    assert hills("trust", "list").out == ""


@pytest.mark.parametrize("key, words", [
    ("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ", "expected key type 'ssh-ed25519', got 'ssh-rsa'"),
    ("ssh-ed25519", "expected 'ssh-ed25519 AAAA...'"),
    ("ssh-ed25519 not-base64!", "expected base64 of an ssh-ed25519 key"),
    ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5", "expected base64 of an ssh-ed25519 key (32 bytes)"),
])
def test_trust_add_refuses_a_malformed_key_line(hermetic, key, words):
    result = hills("trust", "add", "lab-1", key)
    assert result.code == 2, result.output
    assert "error: key for 'lab-1' is not an OpenSSH public key line" in result.err
    assert words in result.err and "hills key" in result.err
    assert not (hermetic.hills_home / "allowed_signers").exists()


@pytest.mark.parametrize("name", ["two words", "a,b", "*", 'q"uote', ".hidden"])
def test_trust_add_refuses_a_name_that_is_not_plain(hermetic, name):
    result = hills("trust", "add", name, LINE)
    assert result.code == 2, result.output
    assert f"trusted name '{name}' is not a plain name" in result.err and "expected letters, digits" in result.err


def test_trust_remove_an_unknown_name(hermetic):
    hills("trust", "add", "lab-1", LINE)
    result = hills("trust", "remove", "lab-9")
    assert result.code == 2, result.output
    assert "error: no trusted key is named 'lab-9'" in result.err
    assert "expected one of the names 'hills trust list' shows (trusted now: 'lab-1')" in result.err


def test_allowed_signers_lines_hills_did_not_write_are_kept(hermetic):
    hermetic.hills_home.mkdir()
    path = hermetic.hills_home / "allowed_signers"
    other = ed25519.public_line(bytes.fromhex(RFC8032[1][1]))
    path.write_text(f"# kept\nmail@example.org namespaces=\"git\" {other}\nbroken line\n"
                    "rsa@example.org ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ\n"
                    f"ca@example.org cert-authority namespaces=\"hills-report\" {other}\n"
                    f'both@example.org namespaces="git,hills-report" {other}\n')
    hills("trust", "add", "lab-1", LINE)
    text = path.read_text()
    assert text.startswith("# kept\nmail@example.org") and "broken line" in text and "ssh-rsa" in text
    # The git-only key, the RSA key and the CA are not report signers for hills.
    assert [signer.name for signer in trust.trusted()] == ["both@example.org", "lab-1"]
    listed = hills("trust", "list")
    assert "line 3" in listed.err and "line 4" not in listed.err


# ---------------------------------------------------------------- a report across machines

@pytest.fixture(scope="module")
def signed_report(module_machine, tmp_path_factory):
    """A report of a passing official eval on `module_machine`, and that machine's key line."""
    target = official_report(module_machine, tmp_path_factory, "signed")
    with on_machine(module_machine):
        return target, real("hills", "key").out.strip()


def other_machine(tmp_path):
    return dict(os.environ, HILLS_HOME=str(tmp_path / "second-machine"))


def test_the_report_names_its_signer(signed_report):
    report_file, line = signed_report
    report = json.loads(report_file.read_text())
    assert report["signer"] == ed25519.fingerprint(ed25519.parse_public(line))
    assert report["signature"].startswith("sshsig:")


def test_a_report_verifies_on_a_second_machine_only_after_trust_add(signed_report, tmp_path):
    report_file, line = signed_report
    fingerprint = json.loads(report_file.read_text())["signer"]
    env = other_machine(tmp_path)
    before = real("hills", "verify", report_file, env=env)
    assert before.code == 1, before.output
    assert before.out.strip() == f"signature INVALID: signed by {fingerprint}, a key this machine does not trust"
    assert "hint: compare the fingerprint" in before.err and "hills trust add" in before.err
    assert not (tmp_path / "second-machine").exists()  # verify created nothing
    added = real("hills", "trust", "add", "lab-1", line, env=env)
    assert added.code == 0, added.output
    after = real("hills", "verify", report_file, env=env)
    assert after.code == 0, after.output
    assert after.out.startswith("signature valid: signed @ ")
    assert f"key: 'lab-1' ({fingerprint})" in after.out
    assert not (tmp_path / "second-machine" / "key").exists()  # nothing but public keys
    removed = real("hills", "trust", "remove", "lab-1", env=env)
    assert removed.code == 0
    assert real("hills", "verify", report_file, env=env).code == 1


@pytest.mark.parametrize("change", [
    lambda r: r["metrics"][0].update(value=8.0),
    lambda r: r.update(official=False),
    lambda r: r.update(extra="field"),
], ids=["metric", "official", "added-key"])
def test_an_edited_report_fails_even_where_its_key_is_trusted(signed_report, tmp_path, change):
    report_file, line = signed_report
    env = other_machine(tmp_path)
    real("hills", "trust", "add", "lab-1", line, env=env)
    report = json.loads(report_file.read_text())
    change(report)
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(report))
    for result in (real("hills", "verify", edited, env=env), real("hills", "verify", edited)):
        assert result.code == 1, result.output
        assert result.out.strip() == "signature INVALID: this report was edited after it was signed"


def test_a_report_resigned_by_an_untrusted_key_fails_naming_it(signed_report, tmp_path):
    report_file, _ = signed_report
    forger = trust.Keys(None, None, os.urandom(32), can_sign=True)
    report = json.loads(report_file.read_text())
    report["metrics"][0]["value"] = 100.0
    signing.seal(report, forger)
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(report))
    result = real("hills", "verify", forged)
    assert result.code == 1, result.output
    assert f"signed by {forger.fingerprint}, a key this machine does not trust" in result.out


@needs_ssh_keygen
def test_export_then_ssh_keygen_verifies_with_openssh_alone(signed_report, tmp_path):
    report_file, line = signed_report
    out = tmp_path / "exported"
    result = real("hills", "verify", "--export", out, report_file)
    assert result.code == 0, result.output
    assert sorted(os.listdir(out)) == ["allowed_signers", "message", "report.sig"]
    command = result.out.splitlines()[1].strip()
    principal = command.split(" -I ")[1].split(" ")[0]
    assert command == (f"ssh-keygen -Y verify -f allowed_signers -I {principal} -n hills-report "
                       "-s report.sig < message")
    assert (out / "report.sig").read_text().startswith("-----BEGIN SSH SIGNATURE-----\n")
    report = json.loads(report_file.read_text())
    assert (out / "message").read_bytes() == signing.message(report)

    def ssh_verify(message: bytes) -> subprocess.CompletedProcess:
        return subprocess.run([SSH_KEYGEN, "-Y", "verify", "-f", "allowed_signers", "-I", principal,
                               "-n", "hills-report", "-s", "report.sig"],
                              input=message, cwd=out, capture_output=True, timeout=60)

    good = ssh_verify((out / "message").read_bytes())
    assert good.returncode == 0, good.stderr
    assert b'Good "hills-report" signature' in good.stdout + good.stderr
    edited = (out / "message").read_bytes().replace(b'"value":7.0', b'"value":8.0')
    assert edited != (out / "message").read_bytes()
    bad = ssh_verify(edited)
    assert bad.returncode != 0
    # The export of a report from a trusted machine names it as trusted.
    env = other_machine(tmp_path)
    real("hills", "trust", "add", "lab-1", line, env=env)
    elsewhere = real("hills", "verify", "--export", tmp_path / "elsewhere", report_file, env=env)
    assert elsewhere.code == 0 and "-I lab-1 " in elsewhere.out
    assert (tmp_path / "elsewhere" / "allowed_signers").read_text().startswith('lab-1 namespaces="hills-report" ')


def test_export_refuses_a_report_that_does_not_verify(signed_report, tmp_path):
    report_file, _ = signed_report
    result = real("hills", "verify", "--export", tmp_path / "out", report_file, env=other_machine(tmp_path))
    assert result.code == 1 and "does not trust" in result.out
    assert not (tmp_path / "out").exists()
    two = real("hills", "verify", "--export", tmp_path / "out", report_file, report_file)
    assert two.code == 2 and "--export writes one report's files, got 2 reports" in two.err


# ---------------------------------------------------------------- read-only commands create nothing

def test_read_only_commands_on_a_fresh_home_create_no_key(signed_report, module_machine, tmp_path, hermetic):
    report_file, _ = signed_report
    env = other_machine(tmp_path)
    log = tmp_path / "log.jsonl"
    log.write_bytes(b"")
    for argv in (["verify", report_file], ["show", report_file], ["rank", report_file],
                 ["chain", "verify", log], ["chain", "show", log], ["trust", "list"],
                 ["attempts", "signed"], ["status", "signed"], ["log", "signed"]):
        result = real("hills", *argv, env=env, cwd=module_machine.project)
        assert result.code in (0, 1), result.output
        assert not (tmp_path / "second-machine").exists(), argv


# ---------------------------------------------------------------- the attempts log

KEYS = trust.Keys(None, None, b"\x05" * 32, can_sign=True)


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "attempts.jsonl"
    for index in range(6):
        chain.append(path, {"report": {"n": index, "status": "passing"}}, KEYS)
    os.unlink(chain.head_path(path))  # only the lines themselves speak
    return path


def test_an_edited_line_is_found(log):
    lines = lines_of(log)
    lines[2] = lines[2].replace(b'"n":2', b'"n":9')
    write_lines(log, lines)
    report = chain.verify(log, KEYS)
    assert report.problems == ["line 3: signature does not match its content (edited)"]
    assert report.break_line == 3 and report.count == 5


def test_an_edited_line_relinked_by_hand_is_found(log):
    # The links can be made anew by anyone; the signatures cannot.
    lines = lines_of(log)
    lines[2] = lines[2].replace(b'"n":2', b'"n":9')
    for index in range(3, len(lines)):
        entry = json.loads(lines[index])
        old_prev = entry["prev"]
        new_prev = chain.link_of(lines[index - 1])
        lines[index] = lines[index].replace(old_prev.encode(), new_prev.encode())
    write_lines(log, lines)
    report = chain.verify(log, KEYS)
    assert not report.ok and report.break_line == 3
    assert report.problems[0] == "line 3: signature does not match its content (edited)"
    assert all("signature does not match" in problem for problem in report.problems)
    assert report.count == 2


def test_a_removed_line_is_found(log):
    lines = lines_of(log)
    del lines[3]
    write_lines(log, lines)
    report = chain.verify(log, KEYS)
    assert report.problems == ["line 4: seq 4 follows seq 2 (a line was deleted or moved)",
                               "line 4: prev does not match the link of line 3 (the chain is broken here)"]


def test_reordered_lines_are_found(log):
    lines = lines_of(log)
    lines[1], lines[4] = lines[4], lines[1]
    write_lines(log, lines)
    report = chain.verify(log, KEYS)
    assert report.break_line == 2
    assert report.problems[0] == "line 2: seq 4 follows seq 0 (a line was deleted or moved)"
    assert "line 5: seq 1 follows seq 3 (a line was moved or repeated)" in report.problems


def test_a_line_signed_by_another_key_is_found(log):
    other = trust.Keys(None, None, b"\x06" * 32, can_sign=True)
    lines = lines_of(log)
    entry = json.loads(lines[-1])
    forged, _ = chain.encode_entry({"report": {"n": 99, "status": "passing"}}, entry["seq"] + 1,
                                   chain.link_of(lines[-1]), other)
    write_lines(log, lines + [forged])
    report = chain.verify(log, KEYS)
    assert report.problems == ["line 7: signature does not match its content (edited)"]
    with pytest.raises(Exception) as caught:
        chain.append(log, {"report": {}}, KEYS)
    assert "does not carry a valid signature" in str(caught.value)


def test_a_log_checked_with_another_key_or_none(log):
    report = chain.verify(log, trust.Keys(None, None, b"\x07" * 32))
    assert report.count == 0 and len(report.problems) == 6
    assert all(problem.endswith("signature does not match its content (edited)") for problem in report.problems)
    report = chain.verify(log, trust.Keys(None, None))
    assert report.problems[0] == "line 1: signed with an Ed25519 key, and this machine has none to check it with"


def test_a_long_log_under_another_key_is_checked_in_a_few_signatures(tmp_path):
    path = tmp_path / "long.jsonl"
    lines, prev = [], ""
    for seq in range(2000):
        line, prev = chain.encode_entry({"n": seq}, seq, prev, KEYS)
        lines.append(line)
    path.write_bytes(b"".join(lines))
    checked = []
    real_check = trust.check

    def counting(public, data, signature):
        checked.append(1)
        return real_check(public, data, signature)

    import hills.evidence.trust

    original = hills.evidence.trust.check
    hills.evidence.trust.check = counting
    try:
        report = chain.verify(path, trust.Keys(None, None, b"\x07" * 32))
    finally:
        hills.evidence.trust.check = original
    assert report.count == 0 and len(report.problems) == 2000 and report.break_line == 1
    assert len(checked) < 20


def test_the_eval_log_verifies_with_the_public_key_alone(signed_report, module_machine):
    with on_machine(module_machine):
        hill_dir = module_machine.project / ".hills" / "signed"
        path = attempts_log("signed", tree_of(hill_dir))
        public_only = trust.Keys(trust.machine_keys().public, None)
        report = chain.verify(path, public_only)
        assert report.ok and report.count >= 1, report.problems


def test_racing_first_signers_on_an_old_machine_migrate_once(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    home = tmp_path / "old-machine"
    home.mkdir()
    secret = os.urandom(32).hex().encode()
    (home / "key").write_bytes(secret)
    env = dict(os.environ, HILLS_HOME=str(home))
    with ThreadPoolExecutor(max_workers=6) as pool:
        signed = list(pool.map(lambda n: real("hills-sign", input=json.dumps({"n": n}), env=env), range(6)))
    assert (home / "key.hmac").read_bytes() == secret
    assert (home / "key").read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    fingerprints = set()
    for number, result in enumerate(signed):
        assert result.code == 0, result.output
        target = tmp_path / f"signed-{number}.json"
        target.write_text(result.out)
        fingerprints.add(json.loads(result.out)["signer"])
        assert real("hills", "verify", target, env=env).code == 0
    assert fingerprints == {trust.Keys(None, None, state_seed(home)).fingerprint}


def state_seed(home):
    text = (home / "key").read_bytes()
    der = base64.b64decode(b"".join(text.splitlines()[1:-1]))
    return der[16:]
