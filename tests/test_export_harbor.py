"""`hills export harbor`: a hill's committed version as a Harbor task in
separate-verifier mode. The task is loaded by the `harbor` package's own
task loader (in a Python 3.12 side venv, as harbor needs), its held-out
data is nowhere on the agent's side (by content, archives included) while
the same scan finds it on the verifier's, and the exported verifier runs
here, with the hills wheel it carries, writing Harbor's reward file."""

import fcntl
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from testing.eval_fixtures import SCORE_EVAL, gate_skipped, make_hill, on_machine, submission, tree_of
from testing.util import TEST_CACHE, git, run_cli

NAME = "exported"
BLOBS = 'blobs:\n  track: ["data/*.bin"]\n'
PRIVATE = {"answers.csv": "id,answer\n1,42\n2,17\n3,99\n", "holdout/inputs.txt": "the held-out inputs: 5 8 13 21\n"}
HARBOR = "harbor==0.25.0"


def _python_for_harbor() -> Path | None:
    """An interpreter of Python 3.12 or later for the side venv: Debian's or
    /usr/local's, else pyenv's (its shims on PATH answer only where pyenv
    selects that version, so its versions are looked up directly)."""
    import glob

    found = [*sorted(glob.glob("/usr/bin/python3.1[2-9]")), *sorted(glob.glob("/usr/local/bin/python3.1[2-9]"))]
    for root in (os.environ.get("PYENV_ROOT"), os.path.expanduser("~/.pyenv"), "/root/.pyenv"):
        if root:
            found += sorted(glob.glob(os.path.join(root, "versions", "3.1[2-9].*", "bin", "python3.1[2-9]")))
    for candidate in found:
        done = subprocess.run([candidate, "-c", "import sys; assert sys.version_info >= (3, 12)"],
                              capture_output=True)
        if done.returncode == 0:
            return Path(candidate)
    return None


PYTHON312 = _python_for_harbor()
UV = Path(sys.executable).with_name("uv")
# uv's cache as the caller had it (CI exports its own): the side venvs are
# built from it; the hermetic machine's empty cache would download them.
CALLER_UV_CACHE = os.environ.get("UV_CACHE_DIR")
AGENT_SIDE = ("instruction.md", "task.toml", "environment", "solution")


@pytest.fixture(scope="module")
def hill(module_machine):
    """A hill scoring score.txt, with private data, a public blob and an
    example that scores, committed."""
    with on_machine(module_machine):
        hill_dir = make_hill(NAME, SCORE_EVAL, extra=BLOBS, private=PRIVATE)
        for path in sorted((hill_dir / "examples").rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        (hill_dir / "examples" / "basic").mkdir(parents=True)
        (hill_dir / "examples" / "basic" / "score.txt").write_text("7\n")
        (hill_dir / "data").mkdir()
        (hill_dir / "data" / "weights.bin").write_bytes(bytes(range(256)) * 8)
        with gate_skipped():
            committed = run_cli("commit", NAME, "-m", "an example and a blob")
        assert committed.code == 0, committed.output
        return hill_dir


@pytest.fixture(scope="module")
def task(hill, module_machine, tmp_path_factory):
    """The hill exported, with a failed reward that no score here equals."""
    target = tmp_path_factory.mktemp("tasks") / NAME
    with on_machine(module_machine):
        result = run_cli("export", "harbor", NAME, "-o", target, "--failed-reward", "-1", "--json")
    assert result.code == 0, result.output
    return target, json.loads(result.out)


def _env(**extra):
    env = dict(os.environ)
    if CALLER_UV_CACHE:
        env["UV_CACHE_DIR"] = CALLER_UV_CACHE
    # The machine's certificate store, as hills gives it to uv (hills/disk/uvenv.py):
    # behind a proxy with its own root, uv's bundled roots fail every download.
    if "UV_NATIVE_TLS" not in env:
        env.setdefault("UV_SYSTEM_CERTS", "1")
    env.update(extra)
    return env


def _uv(*argv, cwd=None):
    done = subprocess.run([str(UV), *map(str, argv)], capture_output=True, text=True, env=_env(), cwd=cwd,
                          timeout=600)
    assert done.returncode == 0, f"uv {' '.join(map(str, argv))} failed:\n{done.stdout}{done.stderr}"
    return done


def _venv(folder, *packages):
    """A Python 3.12 venv at `folder` holding `packages`: a failure fails the
    test (CI has the interpreter and uv's cache), never skips it."""
    assert PYTHON312 is not None, ("no Python 3.12 or later found (/usr/bin, /usr/local/bin, pyenv's versions): "
                                   "harbor needs one")
    _uv("venv", "-q", "-p", PYTHON312, folder)
    _uv("pip", "install", "-q", "--python", Path(folder) / "bin" / "python", *packages)
    return Path(folder)


@pytest.fixture(scope="session")
def harbor_python():
    """harbor 0.25.0 in a side venv kept in the suite's cache folder: made
    once, under a lock (xdist workers), reused by later sessions."""
    folder = TEST_CACHE / "harbor-0.25.0-py3.12"
    TEST_CACHE.mkdir(parents=True, exist_ok=True)
    with open(TEST_CACHE / "harbor-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".complete").is_file():
            if folder.exists():
                _uv("venv", "-q", "--clear", "-p", PYTHON312, folder)
            _venv(folder, HARBOR)
            (folder / ".complete").write_text(HARBOR + "\n")
    return folder / "bin" / "python"


LOADER = """
import json, sys
from pathlib import Path
from harbor.lint import lint_task
from harbor.lint.models import COMPOSE_RULES, LintRule
from harbor.models.task.task import Task
from harbor.models.task.verifier_mode import resolve_task_verifier_mode, resolve_verifier_environment_definition

task = Task(sys.argv[1])
definition = resolve_verifier_environment_definition(task.config, task.paths)
# The compose rules need Docker's CLI; every other rule of harbor's linter runs.
findings = lint_task(Path(sys.argv[1]), selected_rules=set(LintRule) - set(COMPOSE_RULES))
print(json.dumps({
    "name": task.name, "instruction": task.instruction,
    "mode": resolve_task_verifier_mode(task.config).value,
    "verifier_dir": str(definition.directory), "bundled_tests": definition.bundled_tests,
    "artifacts": [str(a) for a in task.config.artifacts], "metadata": task.config.metadata,
    "agent_user": task.config.agent.user, "verifier_timeout": task.config.verifier.timeout_sec,
    "findings": [f"{f.rule}: {f.message}" for f in findings],
}))
"""


@pytest.mark.slow
def test_harbor_loads_the_task_with_a_separate_verifier(task, hill, harbor_python):
    target, exported = task
    done = subprocess.run([str(harbor_python), "-c", LOADER, str(target)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    loaded = json.loads(done.stdout)
    assert loaded["name"] == f"hills/{NAME}"
    assert loaded["instruction"].startswith(f"# {NAME}\n")
    assert "`/app/submission`" in loaded["instruction"] and "holdout split" in loaded["instruction"]
    assert (hill / "README.md").read_text() in loaded["instruction"]
    assert loaded["mode"] == "separate"
    assert loaded["bundled_tests"] is True and Path(loaded["verifier_dir"]) == (target / "tests").resolve()
    assert loaded["artifacts"] == ["/app/submission"]
    assert loaded["agent_user"] == "agent"
    assert loaded["verifier_timeout"] > 3
    metadata = loaded["metadata"]["hills"]
    assert metadata["tree_hash"] == tree_of(hill) == exported["tree_hash"]
    assert metadata["commit"] == git(hill, "rev-parse", "HEAD").out.strip() == exported["commit"]
    assert metadata["failed_reward"] == -1.0 and metadata["split"] == "holdout"
    digest = hashlib.sha256((target / "tests" / f"{NAME}.hillbundle").read_bytes()).hexdigest()
    assert metadata["bundle_sha256"] == "sha256:" + digest
    assert loaded["findings"] == []


def _contents(root):
    """(relative path, bytes) of every file under `root`, and of every
    member of a tar or zip file there (as `file!member`)."""
    for path in sorted(Path(root).rglob("*") if Path(root).is_dir() else [Path(root)]):
        if not path.is_file():
            continue
        payload = path.read_bytes()
        rel = str(path.relative_to(root)) if Path(root).is_dir() else path.name
        yield rel, payload
        if tarfile.is_tarfile(path):
            with tarfile.open(path) as archive:
                for member in archive.getmembers():
                    if member.isfile():
                        yield f"{rel}!{member.name}", archive.extractfile(member).read()
        elif zipfile.is_zipfile(path):
            with zipfile.ZipFile(io.BytesIO(payload)) as archive:
                for name in archive.namelist():
                    yield f"{rel}!{name}", archive.read(name)


def _private_found(root, private_digests):
    return {hashlib.sha256(payload).hexdigest(): rel for rel, payload in _contents(root)
            if hashlib.sha256(payload).hexdigest() in private_digests}


def test_no_held_out_file_is_on_the_agents_side_and_the_verifier_holds_each(task, hill):
    target, exported = task
    private_digests = {hashlib.sha256(path.read_bytes()).hexdigest()
                       for path in (hill / "private").rglob("*") if path.is_file()}
    assert len(private_digests) == len(PRIVATE) == exported["private_files"]
    for side in AGENT_SIDE:
        assert (target / side).exists(), side
        assert _private_found(target / side, private_digests) == {}, side
        for rel, payload in _contents(target / side):
            assert b"the held-out inputs" not in payload and b"1,42\n2,17" not in payload, rel
    # The control: the same scan over the verifier's side finds every one
    # of them, in the bundle.
    found = _private_found(target / "tests", private_digests)
    assert set(found) == private_digests
    assert all(rel.startswith(f"{NAME}.hillbundle!data/") for rel in found.values())


def test_the_agent_gets_the_committed_public_files_the_blob_and_the_example(task, hill):
    target, _ = task
    public = target / "environment" / "hill"
    assert (public / "eval.py").read_text() == (hill / "eval.py").read_text()
    assert (public / "data" / "weights.bin").read_bytes() == (hill / "data" / "weights.bin").read_bytes()
    assert not (public / "private").exists() and not (public / ".vc").exists()
    assert (target / "environment" / "submission" / "score.txt").read_text() == "7\n"
    dockerfile = (target / "environment" / "Dockerfile").read_text()
    assert "COPY hill/ /app/hill/" in dockerfile and "USER agent" in dockerfile
    assert "tests" not in dockerfile and "hillbundle" not in dockerfile
    assert "/app/hill/examples/basic/." in (target / "solution" / "solve.sh").read_text()
    config = tomllib.loads((target / "task.toml").read_text())
    assert config["verifier"]["environment_mode"] == "separate"


def test_the_wheel_is_this_hills_without_any_templates_held_out_data(task, tmp_path, module_machine, hill):
    target, _ = task
    wheels = sorted((target / "tests").glob("hills-*.whl"))
    assert len(wheels) == 1, wheels
    with zipfile.ZipFile(wheels[0]) as archive:
        names = archive.namelist()
        assert "hills/entry.py" in names and "hills/hooks/pre-commit" in names
        assert "hills/freeze/harbor_task/hills_reward.py" in names
        assert not [name for name in names if "/private/" in name or "__pycache__" in name]
        metadata = archive.read(next(name for name in names if name.endswith(".dist-info/METADATA"))).decode()
    assert "Requires-Dist: click" in metadata and "Requires-Dist: blake3" in metadata
    assert "extra ==" not in metadata
    # The same hills makes the same wheel, byte for byte.
    with on_machine(module_machine):
        again = run_cli("export", "harbor", NAME, "-o", tmp_path / "again")
    assert again.code == 0, again.output
    assert (tmp_path / "again" / "tests" / wheels[0].name).read_bytes() == wheels[0].read_bytes()


def test_a_dirty_hill_exports_what_was_committed(hill, module_machine, tmp_path):
    eval_py = hill / "eval.py"
    committed = eval_py.read_text()
    eval_py.write_text(committed + "\nEDITED = 'not committed'\n")
    try:
        with on_machine(module_machine):
            result = run_cli("export", "harbor", NAME, "-o", tmp_path / "task")
    finally:
        eval_py.write_text(committed)
    assert result.code == 0, result.output
    assert (tmp_path / "task" / "environment" / "hill" / "eval.py").read_text() == committed


def test_held_out_data_that_drifted_from_its_lock_is_refused(hill, module_machine, tmp_path):
    answers = hill / "private" / "answers.csv"
    answers.write_text(PRIVATE["answers.csv"].replace("42", "43"))
    try:
        with on_machine(module_machine):
            result = run_cli("export", "harbor", NAME, "-o", tmp_path / "task")
    finally:
        answers.write_text(PRIVATE["answers.csv"])
    assert result.code == 1, result.output
    assert "private/answers.csv" in result.error_lines[0]
    assert not (tmp_path / "task").exists() and _leftovers(tmp_path) == []


def test_an_uncommitted_hill_is_refused(project, tmp_path):
    created = run_cli("new", "fresh", "-t", "default")
    assert created.code == 0, created.output
    result = run_cli("export", "harbor", "fresh", "-o", tmp_path / "task")
    assert result.code == 1, result.output
    assert "hill 'fresh' has no commits yet" in result.error_lines[0]
    assert not (tmp_path / "task").exists()


def _leftovers(folder):
    return sorted(path.name for path in Path(folder).iterdir() if ".export-" in path.name)


def test_a_folder_that_is_not_empty_is_kept_without_force(hill, module_machine, tmp_path):
    target = tmp_path / "task"
    target.mkdir()
    (target / "mine.txt").write_text("keep me\n")
    with on_machine(module_machine):
        refused = run_cli("export", "harbor", NAME, "-o", target)
        assert refused.code == 2, refused.output
        assert f"folder '{target}' is not empty" in refused.error_lines[0] and "--force" in refused.output
        assert sorted(path.name for path in target.iterdir()) == ["mine.txt"]
        forced = run_cli("export", "harbor", NAME, "-o", target, "--force")
    assert forced.code == 0, forced.output
    assert not (target / "mine.txt").exists() and (target / "task.toml").is_file()
    assert _leftovers(tmp_path) == []


def test_an_error_leaves_nothing_half_written(hill, module_machine, tmp_path):
    """Refused after the bundle and the wheel are written: neither the task
    folder, nor its temporary folder, nor the folders made above it stay."""
    with on_machine(module_machine):
        result = run_cli("export", "harbor", NAME, "-o", tmp_path / "tasks" / "new" / "task", "--example", "nope")
    assert result.code == 2, result.output
    assert "the hill has no example 'nope'" in result.error_lines[0] and "basic" in result.output
    assert sorted(path.name for path in tmp_path.iterdir()) == []


def _tar(members):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        for name, text in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            archive.addfile(info, io.BytesIO(text.encode()))
    return out.getvalue()


def test_a_base_image_that_is_not_an_image_reference_is_refused(hill, module_machine, tmp_path):
    with on_machine(module_machine):
        result = run_cli("export", "harbor", NAME, "-o", tmp_path / "task",
                         "--base-image", "python:3.12\nRUN cat /etc/shadow")
    assert result.code == 2, result.output
    assert "--base-image" in result.error_lines[0] and "is not a Docker image reference" in result.error_lines[0]
    assert not (tmp_path / "task").exists() and _leftovers(tmp_path) == []


def test_a_public_archive_of_held_out_data_refuses_the_export(project, tmp_path):
    """A hill frozen past its gate's checks (here in-process, the gate
    skipped) with a private file inside a tar among its public files: the
    export's own scan, which opens archives, refuses it, writing nothing."""
    hill_dir = make_hill("leaky", SCORE_EVAL, private=PRIVATE)
    (hill_dir / "examples" / "grid" / "notes.tar").write_bytes(_tar({"notes.csv": PRIVATE["answers.csv"]}))
    with gate_skipped():
        committed = run_cli("commit", "leaky", "-m", "a copy of the answers, archived")
    assert committed.code == 0, committed.output
    result = run_cli("export", "harbor", "leaky", "-o", tmp_path / "task")
    assert result.code == 1, result.output
    assert "holds held-out data outside private/" in result.error_lines[0]
    assert "environment/hill/examples/grid/notes.tar!notes.csv" in result.error_lines[0]
    assert not (tmp_path / "task").exists() and _leftovers(tmp_path) == []
    # The control: without the archive, the same hill exports.
    (hill_dir / "examples" / "grid" / "notes.tar").unlink()
    with gate_skipped():
        assert run_cli("commit", "leaky", "-m", "no copy").code == 0
    assert run_cli("export", "harbor", "leaky", "-o", tmp_path / "task").code == 0


def _reward_module(target):
    import importlib.util

    spec = importlib.util.spec_from_file_location("exported_hills_reward", target / "tests" / "hills_reward.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("report", "expected"), [
    ({"status": "passing", "passed": True, "official": True,
      "metrics": [{"name": "total", "value": 7.0, "direction": "max"}]},
     {"reward": 7.0, "passed": 1.0, "official": 1.0, "score": 7.0}),
    ({"status": "passing", "passed": True, "official": False,
      "metrics": [{"name": "bins", "value": 12.5, "direction": "min"}, {"name": "t", "value": 3, "direction": "min"}]},
     {"reward": -12.5, "passed": 1.0, "official": 0.0, "score": 12.5}),
    ({"status": "failing", "passed": False, "official": True,
      "metrics": [{"name": "total", "value": -3.0, "direction": "max"}]},
     {"reward": -1.0, "passed": 0.0, "official": 1.0, "score": -3.0}),
    ({"status": "buggy", "passed": False, "official": True, "metrics": []},
     {"reward": -1.0, "passed": 0.0, "official": 1.0}),
])
def test_the_reward_is_the_oriented_primary_metric_or_the_failed_reward(task, report, expected):
    target, _ = task
    assert _reward_module(target).reward_of(report, -1.0) == expected


@pytest.fixture(scope="module")
def verifier_hills(task, tmp_path_factory):
    """The wheel the task carries, installed in a Python 3.12 venv of its
    own, as the verifier's image installs it."""
    target, _ = task
    wheels = sorted((target / "tests").glob("hills-*.whl"))
    assert len(wheels) == 1, wheels
    folder = _venv(tmp_path_factory.mktemp("verifier") / "venv", wheels[0])
    assert (folder / "bin" / "hills").is_file()
    return folder / "bin" / "hills"


def _verify(target, verifier_hills, submission_dir, logs, home):
    """tests/test.sh as Harbor runs it, with the paths of this machine."""
    return subprocess.run(["sh", str(target / "tests" / "test.sh"), "--submission", str(submission_dir),
                           "--logs", str(logs), "--hills", str(verifier_hills)],
                          capture_output=True, text=True, timeout=600, cwd=home,
                          env=_env(HOME=str(home), HILLS_HOME=str(home / "hills-home"), TMPDIR=str(home),
                                   PATH=os.pathsep.join([str(verifier_hills.parent), os.environ["PATH"]])))


@pytest.mark.slow
@pytest.mark.parametrize(("score", "status", "expected"), [
    ("7\n", "passing", {"reward": 7.0, "passed": 1.0, "official": 1.0, "score": 7.0}),
    ("-3\n", "failing", {"reward": -1.0, "passed": 0.0, "official": 1.0, "score": -3.0}),
    (None, "buggy", {"reward": -1.0, "passed": 0.0, "official": 1.0}),
])
def test_the_exported_verifier_scores_the_submission_and_writes_the_reward(task, verifier_hills, tmp_path,
                                                                           score, status, expected):
    target, exported = task
    folder = submission(tmp_path / "submission", {"score.txt": score} if score else {"other.txt": "x\n"})
    home = tmp_path / "verifier-home"
    home.mkdir()
    done = _verify(target, verifier_hills, folder, tmp_path / "logs", home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / "logs" / "reward.json").read_text()) == expected
    report = json.loads((tmp_path / "logs" / "hills-report.json").read_text())
    assert report["status"] == status and report["final"] is True
    assert report["tree_hash"] == exported["tree_hash"] and report["signature"]
    if status != "buggy":  # a crashed evaluator reports no config of its own
        assert {"name": "mode", "value": "holdout", "primary": True} in report["config"]


@pytest.mark.slow
def test_a_submission_that_links_out_of_its_folder_gets_the_failed_reward(task, verifier_hills, tmp_path):
    """The submission reaches for a file outside its folder in the
    verifier's container through a link: hills refuses the link, so the
    reward is the failed one. The control: the same bytes as a plain file
    score."""
    target, _ = task
    outside = tmp_path / "outside.txt"
    outside.write_text("1000\n")
    rewards = {}
    for case in ("link", "plain"):
        folder = tmp_path / case
        folder.mkdir()
        if case == "link":
            (folder / "score.txt").symlink_to(outside)
        else:
            (folder / "score.txt").write_text(outside.read_text())
        home = tmp_path / f"home-{case}"
        home.mkdir()
        done = _verify(target, verifier_hills, folder, tmp_path / f"logs-{case}", home)
        assert done.returncode == 0, done.stdout + done.stderr
        rewards[case] = json.loads((tmp_path / f"logs-{case}" / "reward.json").read_text())
        report = json.loads((tmp_path / f"logs-{case}" / "hills-report.json").read_text())
        if case == "link":
            assert report["status"] != "passing" and "score.txt" in (report["reason"] or ""), report["reason"]
    assert rewards["plain"]["reward"] == 1000.0
    assert rewards["link"]["reward"] == -1.0 and rewards["link"]["passed"] == 0.0


@pytest.mark.slow
def test_a_refused_bundle_writes_no_reward(task, verifier_hills, tmp_path):
    """An edited bundle is refused by hills unbundle: the verifier exits
    non-zero and writes no reward file, so Harbor reports a verifier error
    rather than a score."""
    target, _ = task
    copy = tmp_path / "task"
    subprocess.run(["cp", "-R", str(target), str(copy)], check=True)
    bundle_file = copy / "tests" / f"{NAME}.hillbundle"
    os.chmod(bundle_file, 0o600)
    data = bundle_file.read_bytes()
    needle = PRIVATE["answers.csv"].encode()
    assert data.count(needle) == 1
    bundle_file.write_bytes(data.replace(needle, needle.replace(b"42", b"43")))
    home = tmp_path / "verifier-home"
    home.mkdir()
    folder = submission(tmp_path / "submission", {"score.txt": "7\n"})
    done = _verify(copy, verifier_hills, folder, tmp_path / "logs", home)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "is damaged or was edited" in done.stdout and "no reward written" in done.stdout
    assert not (tmp_path / "logs" / "reward.json").exists()


@pytest.mark.slow
def test_the_readme_example_exports_a_task_harbor_loads(committed_hill, harbor_python):
    """The README's Harbor block: its export line run as written, the task
    it writes loaded by Harbor's own code, and the `harbor run` line (which
    needs Docker, absent here) naming that same task folder."""
    from testing import readme_examples

    export, run = readme_examples.example("harbor").strip().splitlines()
    argv = export.split("#", 1)[0].split()
    assert argv[:3] == ["hills", "export", "harbor"] and argv[3] == committed_hill.name
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    target = Path(argv[argv.index("-o") + 1]).resolve()
    assert run.split("#", 1)[0].split()[:4] == ["harbor", "run", "-p", argv[argv.index("-o") + 1]]
    loaded = subprocess.run([str(harbor_python), "-c", LOADER, str(target)], capture_output=True, text=True,
                            timeout=300)
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    task = json.loads(loaded.stdout)
    assert task["name"] == f"hills/{committed_hill.name}" and task["mode"] == "separate"
