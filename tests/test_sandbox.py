"""Isolation levels (issue 5 items 1 and 2): the bwrap argv hills builds,
`hills.sdk` outside and inside an eval, and what happens without
bubblewrap, with `sandbox: none` and with `sandbox: bwrap` on a machine
that lacks it."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testing.util import BWRAP_USABLE, needs_bwrap
from testing.eval_fixtures import (SCORE_EVAL, attempts_log, hills, hills_home, make_hill, on_machine, submission,
                           tree_of)
from hills import sdk
from hills.run import sandbox
from hills.base.errors import EnvironmentProblem

MISSING = "/nonexistent/bwrap"
ISOLATION_NONE = {"name": "isolation", "value": "none", "primary": True}
ISOLATION_BWRAP = {"name": "isolation", "value": "bwrap", "primary": True}


@pytest.fixture
def no_bwrap(monkeypatch):
    """This machine, as if bubblewrap were not installed."""
    monkeypatch.setenv("HILLS_BWRAP", MISSING)


# -- the pure parts ----------------------------------------------------------

def test_level_follows_hill_yaml_and_the_machine(monkeypatch):
    """Fail closed: only `sandbox: none` runs unconfined; `auto` (the
    default) and `bwrap` without a usable bubblewrap are refused, named."""
    assert sandbox.level_for({"sandbox": "none"}) == "none"
    monkeypatch.setenv("HILLS_BWRAP", MISSING)
    assert sandbox.bwrap_works() is False
    assert sandbox.level_for({"sandbox": "none"}) == "none"
    for spec in ({"sandbox": "auto"}, {}, {"sandbox": "bwrap"}):
        with pytest.raises(EnvironmentProblem) as raised:
            sandbox.level_for(spec)
        assert f"bubblewrap '{MISSING}' (HILLS_BWRAP) does not exist" in raised.value.message
        assert "never runs submitted code unconfined" in raised.value.message
        assert "'sandbox: none'" in (raised.value.hint or "") and "install bubblewrap" in (raised.value.hint or "")


def test_evaluator_argv_hides_the_machine_state_and_keeps_the_hill_read_only():
    argv = sandbox.evaluator_argv(["python", "x.py"], home="/m", run_dir="/m/runs/h/1",
                                  run_hill_dir="/m/runs/h/1/hill", readable=["/m/envs/h/t", "/m/sdk/s"],
                                  network=False, cwd="/m/runs/h/1")
    assert argv[-3:] == ["--", "python", "x.py"]
    joined = " ".join(argv)
    for part in ("--unshare-pid", "--die-with-parent", "--new-session", "--unshare-net", "--tmpfs /m",
                 "--ro-bind /m/envs/h/t /m/envs/h/t", "--bind /m/runs/h/1 /m/runs/h/1",
                 "--ro-bind /m/runs/h/1/hill /m/runs/h/1/hill", "--remount-ro /m", "--chdir /m/runs/h/1"):
        assert part in joined, part
    # The run folder's bind comes before the read-only hill inside it.
    assert joined.index("--bind /m/runs/h/1 ") < joined.index("--ro-bind /m/runs/h/1/hill")
    networked = sandbox.evaluator_argv(["true"], home="/m", run_dir="/r", run_hill_dir="/r/hill", readable=[],
                                       network=True, cwd="/r")
    assert "--unshare-net" not in networked


def test_the_evaluator_of_a_gpu_hill_sees_the_gpu_devices():
    # Its scorer runs the model and names the hardware (nanogpt-10min's primary config).
    argv = sandbox.evaluator_argv(["true"], home="/m", run_dir="/r", run_hill_dir="/r/hill", readable=[],
                                  network=False, cwd="/r", devices=["/dev/nvidia0", "/dev/nvidiactl"])
    joined = " ".join(argv)
    assert "--dev-bind /dev/nvidia0 /dev/nvidia0 --dev-bind /dev/nvidiactl /dev/nvidiactl" in joined
    assert joined.index("--dev /dev") < joined.index("--dev-bind /dev/nvidia0")
    plain = sandbox.evaluator_argv(["true"], home="/m", run_dir="/r", run_hill_dir="/r/hill", readable=[],
                                   network=False, cwd="/r")
    assert "--dev-bind" not in plain


def test_other_hills_private_folders_are_hidden_from_the_evaluator(project):
    made = {}
    for name in ("first", "second", "third"):
        created = hills("new", name)
        assert created.code == 0, created.output
        made[name] = Path(created.out.strip())
    first, second = made["first"], made["second"]
    for hill_dir in (first, second):
        (hill_dir / "private").mkdir(exist_ok=True)
    if (made["third"] / "private").exists():  # no private data: nothing to hide
        (made["third"] / "private").rmdir()
    assert sandbox.private_elsewhere(str(first)) == [str(second / "private")]
    assert sandbox.private_elsewhere(str(second)) == [str(first / "private")]
    argv = sandbox.evaluator_argv(["true"], home="/m", run_dir="/r", run_hill_dir="/r/hill", readable=[],
                                  network=False, cwd="/r", hidden=["/p/.hills/other/private"])
    joined = " ".join(argv)
    assert "--tmpfs /p/.hills/other/private --remount-ro /p/.hills/other/private" in joined


def test_submission_argv_binds_only_the_system_and_its_own_folders():
    argv = sandbox.submission_argv([], writable=["/m/runs/h/1/submission"], scratch="/m/runs/h/1/scratch",
                                   readable=["/m/envs/h/t"], network=False, cwd="/m/runs/h/1/submission")
    joined = " ".join(argv)
    for part in ("--bind /m/runs/h/1/submission /m/runs/h/1/submission", "--bind /m/runs/h/1/scratch /tmp",
                 "--bind /m/runs/h/1/scratch /m/runs/h/1/scratch", "--unshare-net", "--dev /dev", "--proc /proc",
                 "--remount-ro /", "--chdir /m/runs/h/1/submission", "--ro-bind /etc/passwd /etc/passwd"):
        assert part in joined, part
    assert argv[-1] == "--"
    # Nothing of the machine is bound whole: no --ro-bind / /, no /home, /root, /run, /var, /etc itself.
    pairs = {(argv[i + 1], argv[i + 2]) for i, word in enumerate(argv) if word in ("--ro-bind", "--bind")}
    assert not {dest for _, dest in pairs} & {"/", "/home", "/root", "/run", "/var", "/etc", "/mnt", "/srv"}
    assert not any(dest.startswith(("/etc/shadow", "/etc/gshadow", "/etc/ssh", "/etc/sudoers", "/etc/ssl/private"))
                   for _, dest in pairs)
    # Name resolution files only where there is a network to resolve on.
    networked = sandbox.submission_argv([], writable=[], scratch="/m/s", readable=[], network=True, cwd="/m/s")
    if os.path.exists("/etc/resolv.conf"):
        assert "/etc/resolv.conf" in networked and "/etc/resolv.conf" not in argv
    # /tmp is the scratch folder, bound before any folder under it.
    assert joined.index("/m/runs/h/1/scratch /tmp") < joined.index("--bind /m/runs/h/1/submission")
    assert joined.index("--bind /m/runs/h/1/submission") < joined.index("--remount-ro / ")


def test_confinement_without_bwrap_is_a_plain_run(tmp_path):
    confinement = sandbox.Confinement("none", home=str(tmp_path / "m"), run_dir=str(tmp_path / "r"),
                                      run_hill_dir=str(tmp_path / "r" / "hill"), hill_dir=str(tmp_path / "h"),
                                      env_dir=str(tmp_path / "e"), sdk_dir=str(tmp_path / "s"), network=False,
                                      limits={"time": 7, "memory": 256 * 1024 * 1024})
    assert confinement.evaluator(["python", "x"], str(tmp_path)) == ["python", "x"]
    config = confinement.submission_config(str(tmp_path / "r" / "sub"), str(tmp_path / "r" / "scratch"))
    assert config["prefix"] == [] and config["timeout"] == 7 and config["memory_mb"] == 256
    assert (tmp_path / "r" / "scratch").is_dir()


# -- hills.sdk outside an eval --------------------------------------------------

def test_sdk_runs_plainly_outside_an_eval(tmp_path, monkeypatch):
    monkeypatch.delenv(sdk.ENV_CONFIG, raising=False)
    monkeypatch.chdir(tmp_path)
    done = sdk.run_submission([sys.executable, "-c", "import os; print(os.getcwd())"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == str(tmp_path)


def test_sdk_timeout_kills_the_whole_group(tmp_path, monkeypatch):
    monkeypatch.delenv(sdk.ENV_CONFIG, raising=False)
    marker = tmp_path / "child.pid"
    code = ("import subprocess, sys, time; "
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
            f" open({str(marker)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        sdk.run_submission([sys.executable, "-c", code], timeout=1)
    assert time.monotonic() - started < 10
    pid = int(marker.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and sdk._dead(pid) is False:
        time.sleep(0.05)
    assert sdk._dead(pid), "a grandchild outlived the timeout"


def test_sdk_memory_limit(monkeypatch):
    monkeypatch.delenv(sdk.ENV_CONFIG, raising=False)
    done = sdk.run_submission([sys.executable, "-c", "bytearray(2 * 1024 ** 3)"], memory_mb=256,
                              capture_output=True, text=True)
    assert done.returncode != 0 and "MemoryError" in done.stderr


def test_sdk_wrapper_reports_a_timeout_as_124(monkeypatch):
    monkeypatch.setenv(sdk.ENV_CONFIG, json.dumps({"timeout": 1}))
    started = time.monotonic()
    assert sdk.main([sys.executable, "-c", "import time; time.sleep(30)"]) == 124
    assert time.monotonic() - started < 10


def test_sdk_puts_back_hill_links_and_drops_links_that_leave(tmp_path, monkeypatch):
    # As in a run folder: the hill's public copy, whose private/ is a link to
    # the real one, which submitted code cannot see but the evaluator can.
    folder = tmp_path / "submission"
    hill = tmp_path / "run-hill"
    real_private = tmp_path / "real-hill" / "private"
    real_private.mkdir(parents=True)
    (real_private / "secret").write_text("held-out\n")
    hill.mkdir()
    (hill / "private").symlink_to(real_private)
    folder.mkdir()
    (folder / "problem").symlink_to(hill)
    config = {"cwd": str(folder), "public": [str(hill)], "links": {"problem": str(hill)}}
    monkeypatch.setenv(sdk.ENV_CONFIG, json.dumps(config))
    script = ("import os; os.unlink('problem'); os.mkdir('problem');"
              f"os.symlink({str(hill / 'private' / 'secret')!r}, 'answer');"
              "os.symlink('problem/x', 'inside-dangling'); open('own', 'w').write('1'); os.symlink('own', 'ok')")
    done = sdk.run_submission([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert os.readlink(folder / "problem") == str(hill)
    assert not os.path.lexists(folder / "answer")
    assert os.readlink(folder / "ok") == "own" and (folder / "own").read_text() == "1"
    assert os.path.lexists(folder / "inside-dangling")  # it leads into the hill's public files


# -- evals at each level ------------------------------------------------------------

@pytest.fixture(scope="module")
def plain(module_machine):
    with on_machine(module_machine):
        return make_hill("plain", SCORE_EVAL)


@pytest.fixture(scope="module")
def bare(module_machine):
    with on_machine(module_machine):
        return make_hill("bare", SCORE_EVAL, extra="sandbox: none\n")


@pytest.fixture(scope="module")
def strict(module_machine):
    if not BWRAP_USABLE:
        pytest.skip("bubblewrap is not usable here: a 'sandbox: bwrap' hill cannot be committed")
    with on_machine(module_machine):
        return make_hill("strict", SCORE_EVAL, extra="sandbox: bwrap\n")


@pytest.fixture
def scored(tmp_path):
    return submission(tmp_path / "sub", {"score.txt": "3\n"})


@needs_bwrap
def test_default_eval_is_isolated_with_bwrap(plain, scored):
    result = hills("eval", scored, "-H", "plain")
    assert result.code == 0, result.output
    assert ISOLATION_BWRAP in result.report["config"]
    assert "isolation=bwrap" in result.err


@needs_bwrap  # the hill is committed with bubblewrap; the eval then runs without
def test_without_bwrap_an_eval_is_refused_and_nothing_is_logged(plain, scored, no_bwrap):
    """Fail closed: `sandbox: auto` without bubblewrap refuses the eval
    (exit 4) before anything is logged, and `hills check` too."""
    log = attempts_log("plain", tree_of(plain))
    before = log.read_text() if log.exists() else None
    result = hills("eval", scored, "-H", "plain")
    assert result.code == 4, result.output
    assert f"error: bubblewrap '{MISSING}' (HILLS_BWRAP) does not exist" in result.err
    assert "hint: install bubblewrap" in result.err and "'sandbox: none'" in result.err
    assert result.out == ""
    assert (log.read_text() if log.exists() else None) == before
    checked = hills("check", "plain")
    assert checked.code == 4, checked.output
    assert f"bubblewrap '{MISSING}' (HILLS_BWRAP) does not exist" in checked.err


@needs_bwrap
def test_isolation_is_primary(plain, scored):
    """Reports made with and without the sandbox never rank together: the
    level is primary config (a confined report here, or with `sandbox: none`)."""
    first = hills("eval", scored, "-H", "plain")
    assert first.code == 0, first.output
    config = {c["name"]: c for c in first.report["config"]}
    assert config["isolation"]["primary"] is True


def test_sandbox_none_runs_unisolated_and_check_warns(bare, scored):
    result = hills("eval", scored, "-H", "bare")
    assert result.code == 0, result.output
    assert ISOLATION_NONE in result.report["config"]
    checked = hills("check", "bare")
    assert checked.code == 0, checked.output
    warn = [line for line in checked.output.splitlines() if line.split()[:2] == ["warn", "isolation"]]
    assert warn and "sandbox: none" in warn[0], checked.output


def test_sandbox_bwrap_without_bwrap_is_an_environment_problem(strict, scored, no_bwrap):
    log = attempts_log("strict", tree_of(strict))
    before = log.read_text() if log.exists() else None
    result = hills("eval", scored, "-H", "strict")
    assert result.code == 4, result.output
    assert "error:" in result.err and "bubblewrap" in result.err and "'sandbox: bwrap'" in result.err
    # Refused before the attempts log is opened: nothing is logged.
    assert (log.read_text() if log.exists() else None) == before
    checked = hills("check", "strict")
    assert checked.code == 4, checked.output
    assert "bubblewrap" in checked.err


@needs_bwrap
def test_sandbox_bwrap_with_bwrap_is_isolated(strict, scored):
    result = hills("eval", scored, "-H", "strict")
    assert result.code == 0, result.output
    assert ISOLATION_BWRAP in result.report["config"]


@needs_bwrap
def test_real_executable_eval_is_isolated_too(plain, scored):
    """Through bin/hills-eval in a subprocess, not only in-process."""
    from testing.eval_fixtures import real

    done = real("hills-eval", scored, "-H", "plain")
    assert done.code == 0, done.output
    assert ISOLATION_BWRAP in json.loads(done.out)["config"]


@pytest.mark.slow
@needs_bwrap
def test_sandboxed_circle_packing_example_scores(committed_hill):
    result = hills("eval", committed_hill / "examples" / "grid", "-H", "circle-packing")
    assert result.code == 0, result.output
    assert result.report["passed"] is True
    assert ISOLATION_BWRAP in result.report["config"]
    assert (hills_home() / "key").exists()
