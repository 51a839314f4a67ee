"""Evals on a Ray cluster (`--on ray://ADDRESS`): a Ray head on loopback
with 2 CPUs, started inside the tests with machine state of its own (the
node's key), stopped after. Every report a node returns is verified at the
head; a worker killed mid-eval is logged and its eval retried."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testing.util import default_signals, run_bin, run_cli
from testing.eval_fixtures import make_hill, notes_lines, on_machine, submission
from testing.ray_head import LOOPBACK, Head

# Slow as a whole: every test needs the module's Ray head.
pytestmark = pytest.mark.slow

ray = pytest.importorskip("ray", reason="the hills[ray] extra is not installed")

NAME = "spread"
# Scores score.txt; sleeps first when the submission holds slow.txt.
SLOW_EVAL = """\
    import time
    from pathlib import Path

    def eval(submission, *, final=False, **params):
        if (Path(submission) / "slow.txt").exists():
            time.sleep(float((Path(submission) / "slow.txt").read_text()))
        value = float((Path(submission) / "score.txt").read_text())
        return {"passed": value >= 0,
                "metrics": [{"name": "total", "value": value, "direction": "max"}],
                "config": [{"name": "mode", "value": "validation", "primary": True}],
                "details": {} if value >= 0 else {"reason": "negative score"}}
    """


@pytest.fixture(scope="module")
def cluster(module_machine, tmp_path_factory):
    """The head machine's hill, committed, and a Ray head whose node has
    machine state of its own; stopped when the module is done."""
    with on_machine(module_machine):
        hill_dir = make_hill(NAME, SLOW_EVAL, timeout=30, private={"answers.csv": "1\n"})
        node_home = tmp_path_factory.mktemp("node") / "hills-home"
        head = Head(node_home, dict(os.environ))
        try:
            yield head, hill_dir
        finally:
            head.stop()


@pytest.fixture
def node_key(cluster):
    head, _ = cluster
    shown = run_bin("hills", "key", env=head.env)
    assert shown.code == 0, shown.output
    return shown.out.strip()


def _eval_on(head, *folders, extra=(), timeout=300):
    return run_bin("hills", "eval", *folders, "-H", NAME, "--on", head.address, *extra,
                   env=dict(os.environ, **LOOPBACK), timeout=timeout)


def _entries(hill_dir):
    from hills.evidence import chain
    from hills.run import logbook
    from testing.util import git

    tree = git(hill_dir, "rev-parse", "HEAD^{tree}").out.strip()
    return chain.read(logbook.attempts_path(NAME, tree)), tree


def _lines(out):
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_a_report_from_an_untrusted_node_is_refused_and_not_logged(cluster, node_key, tmp_path):
    head, hill_dir = cluster
    run_cli("trust", "remove", "node-1")
    folder = submission(tmp_path / "a", {"score.txt": "2\n"})
    before, _ = _entries(hill_dir)
    result = _eval_on(head, folder)
    assert result.code == 1, result.output
    [line] = _lines(result.out)
    assert line["status"] == "rejected" and line["submission"] == str(folder)
    assert "a key this machine does not trust" in result.error_lines[0]
    assert f"hills trust add NAME '{node_key}'" in result.err
    after, _ = _entries(hill_dir)
    new = after[len(before):]
    assert [entry.get("cluster", {}).get("event") for entry in new if "cluster" in entry] == ["rejected"]
    assert not any("report" in entry for entry in new), "a refused report was logged"
    # `hills attempts` tells the refused eval as refused, not abandoned.
    shown = run_cli("attempts", NAME, "--json")
    [row] = [row for row in json.loads(shown.out)["unfinished"] if row["seq"] == new[0]["seq"]]
    assert row["status"] == "rejected" and "does not trust" in row["cluster"]["reason"]
    assert "REJECTED  - on the cluster: " in run_cli("attempts", NAME).out


def test_evals_run_on_the_node_and_every_report_is_verified_at_the_head(cluster, node_key, tmp_path):
    head, hill_dir = cluster
    assert run_cli("trust", "add", "node-1", node_key).code == 0
    folders = [submission(tmp_path / name, {"score.txt": score}) for name, score in
               (("a", "3\n"), ("b", "-1\n"), ("c", "5\n"))]
    before, tree = _entries(hill_dir)
    result = _eval_on(head, *folders, extra=("--json", "--workers", "2", "-m", "three on the cluster"))
    assert result.code == 1, result.output  # the worst of passed, failed, passed
    reports = _lines(result.out)
    assert [r["metrics"][0]["value"] for r in reports] == [3.0, -1.0, 5.0]  # input order
    # The note reaches the node's signed reports and the head's started entries.
    assert [r.get("note") for r in reports] == ["three on the cluster"] * 3
    assert [r["status"] for r in reports] == ["passing", "failing", "passing"]
    from hills.evidence import signing, trust
    from hills.run import snapshot

    for folder, report in zip(folders, reports):
        assert report["tree_hash"] == tree and report["hill"] == NAME
        assert report["submission_hash"] == snapshot.snapshot(folder, tmp_path / "copy" / folder.name)
        verdict = signing.verify(report, trust.machine_keys(), trust.trusted())
        assert verdict.ok and verdict.signer == "node-1", verdict
    # The head's log holds each report once, naming its started entry and node.
    after, _ = _entries(hill_dir)
    logged = [entry for entry in after[len(before):] if "report" in entry]
    # (in the order they came back, which two workers may swap)
    assert sorted((e["report"]["run_id"], json.dumps(e["report"], sort_keys=True)) for e in logged) == \
        sorted((r["run_id"], json.dumps(r, sort_keys=True)) for r in reports)
    assert all(entry["node"]["signer"] == "node-1" and entry["start"]["seq"] is not None for entry in logged)
    started = [entry["started"] for entry in after[len(before):] if "started" in entry]
    assert len(started) == 3 and all(record["note"] == "three on the cluster" for record in started)
    # ... and the hill's notes on the head's commit name them too.
    noted = {json.loads(line)["report"]["run_id"] for line in notes_lines(hill_dir)}
    assert {r["run_id"] for r in reports} <= noted
    attempts = run_cli("attempts", NAME, "--json")
    assert json.loads(attempts.out)["chain"]["ok"]
    # The node kept its own copy of the version and its own log of the evals.
    node_copy = head.node_home / "cluster" / "hills" / tree / ".hills" / NAME
    assert (node_copy / "private" / "answers.csv").read_text() == "1\n"
    node_log = head.node_home / "state" / f"{NAME}@{tree}" / "attempts.jsonl"
    assert {r["run_id"] for r in reports} <= {json.loads(line).get("report", {}).get("run_id")
                                              for line in node_log.read_text().splitlines()}
    # `hills verify` at the head says valid for every one of them.
    for index, report in enumerate(reports):
        path = tmp_path / f"report-{index}.json"
        path.write_text(json.dumps(report))
        assert run_cli("verify", path).code == 0


def test_a_worker_killed_mid_eval_is_logged_and_the_eval_retried(cluster, node_key, tmp_path):
    head, hill_dir = cluster
    run_cli("trust", "add", "node-1", node_key)
    folder = submission(tmp_path / "slow", {"score.txt": "4\n", "slow.txt": "6\n"})
    before, _ = _entries(hill_dir)
    command = [str(Path(sys.executable).parent / "python"), "-m", "hills", "eval", str(folder), "-H", NAME,
               "--on", head.address, "--json"]
    running = subprocess.Popen(command, env=dict(os.environ, **LOOPBACK), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    killed = None
    deadline = time.time() + 120
    while killed is None and time.time() < deadline and running.poll() is None:
        for pid in _task_workers():
            os.kill(pid, signal.SIGKILL)
            killed = pid
            break
        time.sleep(0.2)
    out, err = running.communicate(timeout=300)
    assert killed is not None, err
    assert running.returncode == 0, err
    assert "a node was lost during the eval" in err and "retrying it once" in err
    [report] = _lines(out)
    from hills.evidence import signing, trust

    assert report["status"] == "passing" and signing.verify(report, trust.machine_keys(), trust.trusted()).ok
    after, _ = _entries(hill_dir)
    new = after[len(before):]
    lost = [entry["cluster"] for entry in new if entry.get("cluster", {}).get("event") == "lost"]
    assert len(lost) == 1 and lost[0]["submission"] == str(folder) and lost[0]["attempt"] == 1
    assert "WorkerCrashedError" in lost[0]["reason"] or "died" in lost[0]["reason"].lower()
    assert [entry["report"]["run_id"] for entry in new if "report" in entry] == [report["run_id"]]


def test_an_interrupt_at_the_head_stops_the_evals_in_flight(cluster, node_key, tmp_path):
    head, hill_dir = cluster
    run_cli("trust", "add", "node-1", node_key)
    folder = submission(tmp_path / "long", {"score.txt": "1\n", "slow.txt": "25\n"})
    command = [str(Path(sys.executable).parent / "python"), "-m", "hills", "eval", str(folder), "-H", NAME,
               "--on", head.address, "--json"]
    running = subprocess.Popen(command, env=dict(os.environ, **LOOPBACK), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    deadline = time.time() + 60
    while not _task_workers() and time.time() < deadline:
        time.sleep(0.2)
    workers = _task_workers()
    assert workers, "the eval's task never started"
    time.sleep(1)
    started = time.time()
    running.send_signal(signal.SIGINT)
    out, err = running.communicate(timeout=60)
    assert running.returncode == 130, err
    assert time.time() - started < 20, "the head waited for the eval instead of stopping it"
    assert "error: interrupted" in err and out == ""
    deadline = time.time() + 30
    while any(pid in _task_workers() for pid in workers) and time.time() < deadline:
        time.sleep(0.5)
    assert not any(pid in _task_workers() for pid in workers), "the node's task outlived the interrupt"


def _task_workers():
    """Pids of Ray workers running the eval task (Ray names the process
    after the task it runs)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if handle.read().startswith((b"ray::node_eval", b"ray::NodeWorker.eval")):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def test_tune_runs_its_trials_on_the_cluster(cluster, node_key, tmp_path):
    head, _ = cluster
    run_cli("trust", "add", "node-1", node_key)
    folder = submission(tmp_path / "knobs", {"score.txt": "1\n", "params.json": json.dumps(
        {"width": {"type": "int", "low": 1, "high": 8, "default": 2}})})
    result = run_bin("hills", "tune", folder, "-H", NAME, "--budget", "3", "--seed", "1", "--on", head.address,
                     "--workers", "2", "--json", env=dict(os.environ, **LOOPBACK), timeout=300)
    assert result.code == 0, result.output
    tuned = json.loads(result.out)
    assert [trial["status"] for trial in tuned["trials"]] == ["passing"] * 3
    assert tuned["best"]["report"]["trial"] == tuned["best"]["knobs"]
    from hills.evidence import signing, trust

    assert signing.verify(tuned["best"]["report"], trust.machine_keys(), trust.trusted()).signer == "node-1"


def _worker_pids(head, hill_dir, *folders, env=None):
    """Eval `folders` on the cluster one at a time; the pids of the node
    workers that ran them, as the head logged them."""
    head_env = dict(os.environ, **LOOPBACK, **(env or {}))
    before, _ = _entries(hill_dir)
    result = run_bin("hills", "eval", *folders, "-H", NAME, "--on", head.address, "--json", "--workers", "1",
                     env=head_env, timeout=300)
    assert result.code == 0, result.output
    after, _ = _entries(hill_dir)
    return [entry["node"]["pid"] for entry in after[len(before):] if "report" in entry]


def test_a_later_command_runs_its_evals_in_the_node_workers_of_an_earlier_one(cluster, node_key, tmp_path):
    head, hill_dir = cluster
    run_cli("trust", "add", "node-1", node_key)
    folders = [submission(tmp_path / name, {"score.txt": "1\n"}) for name in ("a", "b")]
    first = _worker_pids(head, hill_dir, *folders)
    second = _worker_pids(head, hill_dir, folders[0])
    assert len(first) == 2 and len(set(first)) == 1 and first[0] is not None
    assert second == first[:1], "the second command started a node worker of its own"


def test_an_idle_node_worker_exits_and_a_later_command_starts_another(cluster, node_key, tmp_path):
    head, hill_dir = cluster
    run_cli("trust", "add", "node-1", node_key)
    folder = submission(tmp_path / "i", {"score.txt": "1\n"})
    [pid] = _worker_pids(head, hill_dir, folder, env={"HILLS_CLUSTER_IDLE_S": "1"})
    deadline = time.time() + 30
    while _is_node_worker(pid) and time.time() < deadline:
        time.sleep(0.2)
    assert not _is_node_worker(pid), "the idle node worker did not exit"
    [again] = _worker_pids(head, hill_dir, folder)
    assert again != pid and _is_node_worker(again)


def test_stop_ends_the_node_workers_at_once(cluster, node_key, tmp_path):
    head, hill_dir = cluster
    run_cli("trust", "add", "node-1", node_key)
    [pid] = _worker_pids(head, hill_dir, submission(tmp_path / "s", {"score.txt": "1\n"}))
    done = subprocess.run([sys.executable, "-m", "hills.cluster", "stop", head.address],
                          env=dict(os.environ, **LOOPBACK), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "hills-cpu-0" in done.stdout, done.stdout
    deadline = time.time() + 30
    while _is_node_worker(pid) and time.time() < deadline:
        time.sleep(0.2)
    assert not _is_node_worker(pid), "the node worker outlived stop"


def _is_node_worker(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().startswith(b"ray::NodeWorker")
    except OSError:
        return False


def test_final_evals_on_the_cluster_count_against_the_heads_budget(cluster, node_key, tmp_path):
    head, _ = cluster
    run_cli("trust", "add", "node-1", node_key)
    make_hill("holdout", SLOW_EVAL, extra="final:\n  budget: 1\n")
    folder = submission(tmp_path / "f", {"score.txt": "1\n"})
    env = dict(os.environ, **LOOPBACK)
    first = run_bin("hills", "eval", folder, folder, "-H", "holdout", "--final", "--on", head.address, "--json",
                    "--workers", "1", env=env, timeout=300)
    assert first.code == 5, first.output  # one look spent, the second refused at the head
    spent, refused = _lines(first.out)
    assert spent["final"] is True and spent["status"] == "passing"
    assert refused["status"] == "refused" and "holdout budget of hill 'holdout' is spent: 1 of 1" in refused["reason"]


def test_a_reusable_holdouts_final_evals_stay_on_this_machine(cluster, tmp_path):
    head, _ = cluster
    make_hill("reusable-ray", SLOW_EVAL, extra="final:\n  mode: reusable\n  budget: 1\n")
    folder = submission(tmp_path / "r", {"score.txt": "1\n"})
    result = run_bin("hills", "eval", folder, "-H", "reusable-ray", "--final", "--on", head.address, "--json",
                     env=dict(os.environ, **LOOPBACK), timeout=120)
    assert result.code == 5, result.output
    [refused] = _lines(result.out)
    assert refused["status"] == "refused" and "has a reusable holdout (final.mode: reusable)" in refused["reason"]
    assert "--on ray" in refused["reason"]


def test_a_gpu_hill_asks_for_a_gpu_the_cluster_lacks(cluster, module_machine, tmp_path):
    head, _ = cluster
    make_hill("needs-gpu", SLOW_EVAL, exclusive="gpu")
    folder = submission(tmp_path / "g", {"score.txt": "1\n"})
    result = run_bin("hills", "eval", folder, "-H", "needs-gpu", "--on", head.address,
                     env=dict(os.environ, **LOOPBACK), timeout=120)
    assert result.code == 4, result.output
    assert "needs a GPU for each eval (exclusive: gpu)" in result.error_lines[0]


def test_a_node_sharing_the_heads_machine_state_is_refused(cluster):
    head, _ = cluster
    # The task as Ray runs it on the node, told the head's machine state is
    # the node's own: it refuses before it touches anything.
    script = (f"import json, os, ray\nfrom hills import cluster\n"
              f"ray.init(address='127.0.0.1:{head.port}', log_to_driver=False)\n"
              f"task = ray.remote(num_cpus=0)(cluster.node_eval)\n"  # the idle node workers hold the CPUs
              f"head = {{'host': os.uname().nodename, 'home': {str(os.path.realpath(head.node_home))!r}}}\n"
              f"print(json.dumps(ray.get(task.remote('x', '0' * 40, [], b'', [], head))))\n")
    done = subprocess.run([sys.executable, "-c", script], env=dict(os.environ, **LOOPBACK), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["exit_code"] == 4 and "shares the head's machine state" in answer["error"]


@pytest.mark.parametrize("argv, words", [
    (["--on", "slurm"], "expected 'ray' or 'ray://HOST:PORT'"),
    (["--on", "ray://127.0.0.1"], "expected 'ray' or 'ray://HOST:PORT'"),
    (["--workers", "2"], "--workers needs --on"),
    (["--on", "ray://127.0.0.1:1", "--current"], "--current cannot be combined with --on"),
])
def test_bad_cluster_options_are_usage_errors(cluster, tmp_path, argv, words):
    folder = submission(tmp_path / "u", {"score.txt": "1\n"})
    result = run_cli("eval", folder, "-H", NAME, *argv)
    assert result.code == 2, result.output
    assert words in result.error_lines[0]


def test_an_address_where_nothing_listens_is_refused_at_once(cluster, tmp_path):
    from testing.ray_head import free_port

    folder = submission(tmp_path / "n", {"score.txt": "1\n"})
    started = time.time()
    result = run_bin("hills", "eval", folder, "-H", NAME, "--on", f"ray://127.0.0.1:{free_port()}",
                     env=dict(os.environ, **LOOPBACK), timeout=120)
    assert result.code == 4, result.output
    assert "nothing answers there" in result.error_lines[0] and time.time() - started < 30


def test_without_ray_on_ray_says_how_to_install_it(project, monkeypatch, tmp_path):
    make_hill("plain", SLOW_EVAL)
    monkeypatch.setitem(sys.modules, "ray", None)
    folder = submission(tmp_path / "p", {"score.txt": "1\n"})
    result = run_cli("eval", folder, "-H", "plain", "--on", "ray")
    assert result.code == 4, result.output
    assert "--on ray needs Ray, which is not installed" in result.error_lines[0]
    assert "pip install 'hills[ray]'" in result.err
