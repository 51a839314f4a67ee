"""The service's warm path (docs/service-warm.md): a keeper per hill holds a
standby for its next plain eval, serves one eval and ends; what one
climber's submission leaves never reaches another's eval; a commit drops
the standbys; a standby whose environment's seal broke is not used; and
no same-user warm server runs under the service user. Needs root."""

from __future__ import annotations

import json
import os
import pwd
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.testing import service_fixtures
from tests.testing.service_fixtures import (Service, home_of, make_hill, make_user, needs_root, remove_user,
                                            running_service, submission)

pytestmark = [needs_root, pytest.mark.slow]

PLAIN, LEAKY, SEALED = "warmed", "leaky", "sealed"

# An evaluator that runs the submission's sleep_hook.py, when there is one
# (the hill's example has none), confined as submitted code always runs
# (hills.sdk.run_submission), and reports what it printed. Named so that
# the scoring phase sees it: the fixture's hills pass it the solution
# phase's outputs only, answer.txt and sleep*.
LEAKY_EVALUATOR = service_fixtures.EVALUATOR.replace('''    value = float((submission / "answer.txt").read_text())
''', '''    value = float((submission / "answer.txt").read_text())
    seen = None
    if (submission / "sleep_hook.py").exists():
        import json
        import sys

        from hills import sdk

        done = sdk.run_submission([sys.executable, "sleep_hook.py"], capture_output=True, text=True)
        lines = done.stdout.strip().splitlines()
        seen = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {"stderr": done.stderr[-2000:]}
''').replace('"details": {"secret_words": len(secret.split())}',
             '"details": {"secret_words": len(secret.split()), "seen": seen}')

# What a climber's submission leaves, and what it finds left: an
# environment variable, a file in /tmp and in its folder, a module's
# attribute and a builtin, where it runs; it prints what it found before
# and after it planted its own.
HOOK = '''\
import builtins, json, os

TAG = {tag!r}


def look():
    return {{"env": os.environ.get("HILLS_LEAK"), "module": getattr(json, "LEAK", None),
             "builtin": getattr(builtins, "HILLS_LEAK", None),
             "tmp": sorted(name for name in os.listdir("/tmp") if name.startswith("leak-")),
             "cwd": sorted(name for name in os.listdir(".") if name.startswith("leak-"))}}


before = look()
os.environ["HILLS_LEAK"] = TAG
json.LEAK = TAG
builtins.HILLS_LEAK = TAG
for folder in ("/tmp", "."):
    try:
        with open(os.path.join(folder, "leak-" + TAG), "w") as handle:
            handle.write(TAG)
    except OSError:
        pass
print(json.dumps({{"before": before, "after": look()}}))
'''
CLEAN = {"env": None, "module": None, "builtin": None, "tmp": [], "cwd": []}


def serve_log(svc: Service) -> str:
    return (svc.base / "serve.log").read_text(errors="replace")


def waiting(svc: Service, hill: str, count: int, timeout: float = 90.0) -> str:
    """The run folder of the `count`-th standby of `hill` the service made,
    once it waits (said in the service's log)."""
    pattern = re.compile(rf"keeper (\d+): standby of hill '{hill}' waits in (\S+)")
    deadline = time.monotonic() + timeout
    while True:
        found = pattern.findall(serve_log(svc))
        if len(found) >= count:
            return found[count - 1][1]
        assert time.monotonic() < deadline, f"no standby #{count} of '{hill}' in time:\n{serve_log(svc)[-3000:]}"
        time.sleep(0.1)


def took(svc: Service, hill: str) -> list[tuple[str, str, str]]:
    """(keeper pid, user, run folder) of each eval of `hill` that took a standby."""
    return re.findall(rf"keeper (\d+): eval of hill '{hill}' for user '(\S+)' took the standby in (\S+)",
                      serve_log(svc))


def evaluate(svc: Service, user: str, folder: str, hill: str) -> dict:
    result = svc.hills(user, "eval", folder, "-H", hill, "--json")
    assert result.code == 0, (result.err, result.out and {key: result.report.get(key) for key in ("status", "reason")})
    return result.report


def second_climber(svc: Service) -> str:
    """A second climber of the service, added to its config as root would."""
    name = svc.outsider.replace("hso", "hsd")
    make_user(name)
    config = svc.state / "service.json"
    values = json.loads(config.read_text())
    values["climbers"].append(name)
    config.write_text(json.dumps(values))
    return name


@pytest.fixture(scope="module")
def service():
    with running_service("hills-service-warm-") as svc:
        committed = make_hill(svc, svc.admin, PLAIN)
        assert committed.code == 0, committed.err
        other = second_climber(svc)
        try:
            yield svc, other
        finally:
            svc.stop()
            remove_user(other)


def test_an_eval_takes_the_standby_the_service_made_after_the_last(service):
    svc, _ = service
    folder = submission(svc, svc.climber, "sub-warm")
    first = evaluate(svc, svc.climber, folder, PLAIN)
    assert not took(svc, PLAIN), "no standby before the hill's first eval"
    run_dir = waiting(svc, PLAIN, 1)
    # The keeper holds the next eval's seeds: a process of the service user
    # whose /proc files are closed to that user's other processes (root's).
    keeper = re.findall(rf"keeper (\d+): standby of hill '{PLAIN}' waits", serve_log(svc))[0]
    status = Path(f"/proc/{keeper}/status").read_text()
    assert re.search(rf"^Uid:\s+{pwd.getpwnam(svc.user).pw_uid}\s", status, re.M), status
    assert os.stat(f"/proc/{keeper}/environ").st_uid == 0
    second = evaluate(svc, svc.climber, folder, PLAIN)
    taken = took(svc, PLAIN)
    assert [(user, where) for _, user, where in taken] == [(svc.climber, run_dir)]
    # The report is the one a cold eval gives, made in the standby's run folder.
    for report in (first, second):
        assert report["status"] == "passing" and report["trust"] == "service" and report["user"] == svc.climber
    assert second["metrics"] == first["metrics"] and second["tree_hash"] == first["tree_hash"]
    assert second["run_id"] == os.path.basename(run_dir) != first["run_id"]


def test_what_one_climbers_submission_leaves_never_reaches_the_next_eval(service, monkeypatch):
    svc, other = service
    monkeypatch.setattr(service_fixtures, "EVALUATOR", LEAKY_EVALUATOR)
    committed = make_hill(svc, svc.admin, LEAKY)
    assert committed.code == 0, committed.err
    plain = submission(svc, svc.climber, "sub-leak-plain")
    evaluate(svc, svc.climber, plain, LEAKY)  # cold: the hill's first eval; a standby follows
    planted, probing = _hooked(svc, svc.climber, "a"), _hooked(svc, other, "b")
    waiting(svc, LEAKY, 1)
    first = evaluate(svc, svc.climber, planted, LEAKY)
    waiting(svc, LEAKY, 2)
    second = evaluate(svc, other, probing, LEAKY)
    taken = took(svc, LEAKY)
    # Both evals took a standby, each its own, of a keeper of its own.
    assert [user for _, user, _ in taken] == [svc.climber, other]
    assert taken[0][0] != taken[1][0] and taken[0][2] != taken[1][2]
    # The first planted all of it where it ran, and its own look finds it there ...
    assert first["details"]["seen"]["after"] == {"env": "a", "module": "a", "builtin": "a", "tmp": ["leak-a"],
                                                 "cwd": first["details"]["seen"]["after"]["cwd"]}, first["details"]
    # ... and the second finds nothing of it.
    assert second["details"]["seen"]["before"] == CLEAN
    assert second["user"] == other and second["status"] == "passing"


def _hooked(svc: Service, user: str, tag: str) -> str:
    folder = submission(svc, user, f"sub-leak-{tag}")
    # Named so that the scoring phase sees it: the fixture's hills pass it
    # the solution phase's outputs only, answer.txt and sleep*.
    (Path(folder) / "sleep_hook.py").write_text(HOOK.format(tag=tag))
    subprocess.run(["chown", f"{user}:{user}", str(Path(folder) / "sleep_hook.py")], check=True)
    return folder


def test_a_keeper_serves_one_eval_and_with_the_boundary_off_the_same_one_serves_the_next():
    """The control of the boundary above: a keeper that serves eval after
    eval (ONE_EVAL off, in-process, for this test) is one process for both
    evals, as the test above would see."""
    with running_service("hills-service-warm-off-") as svc:
        assert make_hill(svc, svc.admin, PLAIN).code == 0
        svc.stop()
        code = ("import sys; import hills.service.standby as standby; standby.ONE_EVAL = False; "
                f"from hills import entry; sys.exit(entry.run('hills', ['serve', '--state', {str(svc.state)!r}]))")
        svc.start(["-c", code])
        folder = submission(svc, svc.climber, "sub-off")
        evaluate(svc, svc.climber, folder, PLAIN)
        for count in (1, 2):
            waiting(svc, PLAIN, count)
            evaluate(svc, svc.climber, folder, PLAIN)
        taken = took(svc, PLAIN)
        assert len(taken) == 2 and taken[0][0] == taken[1][0]


def test_a_commit_drops_the_standby_and_the_next_eval_scores_the_new_version(service):
    svc, _ = service
    folder = submission(svc, svc.climber, "sub-commit")
    made = serve_log(svc).count(f"standby of hill '{PLAIN}' waits")
    evaluate(svc, svc.climber, folder, PLAIN)  # a standby follows it, for the version it scored
    old_run = waiting(svc, PLAIN, made + 1)
    hill = Path(home_of(svc.admin)) / "project" / ".hills" / PLAIN
    readme = hill / "README.md"
    readme.write_text(readme.read_text() + "\nSecond version.\n")
    committed = svc.hills(svc.admin, "commit", PLAIN, "-m", "second", cwd=str(hill.parent.parent))
    assert committed.code == 0, committed.err
    assert f"standby of hill '{PLAIN}' dropped: a version was committed or pinned" in serve_log(svc)
    before = len(took(svc, PLAIN))
    after = evaluate(svc, svc.climber, folder, PLAIN)
    assert len(took(svc, PLAIN)) == before  # the old standby was gone: this one ran cold
    new_run = waiting(svc, PLAIN, made + 2)
    again = evaluate(svc, svc.climber, folder, PLAIN)
    assert took(svc, PLAIN)[-1][2] == new_run != old_run
    assert after["tree_hash"] == again["tree_hash"] != _tree_of(svc, old_run)


def _tree_of(svc: Service, run_dir: str) -> str:
    """The tree hash the attempts log holds for the eval made in `run_dir`."""
    for line in svc.log_lines(PLAIN):
        if "report" in line and line["report"].get("run_id") == os.path.basename(run_dir):
            return line["report"]["tree_hash"]
    return "(not logged: the standby was never used)"


def test_a_standby_whose_environment_changed_is_not_used_and_the_eval_is_official(service):
    svc, _ = service
    assert make_hill(svc, svc.admin, SEALED).code == 0
    folder = submission(svc, svc.climber, "sub-sealed")
    evaluate(svc, svc.climber, folder, SEALED)
    run_dir = waiting(svc, SEALED, 1)
    markers = list((svc.state / "home").rglob(".hills-env.json"))
    envs = [marker.parent for marker in markers if f"/{SEALED}/" in str(marker)]
    assert len(envs) == 1, markers
    site = next(envs[0].glob("lib/python*/site-packages"))
    planted = site / "planted.py"
    planted.write_text("print('not the sealed environment')\n")
    owner = pwd.getpwnam(svc.user)
    os.chown(planted, owner.pw_uid, owner.pw_gid)
    report = evaluate(svc, svc.climber, folder, SEALED)
    assert not took(svc, SEALED)
    assert re.search(rf"eval of hill '{SEALED}' for user '{svc.climber}' did not fit the standby in "
                     rf"{re.escape(run_dir)}: it ran cold", serve_log(svc))
    # Run cold, the eval rebuilt the environment from its lock, as ever, and is official.
    assert report["status"] == "passing" and report["trust"] == "service"
    assert report["run_id"] != os.path.basename(run_dir)
    assert not planted.exists()


def _start(svc: Service, code: str) -> None:
    """`hills serve` as the service user with HILLS_WARM on in its
    environment (as a unit's would be), `code` the python that serves."""
    command = ["-c", code + f"from hills import entry; sys.exit(entry.run('hills', ['serve', '--state', "
                            f"{str(svc.state)!r}]))"]
    log = open(svc.base / "serve.log", "ab")
    svc.process = subprocess.Popen(svc.argv(svc.user, [*svc.python, *command], HOME=str(svc.state), HILLS_HOME="",
                                            HILLS_WARM="on"),
                                   cwd="/", stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + 30
    while not svc.socket.exists():
        assert svc.process.poll() is None and time.monotonic() < deadline, serve_log(svc)[-2000:]
        time.sleep(0.05)


def _warm_servers(svc: Service) -> list[str]:
    """The warm servers of the service user, as `python -m hills.warm list` run as it says."""
    listed = svc.shell(svc.user, f"cd / && {' '.join(svc.python)} -m hills.warm list", HOME=str(svc.state),
                       HILLS_HOME=str(svc.state / "home"), HILLS_WARM="on")
    assert listed.code == 0, listed.out + listed.err
    return [line for line in listed.out.splitlines() if line.strip()]


def _tune(svc: Service, name: str) -> None:
    folder = submission(svc, svc.climber, name)
    (Path(folder) / "params.json").write_text(json.dumps({"scale": {"type": "float", "low": 0.5, "high": 2.0,
                                                                   "default": 1.0}}))
    subprocess.run(["chown", svc.climber, str(Path(folder) / "params.json")], check=True)
    tuned = svc.hills(svc.climber, "tune", folder, "-H", PLAIN, "--budget", "2", "--json")
    assert tuned.code == 0, tuned.err
    assert len(tuned.report["trials"]) == 2


def test_a_tune_through_the_service_leaves_no_warm_server_of_the_service_user(service):
    svc, _ = service
    svc.stop()
    _start(svc, "import sys; ")
    assert _warm_servers(svc) == []
    _tune(svc, "sub-tune")
    assert _warm_servers(svc) == []
    # Control: with the service's switch off, the same tune's trials leave one.
    svc.stop()
    _start(svc, "import sys; import hills.service.server as server; server.WARM_OFF = False; ")
    try:
        _tune(svc, "sub-tune-control")
        assert len(_warm_servers(svc)) >= 1
    finally:
        svc.shell(svc.user, f"cd / && {' '.join(svc.python)} -m hills.warm stop --all", HOME=str(svc.state),
                  HILLS_HOME=str(svc.state / "home"))


def test_two_evals_at_once_are_both_scored_and_one_standby_serves_one_of_them(service):
    svc, other = service
    folders = {user: submission(svc, user, "sub-twice") for user in (svc.climber, other)}
    made = serve_log(svc).count(f"standby of hill '{PLAIN}' waits")
    evaluate(svc, svc.climber, folders[svc.climber], PLAIN)
    waiting(svc, PLAIN, made + 1)
    before = len(took(svc, PLAIN))
    running = [subprocess.Popen(svc.argv(user, [*svc.python, "-m", "hills", "eval", folder, "-H", PLAIN, "--json"]),
                                cwd=home_of(user), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for user, folder in folders.items()]
    reports = []
    for process in running:
        out, err = process.communicate(timeout=180)
        assert process.returncode == 0, err
        reports.append(json.loads(out))
    assert sorted(report["user"] for report in reports) == sorted(folders)
    assert all(report["status"] == "passing" and report["trust"] == "service" for report in reports)
    assert reports[0]["run_id"] != reports[1]["run_id"]
    assert len(took(svc, PLAIN)) - before == 1  # the other ran cold, in its own process


def test_an_eval_the_standby_was_not_made_for_leaves_it_to_the_next_plain_one(service):
    svc, _ = service
    folder = submission(svc, svc.climber, "sub-final")
    made = serve_log(svc).count(f"standby of hill '{PLAIN}' waits")
    evaluate(svc, svc.climber, folder, PLAIN)
    run_dir = waiting(svc, PLAIN, made + 1)
    final = svc.hills(svc.climber, "eval", folder, "-H", PLAIN, "--final", "--json")
    assert final.code == 0, final.err
    assert final.report["run_id"] != os.path.basename(run_dir)
    assert run_dir not in serve_log(svc).split("waits in " + run_dir, 1)[1]  # nobody claimed it
    plain = evaluate(svc, svc.climber, folder, PLAIN)
    assert took(svc, PLAIN)[-1][2] == run_dir and plain["run_id"] == os.path.basename(run_dir)
