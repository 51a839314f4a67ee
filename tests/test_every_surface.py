"""The attacks of the fail-closed round on the two surfaces the cold and warm
tests do not reach (docs/threats.md): the evaluation service, where the
climber's own environment must never reach the process that scores and
signs, and a Ray node, whose worker runs the eval in its own process under
Ray's environment rather than a command hills started clean.

The service tests need root (they make users) and skip without it; the Ray
tests need the hills[ray] extra and bubblewrap, and start a Ray head of their
own on loopback. Each attack asserts that it ran, and where it makes sense
has its control: the same attack with the boundary switched off (or where
the climber's variables do reach, same-user mode), succeeding."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testing.util import run_bin, run_cli
from testing.eval_fixtures import attempts_log, log_entries, make_hill, on_machine, submission, tree_of
from hills.run import sandbox
from testing.service_fixtures import Service, home_of, needs_root, running_service
from testing.service_fixtures import make_hill as make_served_hill
from testing.service_fixtures import submission as served_submission
from test_fail_closed import ACC_EVAL, EVIL_SITE, FAKE_BWRAP, HONEST, LABELS, THIEF
from test_scoring_guard import ANSWER, NAIVE, STARTS, naive_hill
from test_scoring_guard import THIEF as RUN_PY_THIEF

DEMO = "vaulted"
# The leak probe's refusal of an evaluator that runs the example's run.py.
GATE_REFUSAL = ("failed check 'leak probe': the evaluator ran the example's code itself: the scoring phase tried "
                "to run the submission's file 'run.py'")
# A sitecustomize for the climber's own client: every metric it serialises
# becomes 999, and each process it loads into is noted.
CLIENT_SITE = """\
import json, os
with open({marker!r}, "a") as handle:
    handle.write(str(os.getpid()) + "\\n")
_dumps = json.dumps
def dumps(obj, *args, **kwargs):
    if isinstance(obj, dict) and isinstance(obj.get("metrics"), list):
        for metric in obj["metrics"]:
            if isinstance(metric, dict) and "value" in metric:
                metric["value"] = 999
    return _dumps(obj, *args, **kwargs)
json.dumps = dumps
"""


# ================================================================ the service

@pytest.fixture(scope="module")
def service():
    """A real service with an admin and a climber, and one hill `vaulted`
    committed through it (tests/service_fixtures.py)."""
    with running_service("hills-surfaces-") as svc:
        committed = make_served_hill(svc, svc.admin, DEMO)
        assert committed.code == 0, committed.err
        yield svc


def same_user(**extra: str) -> dict[str, str]:
    return {"HILLS_SERVICE": "off", **extra}


def climber_steering(service: Service) -> tuple[dict[str, str], Path]:
    """The climber's steering variables (its own sitecustomize on PYTHONPATH,
    a bubblewrap that does not exist, another user to be served for), and
    the marker its sitecustomize writes."""
    home = Path(home_of(service.climber))
    evil, marker = home / "evil", home / "site-loaded.txt"
    evil.mkdir(exist_ok=True)
    (evil / "sitecustomize.py").write_text(CLIENT_SITE.format(marker=str(marker)))
    subprocess.run(["chown", "-R", service.climber, str(evil)], check=True)
    marker.unlink(missing_ok=True)
    # The interpreter other users start may need the checkout on PYTHONPATH: keep it behind the climber's.
    path = os.pathsep.join(filter(None, [str(evil), service.python_env.get("PYTHONPATH")]))
    return {"HILLS_BWRAP": "/nonexistent", "PYTHONPATH": path, "HILLS_SERVED_FOR": service.admin}, marker


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("variant", ["HILLS_BWRAP", "PYTHONPATH", "HILLS_SERVED_FOR", "all three"])
def test_the_climbers_own_environment_never_reaches_the_service(service, variant):
    steering, marker = climber_steering(service)
    chosen = steering if variant == "all three" else {variant: steering[variant]}
    tag = variant.lower().replace(" ", "-").replace("_", "-")
    folder = served_submission(service, service.climber, f"sub-env-{tag}", answer="7")
    result = service.hills(service.climber, "eval", folder, "-H", DEMO, "--json", **chosen)
    assert result.code == 0, result.err
    if "PYTHONPATH" in chosen:
        # The precondition: the climber's sitecustomize ran, in its own client.
        assert marker.exists() and marker.read_text().split(), "the climber's sitecustomize never loaded"
    report = result.report
    assert report["metrics"][0]["value"] == 7.0, report["metrics"]
    assert report["official"] is True and report["status"] == "passing"
    assert report["isolation"]["evaluator"] == "bwrap", report["isolation"]
    assert {"name": "isolation", "value": "bwrap", "primary": True} in report["config"]
    assert not report["isolation"].get("overrides"), report["isolation"]
    assert report["trust"] == "service" and report["user"] == service.climber
    path = Path(home_of(service.climber)) / f"report-{tag}.json"
    path.write_text(result.out)
    subprocess.run(["chown", service.climber, str(path)], check=True)
    checked = service.hills(service.climber, "verify", str(path))
    assert checked.code == 0, checked.out + checked.err
    assert "signature valid" in checked.out and "  trust: service (" in checked.out, checked.out


@pytest.mark.slow
@needs_root
def test_control_the_same_variables_steer_a_same_user_eval(service):
    """The variables are live where they do reach: the climber's same-user
    eval of its own hill is refused for the bubblewrap it names, and a
    same-user process that takes HILLS_SERVED_FOR is refused as no service."""
    project = Path(home_of(service.climber)) / "project"
    made = make_served_hill(service, service.climber, "own", extra_env=same_user())
    assert made.code == 0, made.err
    steering, _ = climber_steering(service)
    folder = served_submission(service, service.climber, "sub-env-control")
    refused = service.hills(service.climber, "eval", folder, "-H", "own", cwd=str(project),
                            **same_user(HILLS_BWRAP=steering["HILLS_BWRAP"]))
    assert refused.code == 4, refused.out + refused.err
    assert "bubblewrap '/nonexistent' (HILLS_BWRAP) does not exist" in refused.err, refused.err
    claimed = service.hills(service.climber, "eval", folder, "-H", "own", cwd=str(project),
                            **same_user(HILLS_SERVED_FOR=steering["HILLS_SERVED_FOR"]))
    assert claimed.code == 4 and "this process is not the hills service" in claimed.err, claimed.err


def write_naive_hill(service: Service, user: str, name: str) -> Path:
    """The naive one-phase evaluator of tests/test_scoring_guard.py (it runs
    the submission's run.py itself), as a hill in `user`'s project, not
    committed."""
    from testing.eval_fixtures import TRIVIAL_TEST, hill_yaml

    project = Path(home_of(user)) / "project"
    made = service.shell(user, f"mkdir -p {project} && cd {project} && "
                               f"{shlex.join(service.python)} -m hills new {name} -t circle-packing",
                         HILLS_SERVICE="off")
    assert made.code == 0, made.err
    hill = project / ".hills" / name
    (hill / "eval.py").write_text(textwrap.dedent(NAIVE).replace("STARTS", STARTS["subprocess of sys.executable"]))
    (hill / "hill.yaml").write_text(hill_yaml(name, timeout=20))
    for test in (hill / "tests").glob("test_*.py"):
        test.unlink()
    (hill / "tests" / "test_eval.py").write_text(TRIVIAL_TEST)
    (hill / "private").mkdir(exist_ok=True)
    (hill / "private" / "labels.json").write_text(ANSWER)
    subprocess.run(["chown", "-R", f"{user}:{user}", str(hill)], check=True)
    return hill


@pytest.mark.slow
@needs_root
def test_the_naive_evaluator_is_refused_at_the_gate_and_never_served(service):
    name = "naive"
    project = str(Path(home_of(service.admin)) / "project")
    write_naive_hill(service, service.admin, name)
    # Same-user, the gate fails it; through the service, the same failure.
    own = service.hills(service.admin, "commit", name, "-m", "first", cwd=project, **same_user())
    assert own.code == 1, own.out + own.err
    assert GATE_REFUSAL in own.err, own.err
    served = service.hills(service.admin, "commit", name, "-m", "first", cwd=project)
    assert served.code == 1, served.out + served.err
    assert GATE_REFUSAL in served.err, served.err
    # Committed past the gate in the admin's own state (as a hill committed
    # before the gate held it): the next commit through the service has
    # nothing new to commit, and still goes through the gate first.
    forced = service.shell(service.admin, f"cd {project} && {shlex.join(service.python)} -c "
                                          "'from hills.freeze import commit; from hills.disk.hill import resolve; "
                                          f"commit.commit(resolve(\"{name}\"), \"past the gate\", gate=False)'",
                           HILLS_SERVICE="off")
    assert forced.code == 0, forced.err
    again = service.hills(service.admin, "commit", name, "-m", "again", cwd=project)
    assert again.code == 1, again.out + again.err
    assert GATE_REFUSAL in again.err and "nothing to commit" not in again.err, again.err
    # Nothing of it reached the service: no copy, no log, no eval.
    assert not (service.state / "project" / ".hills" / name).exists()
    assert service.log_lines(name) == []
    folder = served_submission(service, service.climber, "sub-naive")
    (Path(folder) / "run.py").write_text(RUN_PY_THIEF)
    subprocess.run(["chown", service.climber, str(Path(folder) / "run.py")], check=True)
    climbed = service.hills(service.climber, "eval", folder, "-H", name, "--json")
    assert climbed.code != 0 and climbed.out == "", climbed.out
    assert f"'{name}'" in climbed.err, climbed.err


# ================================================================ Ray

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="the hills[ray] extra is not installed")

# Run as a Ray driver: stop every hills node worker of the cluster, then,
# when asked, start them again (one per CPU, as a head would) in a job whose
# runtime_env sets `env`, each with the module switches `switches` set in
# its process; prints their pids.
WORKERS = '''
import importlib, json, logging, sys, time
import ray
from hills import cluster

spec = json.loads(sys.argv[1])
ray.init(address=spec["address"], namespace=cluster.NAMESPACE, log_to_driver=False, logging_level=logging.WARNING,
         runtime_env={"env_vars": spec["env"]} if spec["env"] else None)
for name in ray.util.list_named_actors():
    if name.startswith("hills-cpu-"):
        try:
            ray.kill(ray.get_actor(name), no_restart=True)
        except ValueError:
            pass


class Switched(cluster.NodeWorker):
    def __init__(self):
        for module, name, value in spec["switches"]:
            setattr(importlib.import_module(module), name, value)
        super().__init__()


pids = []
for index in range(spec["slots"]):
    deadline = time.monotonic() + 60
    while True:
        try:
            worker = ray.remote(Switched).options(name=f"hills-cpu-{index}", num_cpus=1, max_restarts=0,
                                                  max_task_retries=0, lifetime="detached").remote()
            pids.append(ray.get(worker.claim.remote(600.0)))
            break
        except ValueError:  # the killed one's name is not free yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
deadline = time.monotonic() + 30
while not spec["slots"] and time.monotonic() < deadline:
    if not [name for name in ray.util.list_named_actors() if name.startswith("hills-cpu-")]:
        break
    time.sleep(0.2)
print(json.dumps(pids))
'''


@pytest.fixture(scope="module")
def ray_cluster(module_machine, tmp_path_factory):
    """A Ray head on loopback (2 CPUs, machine state of its own, its key
    trusted as node-1), and the head machine's hills: `acc` (confined),
    `acc-open` (`sandbox: none`) and `naive`, committed past the gate."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("the hills[ray] extra is not installed")
    if not sandbox.bwrap_works():
        pytest.skip("bubblewrap is not usable here: a 'sandbox: auto' hill cannot be committed")
    from testing.ray_head import Head

    private = {"labels.json": json.dumps(LABELS)}
    with on_machine(module_machine):
        hills = {"acc": make_hill("acc", ACC_EVAL, timeout=60, private=private),
                 "acc-open": make_hill("acc-open", ACC_EVAL, timeout=60, private=private, extra="sandbox: none\n"),
                 "naive": naive_hill("naive", STARTS["subprocess of sys.executable"])}
        head = Head(tmp_path_factory.mktemp("node") / "hills-home", dict(os.environ))
        try:
            key = run_bin("hills", "key", env=head.env)
            assert key.code == 0, key.output
            assert run_cli("trust", "add", "node-1", key.out.strip()).code == 0
            yield head, hills
        finally:
            head.stop()


def node_workers(head, env=None, switches=(), slots=2):
    """Stop the cluster's hills node workers; start `slots` of them again
    with `env` in their environment and `switches` set; their pids."""
    from testing.ray_head import LOOPBACK

    spec = {"address": f"127.0.0.1:{head.port}", "env": env or {}, "switches": [list(s) for s in switches],
            "slots": slots}
    done = subprocess.run([sys.executable, "-c", WORKERS, json.dumps(spec)], env=dict(os.environ, **LOOPBACK),
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def eval_on(head, folder, name):
    from testing.ray_head import LOOPBACK

    return run_bin("hills", "eval", folder, "-H", name, "--on", head.address, "--json",
                   env=dict(os.environ, **LOOPBACK), timeout=300)


def head_log(hill_dir, name):
    log = attempts_log(name, tree_of(hill_dir))
    return log_entries(log) if log.exists() else []


def accuracy(report):
    return next(metric["value"] for metric in report["metrics"] if metric["name"] == "accuracy")


def verified_at_the_head(report):
    from hills.evidence import signing, trust

    return signing.verify(report, trust.machine_keys(), trust.trusted())


@pytest.mark.slow
@needs_ray
def test_the_scoring_guard_holds_on_a_node(ray_cluster, tmp_path):
    head, hills = ray_cluster
    folder = submission(tmp_path / "sub", {"run.py": RUN_PY_THIEF})
    try:
        node_workers(head, slots=0)  # the head starts plain ones
        result = eval_on(head, folder, "naive")
        assert result.code != 0, result.output
        [report] = [json.loads(line) for line in result.out.splitlines() if line.strip()]
        assert verified_at_the_head(report).signer == "node-1", report
        assert report["status"] == "buggy", report
        assert "the scoring phase tried to run the submission's file 'run.py'" in report["reason"], report["reason"]
        assert not report.get("metrics") or report["metrics"][0]["value"] != 1.0
        # The control: node workers with the guard off give the thief 1.0, signed by the node.
        node_workers(head, switches=[("hills.run.phases", "SCORING_GUARD", False)])
        control = eval_on(head, folder, "naive")
        assert control.code == 0, control.output
        assert control.report["metrics"][0]["value"] == 1.0 and verified_at_the_head(control.report).ok
    finally:
        node_workers(head, slots=0)


@pytest.mark.slow
@needs_ray
def test_a_node_without_a_usable_or_trusted_bubblewrap_refuses_to_score(ray_cluster, tmp_path):
    head, hills = ray_cluster
    thief = submission(tmp_path / "thief", {"solution.py": THIEF})
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # a folder anyone may write: the fake in it could be anyone's
    fake = shared / "bwrap"
    fake.write_text(FAKE_BWRAP)
    fake.chmod(0o755)
    assert sandbox.probe(str(fake))  # the precondition: a probe alone takes it for bubblewrap
    cases = [("/nonexistent", "bubblewrap '/nonexistent' (HILLS_BWRAP) does not exist: hills never runs submitted "
                              "code unconfined"),
             (str(fake), f"bubblewrap '{fake}' (HILLS_BWRAP) is not trusted: its folder '{shared}' is writable")]
    try:
        for bwrap, words in cases:
            pids = node_workers(head, env={"HILLS_BWRAP": bwrap})
            before = head_log(hills["acc"], "acc")
            result = eval_on(head, thief, "acc")
            assert result.code == 4, result.output
            [line] = [json.loads(line) for line in result.out.splitlines() if line.strip()]
            assert line["status"] == "failed" and "signature" not in line, line
            assert words in result.err, result.err
            new = head_log(hills["acc"], "acc")[len(before):]
            failed = [entry["cluster"] for entry in new if "cluster" in entry]
            assert [entry["event"] for entry in failed] == ["failed"] and failed[0]["node"]["pid"] in pids, failed
            assert words in failed[0]["reason"]
            assert not [entry for entry in new if "report" in entry], "a report was logged"
        # The control: the hill whose author declared `sandbox: none` runs
        # the thief unconfined on the same node, and the report says so.
        node_workers(head, env={"HILLS_BWRAP": "/nonexistent"})
        control = eval_on(head, thief, "acc-open")
        assert control.code == 0, control.output
        assert accuracy(control.report) == 1.0 and control.report["isolation"]["evaluator"] == "none"
        assert {"name": "isolation", "value": "none", "primary": True} in control.report["config"]
    finally:
        node_workers(head, slots=0)


@pytest.mark.slow
@needs_ray
def test_a_node_worker_started_with_steering_variables_signs_nothing(ray_cluster, tmp_path):
    head, hills = ray_cluster
    evil, marker = tmp_path / "evil", tmp_path / "loaded.txt"
    evil.mkdir()
    (evil / "sitecustomize.py").write_text(EVIL_SITE.format(marker=str(marker)))
    env = {"PYTHONPATH": str(evil), "LD_LIBRARY_PATH": str(tmp_path / "no-libraries")}
    honest = submission(tmp_path / "honest", {"solution.py": HONEST})
    try:
        pids = node_workers(head, env=env)
        # The precondition: the sitecustomize runs in the node workers.
        assert set(pids) <= {int(pid) for pid in marker.read_text().split()}, (pids, marker.read_text())
        before = head_log(hills["acc"], "acc")
        result = eval_on(head, honest, "acc")
        assert result.code == 4, result.output
        assert "the node's Ray worker started with LD_LIBRARY_PATH, PYTHONPATH in its environment" in result.err
        assert "signs none" in result.err and "start the node's Ray without them" in result.err, result.err
        new = head_log(hills["acc"], "acc")[len(before):]
        assert [entry["cluster"]["event"] for entry in new if "cluster" in entry] == ["failed"], new
        assert not [entry for entry in new if "report" in entry], "a report was logged"
        # The control: the same node workers with the check off sign the
        # forgery (0.999 for an honest 0.5), and the head takes it as valid.
        node_workers(head, env=env, switches=[("hills.cluster", "STARTED_CLEAN", False)])
        control = eval_on(head, honest, "acc")
        assert control.code == 0, control.output
        assert accuracy(control.report) == 0.999 and control.report["official"] is True
        assert verified_at_the_head(control.report).signer == "node-1"
        # With clean node workers, the same eval is the honest 0.5.
        node_workers(head, slots=0)
        clean = eval_on(head, honest, "acc")
        assert clean.code == 0, clean.output
        assert accuracy(clean.report) == 0.5 and verified_at_the_head(clean.report).ok
    finally:
        node_workers(head, slots=0)


@pytest.mark.slow
@needs_ray
def test_a_confined_evaluator_reads_its_private_data_on_a_node_and_submitted_code_does_not(ray_cluster, tmp_path):
    """A node's copy of the hill lies in its machine state, which the
    evaluator's sandbox covers: its private/ is bound back for the
    evaluator (it scores the honest guesses against the labels), never for
    the submitted code (the thief that globs for the labels finds none)."""
    head, hills = ray_cluster
    node_workers(head, slots=0)
    honest = eval_on(head, submission(tmp_path / "honest", {"solution.py": HONEST}), "acc")
    assert honest.code == 0, honest.output
    assert accuracy(honest.report) == 0.5 and honest.report["isolation"]["evaluator"] == "bwrap"
    thief = eval_on(head, submission(tmp_path / "thief", {"solution.py": THIEF}), "acc")
    assert thief.code == 0, thief.output
    assert accuracy(thief.report) == 0.0 and verified_at_the_head(thief.report).signer == "node-1"
    node_copy = head.node_home / "cluster" / "hills" / tree_of(hills["acc"]) / ".hills" / "acc"
    assert json.loads((node_copy / "private" / "labels.json").read_text()) == LABELS  # the labels were there


# Run as the head: `hills eval ...` with the switches of hills.cluster
# named in argv[1] set first (the control); from a `python -c`, whose
# sys.path starts with the current folder, as a script's starts with its own.
SWITCHED_HEAD = ("import json, sys; from hills import cluster, entry\n"
                 "for name, value in json.loads(sys.argv[1]).items(): setattr(cluster, name, value)\n"
                 "sys.argv = ['hills'] + sys.argv[2:]; entry.main()\n")


@pytest.mark.slow
@needs_ray
def test_the_folder_the_head_runs_in_is_not_on_a_node_workers_path(ray_cluster, tmp_path):
    """Ray puts its driver's current folder at the front of its workers'
    sys.path: a `hills/` package there would be the node's hills. Here it
    is a transparent one that notes each process it is imported into."""
    from testing.ray_head import LOOPBACK

    head, hills = ray_cluster
    real = Path(sandbox.__file__).resolve().parent.parent
    here, marker = tmp_path / "project", tmp_path / "imported.txt"
    (here / "hills").mkdir(parents=True)
    (here / "hills" / "__init__.py").write_text(
        f"import os\nwith open({str(marker)!r}, 'a') as handle:\n    handle.write(str(os.getpid()) + '\\n')\n"
        f"__path__[:] = [{str(real)!r}]\nexec(open({str(real / '__init__.py')!r}).read())\n")
    honest = submission(tmp_path / "honest", {"solution.py": HONEST})
    env = dict(os.environ, **LOOPBACK)

    def head_eval(switches):
        node_workers(head, slots=0)  # the head starts the node workers, in its own job
        before = head_log(hills["acc"], "acc")
        done = subprocess.run([sys.executable, "-c", SWITCHED_HEAD, json.dumps(switches), "eval", str(honest),
                               "-H", "acc", "--on", head.address, "--json"], cwd=here, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        assert accuracy(json.loads(done.stdout)) == 0.5
        [logged] = [entry for entry in head_log(hills["acc"], "acc")[len(before):] if "report" in entry]
        return logged["node"]["pid"]

    try:
        worker = head_eval({})
        imported = marker.read_text().split() if marker.exists() else []
        # The precondition: the head itself, started from that folder, imported it.
        assert imported, "the head did not import the package in its folder"
        assert str(worker) not in imported, "the node worker imported the package in the head's folder"
        # The control: joining from its own folder, the head gives it to the node worker.
        marker.unlink()
        worker = head_eval({"NO_DRIVER_PATHS": False})
        assert str(worker) in marker.read_text().split(), (worker, marker.read_text())
    finally:
        node_workers(head, slots=0)
