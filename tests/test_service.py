"""The evaluation service, attacked as the climber would: a real service
under its own user, an admin and a climber made with useradd, each acting
through runuser. Every attack that the service stops has a control beside
it showing the same attack succeeding in same-user mode. Without root
these tests skip, saying why."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from hills.service import protocol
from testing.service_fixtures import (Service, error_of, home_of, make_hill, needs_root, raw_bytes, raw_request,
                                      request, running_service, submission)

pytestmark = needs_root

DEMO, PEEK, CRASH = "vaulted", "peek", "crash"


@pytest.fixture(scope="module")
def service():
    with running_service("hills-service-") as svc:
        for name, budget in ((DEMO, None), (PEEK, 1), (CRASH, 1)):
            committed = make_hill(svc, svc.admin, name, budget)
            assert committed.code == 0, committed.err
        yield svc


def same_user(**extra: str) -> dict[str, str]:
    return {"HILLS_SERVICE": "off", **extra}


# ------------------------------------------------------------ evals and reports

@pytest.mark.slow
def test_a_climber_evaluates_through_the_service_and_the_report_says_so(service):
    folder = submission(service, service.climber, "sub")
    result = service.hills(service.climber, "eval", folder, "-H", DEMO, "--json")
    assert result.code == 0, result.err
    report = result.report
    assert report["trust"] == "service" and report["user"] == service.climber
    assert report["passed"] and report["details"]["secret_words"] == 8
    # The service's copy scored it: the climber's folder is nowhere in it.
    assert folder not in json.dumps(report)


@pytest.mark.slow
def test_the_services_copy_is_known_clean_without_git(service):
    from hills.base import gitobjects
    from hills.base.git import Repo
    from hills.disk.hill import excluded_blobs

    copy = service.state / "project" / ".hills" / DEMO
    tree = Repo(copy).run("rev-parse", "HEAD^{tree}").strip()
    assert gitobjects.clean_by_stat(str(copy / ".vc"), str(copy), tree, excluded_blobs(str(copy)))


@pytest.mark.slow
def test_same_user_reports_say_same_user_and_the_local_user(service):
    made = make_hill(service, service.climber, "own", extra_env=same_user())
    assert made.code == 0, made.err
    folder = submission(service, service.climber, "sub-own")
    result = service.hills(service.climber, "eval", folder, "-H", "own", "--json",
                           cwd=str(Path(home_of(service.climber)) / "project"), **same_user())
    assert result.code == 0, result.err
    assert result.report["trust"] == "same-user" and result.report["user"] == service.climber


@pytest.mark.slow
def test_a_same_user_climber_cannot_sign_a_report_that_claims_the_service(service):
    project = Path(home_of(service.climber)) / "project"
    made = make_hill(service, service.climber, "claims", extra_env=same_user())
    assert made.code == 0, made.err
    folder = submission(service, service.climber, "sub-claims")
    plain = service.hills(service.climber, "eval", folder, "-H", "claims", "--json", cwd=str(project), **same_user())
    assert plain.code == 0 and plain.report["trust"] == "same-user", plain.err
    # The attack: the caller says whom the service serves.
    forged = service.hills(service.climber, "eval", folder, "-H", "claims", "--json", cwd=str(project),
                           **same_user(HILLS_SERVED_FOR=service.admin))
    assert forged.code == 4, forged.out + forged.err
    assert forged.out == ""
    assert f"'HILLS_SERVED_FOR' names user '{service.admin}', but this process is not the hills service" in forged.err
    # A state folder of its own shaped like the service's, with a service.json
    # naming itself: not root's, so not the service.
    fake = Path(home_of(service.climber)) / "fake-state"
    made = service.shell(service.climber, f"mkdir -p {fake}/home && chmod 700 {fake} && "
                                          f"echo '{{\"user\": \"{service.climber}\"}}' > {fake}/service.json")
    assert made.code == 0, made.err
    faked = service.hills(service.climber, "eval", folder, "-H", "claims", "--json", cwd=str(project),
                          **same_user(HILLS_SERVED_FOR=service.admin, HILLS_HOME=f"{fake}/home"))
    assert faked.code == 4, faked.out + faked.err
    assert f"this process is not the hills service: '{fake}/service.json' was not written by root" in faked.err


@pytest.mark.slow
def test_the_admin_may_delete_private_after_commit_and_evals_still_score(service):
    private = Path(home_of(service.admin)) / "project" / ".hills" / DEMO / "private"
    subprocess.run(["rm", "-rf", str(private)], check=True)
    folder = submission(service, service.climber, "sub-after")
    result = service.hills(service.climber, "eval", folder, "-H", DEMO, "--json")
    assert result.code == 0, result.err
    assert result.report["details"]["secret_words"] == 8


@pytest.mark.slow
def test_verify_offline_and_with_openssh_alone(service, tmp_path):
    folder = submission(service, service.climber, "sub-verify")
    report = service.hills(service.climber, "eval", folder, "-H", DEMO, "--json")
    assert report.code == 0, report.err
    path = Path(home_of(service.climber)) / "report.json"
    path.write_text(report.out)
    through = service.hills(service.climber, "verify", str(path))
    assert through.code == 0 and "valid" in through.err + through.out
    # In the service's own process, its own key backs the claim.
    assert "trusted as a service key" in through.out and "  trust: service (" in through.out
    key = service.hills(service.climber, "key")
    assert key.code == 0 and key.out.startswith("ssh-ed25519 ")
    assert "hills trust add --service" in key.err
    # Offline, on the climber's own machine state, with nothing but the public key.
    offline_env = same_user()
    unknown = service.hills(service.climber, "verify", str(path), **offline_env)
    assert unknown.code == 1
    # Trusted as a machine's key, it does not back a report that says the service.
    assert service.hills(service.climber, "trust", "add", "service", key.out.strip(), **offline_env).code == 0
    as_machine = service.hills(service.climber, "verify", str(path), **offline_env)
    assert as_machine.code == 1 and "is not trusted as a service key" in as_machine.out, as_machine.out
    assert service.hills(service.climber, "trust", "add", "--service", "service", key.out.strip(),
                         **offline_env).code == 0
    offline = service.hills(service.climber, "verify", str(path), **offline_env)
    assert offline.code == 0, offline.err
    assert "  key: 'service' (" in offline.out and "trusted as a service key" in offline.out
    assert "  trust: service (" in offline.out
    export = Path(home_of(service.climber)) / "export"
    exported = service.hills(service.climber, "verify", "--export", str(export), str(path), **offline_env)
    assert exported.code == 0, exported.err
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen (openssh-client) is not installed")
    principal = (export / "allowed_signers").read_text().split()[0]
    with open(export / "message", "rb") as message:
        checked = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(export / "allowed_signers"), "-I",
                                  principal, "-n", "hills-report", "-s", str(export / "report.sig")],
                                 stdin=message, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.slow
def test_an_edited_service_report_is_invalid(service):
    folder = submission(service, service.climber, "sub-edit")
    report = service.hills(service.climber, "eval", folder, "-H", DEMO, "--json").report
    report["metrics"][0]["value"] = 1e9
    path = Path(home_of(service.climber)) / "edited.json"
    path.write_text(json.dumps(report))
    checked = service.hills(service.climber, "verify", str(path))
    assert checked.code == 1 and "INVALID" in checked.out + checked.err


# ------------------------------------------------------------ refusals by role

@pytest.mark.slow
def test_a_climber_is_refused_commit_and_pin(service):
    for args in (("pin", DEMO), ("commit", DEMO, "-m", "mine")):
        refused = service.hills(service.climber, *args)
        assert refused.code == 1
        assert f"'hills {args[0]}' is for the service's admins; user '{service.climber}' is a climber" in refused.err


@pytest.mark.slow
def test_control_a_same_user_climber_pins_its_own_edited_evaluator(service):
    project = str(Path(home_of(service.climber)) / "project")
    if not (Path(project) / ".hills" / "own").exists():
        assert make_hill(service, service.climber, "own", extra_env=same_user()).code == 0
    pinned = service.hills(service.climber, "pin", "own", cwd=project, **same_user())
    assert pinned.code == 0, pinned.err


@pytest.mark.slow
def test_the_admin_pins_through_the_service(service):
    pinned = service.hills(service.admin, "pin", DEMO)
    assert pinned.code == 0, pinned.err
    assert "approved tree" in pinned.err


@pytest.mark.slow
def test_a_user_who_is_neither_is_refused(service):
    refused = service.hills(service.outsider, "list")
    assert refused.code == 1
    assert f"user '{service.outsider}'" in refused.err and "neither an admin nor a climber" in refused.err


@pytest.mark.slow
def test_arguments_that_name_the_services_places_are_refused(service):
    key = str(service.state / "home" / "key")
    folder = submission(service, service.climber, "sub-places")
    for args, words in ((("show", key), f"cannot send '{key}': Permission denied"),
                        (("eval", folder, "-H", "../../state"), "invalid hill name '../../state'"),
                        (("attempts", ".."), "invalid hill name '..'")):
        refused = service.hills(service.climber, *args)
        assert refused.code == 2, (args, refused.err)
        assert words in refused.err


@pytest.mark.slow
def test_the_climber_cannot_read_the_key_the_vault_or_private_data(service):
    for path in (service.state / "home" / "key", service.state / "home" / "vault",
                 service.state / "project" / ".hills" / DEMO / "private" / "secret.txt"):
        read = service.shell(service.climber, f"cat '{path}' || ls '{path}'")
        assert read.code != 0 and "Permission denied" in read.err
    # Control: in same-user mode the climber's shell reads its own key.
    service.hills(service.climber, "key", **same_user())
    own = service.shell(service.climber, "cat ~/hills-home/key")
    assert own.code == 0 and "PRIVATE KEY" in own.out


@pytest.mark.slow
def test_the_climber_cannot_delete_the_services_logs(service):
    gone = service.shell(service.climber, f"rm -rf '{service.state}/home/state'")
    assert gone.code != 0
    assert service.log_lines(DEMO)


# ------------------------------------------------------------ no hidden attempts

def _wait_for(condition, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
def test_killing_the_client_mid_final_eval_neither_stops_nor_hides_it(service):
    folder = submission(service, service.climber, "sub-peek", answer="9", sleep=3)
    client = subprocess.Popen(service.argv(service.climber, [*service.python, "-m", "hills", "eval", folder,
                                                            "-H", PEEK, "--final"]),
                              cwd=home_of(service.climber), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              start_new_session=True)
    assert _wait_for(lambda: any("started" in line for line in service.log_lines(PEEK)))
    os.killpg(client.pid, signal.SIGKILL)
    client.wait()
    assert _wait_for(lambda: any("report" in line for line in service.log_lines(PEEK)))
    outcome = [line for line in service.log_lines(PEEK) if "report" in line][-1]["report"]
    assert outcome["final"] and outcome["status"] == "passing" and outcome["user"] == service.climber
    assert outcome["duration_s"] >= 3  # it ran its course after the client was gone
    attempts = service.hills(service.climber, "attempts", PEEK)
    assert attempts.code == 0 and "ABANDONED" not in attempts.out + attempts.err
    again = service.hills(service.climber, "eval", folder, "-H", PEEK, "--final")
    assert again.code == 5 and "budget" in again.err and "spent" in again.err


@pytest.mark.slow
def test_control_in_same_user_mode_killing_the_eval_leaves_no_outcome(service):
    project = str(Path(home_of(service.climber)) / "project")
    if not (Path(project) / ".hills" / "own").exists():
        assert make_hill(service, service.climber, "own", extra_env=same_user()).code == 0
    folder = submission(service, service.climber, "sub-own-kill", sleep=5)
    own_home = Path(home_of(service.climber)) / "hills-home" / "state"

    def lines() -> list[dict]:
        found = []
        for log in own_home.glob("own@*/attempts.jsonl"):
            found += [json.loads(line) for line in log.read_text().splitlines() if line.endswith("}")]
        return found

    before = len([line for line in lines() if "report" in line])
    client = subprocess.Popen(service.argv(service.climber, [*service.python, "-m", "hills", "eval", folder,
                                                            "-H", "own"], HILLS_SERVICE="off"),
                              cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    assert _wait_for(lambda: len([line for line in lines() if "started" in line]) > before)
    os.killpg(client.pid, signal.SIGKILL)
    client.wait()
    time.sleep(6)
    # The eval died with its client: no outcome was logged (only its started entry tells).
    assert len([line for line in lines() if "report" in line]) == before


@pytest.mark.slow
def test_control_a_same_user_climber_deletes_its_log_and_gets_the_budget_back(service):
    project = str(Path(home_of(service.climber)) / "project")
    hill = Path(project) / ".hills" / "peeky"
    if not hill.exists():
        assert make_hill(service, service.climber, "peeky", budget=1, extra_env=same_user()).code == 0
    folder = submission(service, service.climber, "sub-peeky")
    first = service.hills(service.climber, "eval", folder, "-H", "peeky", "--final", cwd=project, **same_user())
    assert first.code == 0, first.err
    spent = service.hills(service.climber, "eval", folder, "-H", "peeky", "--final", cwd=project, **same_user())
    assert spent.code == 5
    assert service.shell(service.climber, "rm -rf ~/hills-home/state/peeky@*").code == 0
    again = service.hills(service.climber, "eval", folder, "-H", "peeky", "--final", cwd=project, **same_user())
    assert again.code == 0, again.err  # the budget came back: what the service closes


@pytest.mark.slow
def test_a_crashed_service_process_leaves_an_abandoned_eval_that_counts(service):
    folder = submission(service, service.climber, "sub-crash", sleep=30)
    client = subprocess.Popen(service.argv(service.climber, [*service.python, "-m", "hills", "eval", folder,
                                                            "-H", CRASH, "--final"]),
                              cwd=home_of(service.climber), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert _wait_for(lambda: any("started" in line for line in service.log_lines(CRASH)))
    started = [line for line in service.log_lines(CRASH) if "started" in line][-1]["started"]
    os.kill(started["pid"], signal.SIGKILL)  # the service's process answering this connection
    client.wait(30)
    assert client.returncode != 0
    attempts = service.hills(service.climber, "attempts", CRASH)
    assert "ABANDONED" in attempts.out + attempts.err, attempts.out + attempts.err
    again = service.hills(service.climber, "eval", submission(service, service.climber, "sub-crash-2"),
                          "-H", CRASH, "--final")
    assert again.code == 5 and "spent" in again.err
    # The service itself goes on answering.
    assert service.hills(service.climber, "list").code == 0


@pytest.mark.slow
def test_sixteen_concurrent_climber_evals_all_land_with_the_chain_intact(service):
    folders = [submission(service, service.climber, f"sub-many-{index}", answer=str(index)) for index in range(16)]
    before = len([line for line in service.log_lines(DEMO) if "report" in line])
    results: list = [None] * 16

    def one(index: int) -> None:
        results[index] = service.hills(service.climber, "eval", folders[index], "-H", DEMO, "--json")

    threads = [threading.Thread(target=one, args=(index,)) for index in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(result.code == 0 for result in results), [r.err for r in results if r.code]
    values = sorted(result.report["metrics"][0]["value"] for result in results)
    assert values == [float(index) for index in range(16)]
    after = len([line for line in service.log_lines(DEMO) if "report" in line])
    assert after - before == 16
    attempts = service.hills(service.climber, "attempts", DEMO)
    assert attempts.code == 0 and "chain intact" in attempts.out + attempts.err


# ------------------------------------------------------------ the protocol under abuse

@pytest.mark.slow
def test_malformed_oversized_and_slow_requests_are_refused_without_harming_others(service):
    def refused(payload: bytes) -> dict:
        return error_of(raw_bytes(service, service.climber, payload)[0])

    assert "unknown frame kind" in refused(b"GET / HTTP/1.0\r\n\r\n")["message"]
    assert "over the protocol's" in refused(struct.pack(">cI", b"R", 1 << 30))["message"]
    assert "not JSON" in refused(struct.pack(">cI", b"R", 3) + b"{{{")["message"]
    body = json.dumps({"type": "request", "version": 99, "verb": "list", "fields": {}}).encode()
    assert "version 99" in refused(struct.pack(">cI", b"R", len(body)) + body)["message"]
    slow: dict = {}
    slow_thread = threading.Thread(target=lambda: slow.update(answer=raw_bytes(service, service.climber, b"")))
    slow_thread.start()
    # While the slow one waits, others are answered.
    folder = submission(service, service.climber, "sub-slow")
    assert service.hills(service.climber, "eval", folder, "-H", DEMO).code == 0
    slow_thread.join(40)
    answer, seconds = slow["answer"]
    assert "too slow" in error_of(answer)["message"] and seconds < protocol.FIRST_DEADLINE_S + 3


@pytest.mark.slow
def test_an_old_client_is_told_the_protocol_changed(service):
    old = {"type": "request", "version": 1, "verb": "eval", "argv": [".hills", "-H", DEMO], "files": []}
    answer = raw_request(service, service.climber, old)
    assert answer[0]["type"] == "error" and answer[0]["exit"] == 1
    assert "version 1 is not spoken here" in answer[0]["message"] and "the client is older" in answer[0]["message"]
    assert "same hills" in answer[0]["hint"]


# ------------------------------------------------------------ typed requests

def _runs_left(service: Service) -> list[str]:
    return sorted(os.listdir(service.state / "requests"))


@pytest.mark.slow
def test_raw_requests_naming_the_services_places_or_undeclared_options_are_refused_by_name(service):
    folder = submission(service, service.climber, "sub-raw")
    # Control: the hand-made client scores a submission it streams, as the CLI does.
    scored = raw_request(service, service.climber, request("eval", submissions=[0], hill=DEMO, json=True),
                         [["dir", folder]])
    assert scored[0]["type"] == "accepted" and scored[-1] == {"type": "exit", "exit": 0}, scored
    shown = "".join(item["text"] for item in scored if item.get("kind") == "O")
    assert json.loads(shown)["trust"] == "service"
    key = str(service.state / "home" / "key")
    picture = str(service.state / "project" / "picture.svg")
    for verb, fields, exit_code, words in (
            # the submission '.hills' would score the service's own folder, every private/ in it
            ("eval", {"submissions": [".hills"], "hill": DEMO}, 2, "the service opens no path a caller names"),
            ("show", {"report": key}, 2, "the service opens no path a caller names"),
            ("eval", {"submissions": [0], "hill": DEMO, "into": "/tmp"}, 2,
             "'--into' is not taken through the hills service"),
            ("eval", {"submissions": [0], "hill": DEMO, "argv": ["-o", key]}, 2,
             "'--argv' is not taken through the hills service"),
            ("show", {"report": 0, "picture": picture}, 2, "'--picture': expected true or false"),
            ("eval", {"submissions": [0], "hill": DEMO, "on": "ray://127.0.0.1:6379"}, 2,
             "its admin configured no Ray cluster"),
            ("eval", {"submissions": [0], "hill": DEMO, "verbose": True}, 1,
             "'--verbose' of 'hills eval' is for the service's admins"),
            ("eval", {"submissions": [0], "hill": f"{DEMO}/../.."}, 2, "invalid hill name")):
        answer = raw_request(service, service.climber, request(verb, **fields), [["dir", folder]])
        assert answer[0]["type"] == "error", (fields, answer)
        assert answer[0]["exit"] == exit_code and words in answer[0]["message"], (fields, answer[0])
    assert not os.path.exists(picture)
    assert _wait_for(lambda: _runs_left(service) == [], timeout=10)


@pytest.mark.slow
def test_on_ray_through_the_cli_is_refused_without_a_configured_cluster(service):
    folder = submission(service, service.climber, "sub-ray")
    refused = service.hills(service.climber, "eval", folder, "-H", DEMO, "--on", "ray")
    assert refused.code == 2 and "'--on' is not taken through this hills service" in refused.err, refused.err
    assert "ray_address" in refused.err


@pytest.mark.slow
def test_on_ray_goes_only_to_the_cluster_the_admin_configured(service):
    config = service.state / "service.json"
    saved = config.read_text()
    # Nothing listens there: an eval that goes to it says so, naming the address.
    config.write_text(json.dumps({**json.loads(saved), "ray_address": "ray://127.0.0.1:9"}))
    try:
        folder = submission(service, service.climber, "sub-ray-configured")
        other = service.hills(service.climber, "eval", folder, "-H", DEMO, "--on", "ray://127.0.0.2:6379")
        assert other.code == 2 and "names a cluster this hills service does not use" in other.err, other.err
        # What the caller's side says of a cluster counts for nothing through the service.
        configured = service.hills(service.climber, "eval", folder, "-H", DEMO, "--on", "ray",
                                   RAY_ADDRESS="127.0.0.2:6379")
        assert configured.code != 0 and "127.0.0.2" not in configured.err
        if importlib.util.find_spec("ray") is not None:
            assert "cannot join the Ray cluster at '127.0.0.1:9'" in configured.err, configured.err
        else:
            assert "hills[ray]" in configured.err, configured.err
    finally:
        config.write_text(saved)
    # Control: in same-user mode, `--on ray` goes where the caller's environment says.
    project = str(Path(home_of(service.climber)) / "project")
    if not (Path(project) / ".hills" / "own").exists():
        assert make_hill(service, service.climber, "own", extra_env=same_user()).code == 0
    if importlib.util.find_spec("ray") is not None:
        own = service.hills(service.climber, "eval", folder, "-H", "own", "--on", "ray", cwd=project,
                            **same_user(RAY_ADDRESS="127.0.0.2:9"))
        assert own.code != 0 and "cannot join the Ray cluster at '127.0.0.2:9'" in own.err, own.err


@pytest.mark.slow
def test_against_a_reference_works_and_the_client_writes_the_files(service):
    home = Path(home_of(service.climber))
    folder = submission(service, service.climber, "sub-ab", answer="9")
    reference = submission(service, service.climber, "ref-ab", answer="3")
    before = set(_tree(service.state))
    compared = service.hills(service.climber, "eval", folder, "-H", DEMO, "--against", reference, "--repeat", "2",
                             "-o", "ab.json", "--summary-only")
    assert compared.code in (0, 1), compared.err
    written = home / "ab.json"
    assert written.exists() and written.stat().st_uid == int(service.shell(service.climber, "id -u").out)
    ab = json.loads(written.read_text())
    # The reference was streamed and scored: its runs' values are the reference's answer.
    assert ab["trust"] == "service" and ab["verdict"]["reference"]["values"] == [3.0, 3.0], ab["verdict"]
    assert ab["verdict"]["candidate"]["values"] == [9.0, 9.0]
    report = service.hills(service.climber, "eval", folder, "-H", DEMO, "-o", "plain.json", "--json")
    assert report.code == 0 and json.loads((home / "plain.json").read_text()) == report.report
    shown = service.hills(service.climber, "show", "plain.json", "--picture", "plain.svg")
    assert shown.code == 0, shown.err
    assert (home / "plain.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    assert f"drawn in {home / 'plain.svg'}" in shown.err or "drawn in plain.svg" in shown.err, shown.err
    # Nothing of it stayed in the service's folder.
    made = set(_tree(service.state)) - before
    assert not [path for path in made if path.endswith((".json", ".svg")) and "/requests/" in path], made
    assert not [path for path in made if path.endswith(("ab.json", "plain.json", "plain.svg"))], made


def _tree(folder: Path) -> list[str]:
    return [os.path.join(root, name) for root, _, names in os.walk(folder) for name in names]


@pytest.mark.slow
def test_the_summary_names_the_climbers_own_folder(service):
    folder = submission(service, service.climber, "sub-named")
    result = service.hills(service.climber, "eval", folder, "-H", DEMO)
    assert result.code == 0, result.err
    assert f"submission   {folder}" in result.err and str(service.state) not in result.err


@pytest.mark.slow
def test_tune_trials_through_the_service_are_the_climbers(service):
    folder = submission(service, service.climber, "sub-tune")
    (Path(folder) / "params.json").write_text(json.dumps({"scale": {"type": "float", "low": 0.5, "high": 2.0,
                                                                   "default": 1.0}}))
    subprocess.run(["chown", service.climber, str(Path(folder) / "params.json")], check=True)
    before = len(service.log_lines(DEMO))
    tuned = service.hills(service.climber, "tune", folder, "-H", DEMO, "--budget", "2", "--json")
    assert tuned.code == 0, tuned.err
    reports = [line["report"] for line in service.log_lines(DEMO)[before:] if "report" in line]
    assert len(reports) == 2
    assert all(report["trust"] == "service" and report["user"] == service.climber for report in reports)
    # The best knobs are written beside the climber's folder, by its client, and named so.
    best = Path(folder + ".best-params.json")
    assert json.loads(best.read_text()) == tuned.report["best"]["knobs"]
    assert tuned.report["best_params_file"] == str(best)


@pytest.mark.slow
def test_the_climber_cannot_touch_the_services_notes_and_its_own_count_for_nothing(service):
    vc = service.state / "project" / ".hills" / DEMO / ".vc"
    deleted = service.shell(service.climber, f"git --git-dir='{vc}' update-ref -d refs/notes/hills/reports")
    assert deleted.code != 0
    log = service.hills(service.climber, "log", DEMO)
    assert log.code == 0, log.err
    # Control: in same-user mode the climber deletes its own hill's notes and its eval count goes.
    project = str(Path(home_of(service.climber)) / "project")
    if not (Path(project) / ".hills" / "own").exists():
        assert make_hill(service, service.climber, "own", extra_env=same_user()).code == 0
    folder = submission(service, service.climber, "sub-notes")
    assert service.hills(service.climber, "eval", folder, "-H", "own", cwd=project, **same_user()).code == 0
    own_vc = Path(project) / ".hills" / "own" / ".vc"
    assert service.shell(service.climber, f"git --git-dir='{own_vc}' update-ref -d refs/notes/hills/reports").code == 0


@pytest.mark.slow
def test_submitted_code_in_the_service_reaches_neither_the_key_nor_the_vault(service):
    folder = Path(submission(service, service.climber, "sub-probe"))
    targets = [str(service.state / "home" / "key"), str(service.state / "home" / "vault"),
               str(service.state / "project" / ".hills" / DEMO / "private" / "secret.txt"),
               str(service.state / "requests")]
    (folder / "solution.py").write_text(
        "import os\n"
        f"reached = [path for path in {targets!r} if os.path.exists(path)]\n"
        "open('answer.txt', 'w').write(str(len(reached)))\n")
    subprocess.run(["chown", "-R", service.climber, str(folder)], check=True)
    result = service.hills(service.climber, "eval", str(folder), "-H", DEMO, "--json")
    assert result.code == 0, result.err
    assert result.report["metrics"][0]["value"] == 0
    assert result.report["isolation"]["runs"] == 1


@pytest.mark.slow
def test_a_stopped_service_removes_its_socket_and_the_cli_says_it_cannot_reach_it(service):
    service.stop()
    try:
        assert not service.socket.exists()
        # The configured socket is gone: the CLI works in same-user mode again.
        listed = service.hills(service.climber, "list")
        assert listed.code == 0
        named = service.hills(service.climber, "list", HILLS_SERVICE=str(service.socket))
        assert named.code == 4 and "cannot reach the hills service" in named.err
    finally:
        service.start()


@pytest.mark.slow
def test_a_new_version_replaces_the_served_one_and_the_old_ones_history_stays(service):
    hill = Path(home_of(service.admin)) / "project" / ".hills" / CRASH
    old_tree = service.hills(service.climber, "describe", CRASH, "--json")
    assert old_tree.code == 0, old_tree.err
    with open(hill / "README.md", "a", encoding="utf-8") as handle:
        handle.write("\nA second version of the task text.\n")
    committed = service.hills(service.admin, "commit", CRASH, "-m", "second",
                              cwd=str(Path(home_of(service.admin)) / "project"))
    assert committed.code == 0, committed.err
    new_tree = committed.out.split()[-1]
    described = service.hills(service.climber, "describe", CRASH)
    assert described.code == 0 and "A second version of the task text." in described.out + described.err
    folder = submission(service, service.climber, "sub-second")
    report = service.hills(service.climber, "eval", folder, "-H", CRASH, "--final", "--json")
    assert report.code == 0, report.err  # a new version: a fresh holdout budget
    assert report.report["tree_hash"] == new_tree and report.report["details"]["secret_words"] == 8
    log = service.hills(service.climber, "log", CRASH)
    assert log.code == 0 and "second" in log.out and "first" in log.out, log.out + log.err


@pytest.mark.slow
def test_the_climbers_reading_verbs_answer_through_the_service(service):
    folder = submission(service, service.climber, "sub-read")
    report = service.hills(service.climber, "eval", folder, "-H", DEMO, "--json")
    path = Path(home_of(service.climber)) / "read.json"
    path.write_text(report.out)
    subprocess.run(["chown", service.climber, str(path)], check=True)
    for args in (("describe", DEMO), ("show", str(path)), ("rank", "-H", DEMO), ("rank", str(path)),
                 ("list",), ("attempts", DEMO, "--json")):
        answered = service.hills(service.climber, *args)
        assert answered.code == 0, (args, answered.err)
    shown = service.hills(service.climber, "show", "-", input=report.out)
    assert shown.code == 0, shown.err


@pytest.mark.slow
def test_setup_run_again_changes_the_roles_of_the_running_service(service):
    assert service.hills(service.outsider, "list").code == 1
    again = subprocess.run(["env", f"HILLS_SERVICE_CONFIG={service.client_config}",
                            f"HILLS_SYSTEMD_RUNNING={service.base / 'no-systemd'}", *service.python, "-m", "hills",
                            "setup", "service", "--user", service.user, "--state", str(service.state), "--socket",
                            str(service.socket), "--admin", service.admin, "--climber", service.climber,
                            "--climber", service.outsider],
                           capture_output=True, text=True, env={**os.environ, **service.python_env})
    assert again.returncode == 0, again.stderr
    assert "(existing)" in again.stderr
    assert service.hills(service.outsider, "list").code == 0


API_CLIMBER = '''\
import json, sys
from hills import api
folder, hill, probe = sys.argv[1:4]
report = api.evaluate(folder, hill, note="through the api")
found = api.verify(report)
seen = {"trust": report.trust, "user": report.data["user"], "score": report.score, "valid": found.valid,
        "signer_trust": found.trust, "described": api.describe(hill)["hill"],
        "attempts": len(api.attempts(hill)), "probe": api.evaluate(probe, hill).score}
try:
    api.evaluate(folder, hill, force=True)
except api.HillsError as exc:
    seen["force"] = [exc.exit_code, exc.message, type(exc).__name__]
print(json.dumps(seen))
'''


@pytest.mark.slow
def test_the_api_evaluates_through_the_service_as_the_cli_does(service):
    folder = submission(service, service.climber, "sub-api", answer="9")
    probe = Path(submission(service, service.climber, "sub-api-probe"))
    targets = [str(service.state / "home" / "key"), str(service.state / "project" / ".hills" / DEMO / "private")]
    (probe / "solution.py").write_text(
        "import os\n"
        f"reached = [path for path in {targets!r} if os.path.exists(path)]\n"
        "open('answer.txt', 'w').write(str(len(reached)))\n")
    subprocess.run(["chown", "-R", service.climber, str(probe)], check=True)
    done = subprocess.run(service.argv(service.climber, [*service.python, "-c", API_CLIMBER, folder, DEMO,
                                                         str(probe)]),
                          cwd=home_of(service.climber), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["trust"] == "service" and seen["user"] == service.climber and seen["score"] == 9
    assert seen["valid"] and seen["signer_trust"] == "service"
    assert seen["described"] == DEMO and seen["attempts"] >= 1
    # Submitted code started through the API reaches neither the key nor the private data.
    assert seen["probe"] == 0
    # An option a climber may not use through the service is refused by the service's own rule.
    assert seen["force"][0] == 1 and seen["force"][2] == "Refused" and "--force" in seen["force"][1], seen["force"]
