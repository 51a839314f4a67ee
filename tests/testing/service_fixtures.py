"""A real evaluation service for tests that need root: users made with
useradd, `hills setup service` run as root, `hills serve` started as the
service user, and every caller acting through runuser with an
environment of its own."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import shlex
import signal
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("useradd", "userdel", "runuser")
# Where they are: root's PATH may leave out the sbin folders.
SBIN_PATH = os.pathsep.join([os.environ.get("PATH", os.defpath), "/usr/sbin", "/sbin"])


def tool(name: str) -> str:
    return shutil.which(name, path=SBIN_PATH) or name


def _traversable(path: str) -> bool:
    """Whether every folder above `path` lets any user through."""
    current = os.path.dirname(path)
    while current not in ("/", ""):
        if not os.stat(current).st_mode & 0o001:
            return False
        current = os.path.dirname(current)
    return True


def python_for_others() -> tuple[list[str], dict[str, str]] | None:
    """An interpreter other users can start that imports this checkout of
    hills and its dependencies: this one, or the system's of the same
    version with the environment's packages on PYTHONPATH."""
    # Only the folders the link leads through are looked at: the venv's
    # interpreter itself is what runs.
    executable = sys.executable
    packages = sysconfig.get_paths()["purelib"]
    if _traversable(os.path.realpath(executable)) and _traversable(packages + "/x"):
        return [sys.executable], {"PYTHONPATH": str(REPO_ROOT)}
    system = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    if os.path.exists(system) and _traversable(packages + "/x") and _traversable(str(REPO_ROOT / "x")):
        return [_venv_for_others(system, packages)], {}
    return None


def _venv_for_others(system: str, packages: str) -> str:
    """The interpreter of a venv of `system`, made once in /tmp, whose
    site-packages names this checkout and `packages` in a .pth file: not
    PYTHONPATH, which a hills command drops (hills.base.startup), and which
    the processes hills starts (tune's trials, a warm server) would lack."""
    import hashlib

    digest = hashlib.sha256(f"{system}\0{REPO_ROOT}\0{packages}".encode()).hexdigest()[:12]
    folder = Path("/tmp") / f"hills-others-{digest}"  # where every user can reach it
    python = folder / "bin" / "python"
    if not python.exists():
        subprocess.run([system, "-m", "venv", "--without-pip", str(folder)], check=True, capture_output=True)
        site = folder / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
        (site / "hills-checkout.pth").write_text(f"{REPO_ROOT}\n{packages}\n")
        for path in [folder, *folder.rglob("*")]:
            if not path.is_symlink():
                path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
    return str(python)


def skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "the service tests create users and run as them: they need root"
    missing = [name for name in TOOLS if shutil.which(name, path=SBIN_PATH) is None]
    if missing:
        return f"the service tests need {', '.join(missing)} (util-linux, passwd)"
    if python_for_others() is None:
        return ("no interpreter other users can start imports hills here (this one lies in a folder only "
                "root may enter, and there is no system python of the same version)")
    return None


needs_root = pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def report(self) -> dict:
        return json.loads(self.out)


def make_user(name: str) -> str:
    subprocess.run([tool("useradd"), "--create-home", "--shell", "/bin/sh", name], check=True, capture_output=True)
    return name


def remove_user(name: str, wait_s: float = 45.0) -> None:
    """userdel, once the user's last process is gone (an evaluator the
    tests left to run out its sleep); forced past `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        done = subprocess.run([tool("userdel"), "--remove", name], capture_output=True, text=True)
        if done.returncode == 0 or "does not exist" in done.stderr:
            return
        if time.monotonic() > deadline:
            subprocess.run([tool("userdel"), "--force", "--remove", name], capture_output=True)
            return
        time.sleep(0.5)


def home_of(user: str) -> str:
    import pwd

    return pwd.getpwnam(user).pw_dir


class Service:
    """One service and its users, under `base`."""

    def __init__(self, base: Path) -> None:
        tag = uuid.uuid4().hex[:5]
        self.base = base
        self.user = f"hsv{tag}"
        self.admin = f"hsa{tag}"
        self.climber = f"hsc{tag}"
        self.outsider = f"hso{tag}"
        self.state = base / "state"
        self.socket = base / "run" / "hills.sock"
        self.client_config = base / "etc" / "service.json"
        self.process: subprocess.Popen | None = None
        python = python_for_others()
        assert python is not None
        self.python, self.python_env = python

    def env(self, user: str, **extra: str) -> dict[str, str]:
        home = home_of(user)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "PYTHONDONTWRITEBYTECODE": "1",
               "HILLS_WARM": "off",
               "HILLS_SERVICE_CONFIG": str(self.client_config), "HILLS_HOME": f"{home}/hills-home",
               "GIT_AUTHOR_NAME": "Hills Test", "GIT_AUTHOR_EMAIL": "test@hills.invalid",
               "GIT_COMMITTER_NAME": "Hills Test", "GIT_COMMITTER_EMAIL": "test@hills.invalid",
               "GIT_CONFIG_NOSYSTEM": "1", **self.python_env}
        env.update(extra)
        return env

    def argv(self, user: str, argv: list[str], **extra: str) -> list[str]:
        env = [f"{key}={value}" for key, value in self.env(user, **extra).items()]
        return [tool("runuser"), "-u", user, "--", "env", "-i", *env, *argv]

    def hills(self, user: str, *args: str, cwd: str | None = None, input: str | None = None,
              timeout: float = 180, **extra: str) -> Run:
        """`hills ARGS` as `user`, from its home (or `cwd`)."""
        done = subprocess.run(self.argv(user, [*self.python, "-m", "hills", *args], **extra),
                              cwd=cwd or home_of(user), input=input, capture_output=True, text=True,
                              timeout=timeout)
        return Run(done.returncode, done.stdout, done.stderr)

    def shell(self, user: str, script: str, **extra: str) -> Run:
        done = subprocess.run(self.argv(user, ["/bin/sh", "-c", script], **extra), cwd=home_of(user),
                              capture_output=True, text=True, timeout=120)
        return Run(done.returncode, done.stdout, done.stderr)

    def start(self, command: list[str] | None = None) -> None:
        """`hills serve` as the service user (or `command`, a python argv that
        serves the same state), once its socket is there."""
        command = command or ["-m", "hills", "serve", "--state", str(self.state)]
        log = open(self.base / "serve.log", "ab")
        self.process = subprocess.Popen(
            self.argv(self.user, [*self.python, *command], HOME=str(self.state), HILLS_HOME=""),
            cwd="/", stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + 30
        while not self.socket.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("hills serve did not start: " + (self.base / "serve.log").read_text())
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self.process is not None:
            # runuser may end before the service it started has finished
            # its way out: stopped means every process of the group is gone.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    os.killpg(self.process.pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)

    def log_lines(self, hill: str) -> list[dict]:
        """The service's attempts log lines of a hill's committed versions (root reads them)."""
        lines = []
        for folder in sorted((self.state / "home" / "state").glob(f"{hill}@*")):
            log = folder / "attempts.jsonl"
            if log.exists():
                for line in log.read_text().splitlines():
                    if line.endswith("}"):
                        lines.append(json.loads(line))
        return lines


# The evaluator of the service tests' hills: it reads the held-out secret
# (so it scores only where the vault is), scores answer.txt, and with a
# file `sleep` in the submission sleeps that many seconds first.
EVALUATOR = '''\
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def eval(submission, *, final=False):
    submission = Path(submission)
    secret = (HERE / "private" / "secret.txt").read_text()
    pause = submission / "sleep"
    if pause.exists():
        time.sleep(float(pause.read_text() or "1"))
    value = float((submission / "answer.txt").read_text())
    config = [{"name": "mode", "value": "holdout" if final else "validation", "primary": True}]
    return {"passed": True, "metrics": [{"name": "value", "value": value, "direction": "max"}],
            "config": config, "details": {"secret_words": len(secret.split())},
            "report": {"picture": {"box": [-10, -10, 10, 10], "circles": [[0, 0, min(abs(value), 9)]]}}}
'''


HILL_TEST = '''\
from pathlib import Path

import eval as evaluator


def test_the_example_scores(tmp_path):
    (tmp_path / "answer.txt").write_text("3")
    assert evaluator.eval(tmp_path)["metrics"][0]["value"] == 3
'''


@contextlib.contextmanager
def running_service(prefix: str) -> Iterator[Service]:
    """A real service, set up by `hills setup service` for an admin, a
    climber and an outsider made for it, and started; stopped, its users
    removed and its folder gone after. The folder is its own, not pytest's:
    every user must reach the socket through its parents, and a concurrent
    pytest prunes its old ones."""
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    os.chmod(base, 0o755)
    svc = Service(base)
    for user in (svc.admin, svc.climber, svc.outsider):
        make_user(user)
    try:
        done = subprocess.run(
            ["env", f"HILLS_SERVICE_CONFIG={svc.client_config}",
             f"HILLS_SYSTEMD_RUNNING={base / 'no-systemd'}", *svc.python, "-m", "hills", "setup", "service",
             "--user", svc.user, "--state", str(svc.state), "--socket", str(svc.socket),
             "--admin", svc.admin, "--climber", svc.climber],
            capture_output=True, text=True, env={**os.environ, **svc.python_env})
        assert done.returncode == 0, done.stderr
        svc.start()
        yield svc
    finally:
        svc.stop()
        for user in (svc.admin, svc.climber, svc.outsider, svc.user):
            remove_user(user)
        shutil.rmtree(base, ignore_errors=True)


def make_hill(service: Service, user: str, name: str, budget: int | None = None,
              extra_env: dict[str, str] | None = None) -> Run:
    """Create hill `name` as `user` in its project and commit it (through
    the service when `extra_env` leaves it on)."""
    project = Path(home_of(user)) / "project"
    extra_env = extra_env or {}
    made = service.shell(user, f"mkdir -p {project} && cd {project} && "
                               f"{shlex.join(service.python)} -m hills new {name}", **extra_env)
    assert made.code == 0, made.err
    hill = project / ".hills" / name
    (hill / "README.md").write_text(f"# {name}\n\nWrite a number in answer.txt; larger is better.\n")
    (hill / "eval.py").write_text(EVALUATOR)
    for test in (hill / "tests").glob("test_*.py"):
        test.unlink()
    (hill / "tests" / "test_eval.py").write_text(HILL_TEST)
    private = hill / "private"
    private.mkdir(exist_ok=True)
    (private / "secret.txt").write_text("the held-out phrase is quartz-lantern-9137 and nothing else\n")
    manifest = (hill / "hill.yaml").read_text()
    assert "outputs: [answer.txt]" in manifest
    # The scoring phase sees the solution phase's outputs only: `sleep` too.
    (hill / "hill.yaml").write_text(manifest.replace("outputs: [answer.txt]", 'outputs: [answer.txt, "sleep*"]'))
    if budget is not None:
        with open(hill / "hill.yaml", "a", encoding="utf-8") as handle:
            handle.write(f"final:\n  budget: {budget}\n")
    subprocess.run(["chown", "-R", f"{user}:{user}", str(hill)], check=True)
    return service.hills(user, "commit", name, "-m", "first", cwd=str(project), **extra_env)


def submission(service: Service, user: str, name: str, answer: str = "7", sleep: float | None = None) -> str:
    folder = Path(home_of(user)) / name
    folder.mkdir(exist_ok=True)
    (folder / "answer.txt").write_text(answer + "\n")
    if sleep is not None:
        (folder / "sleep").write_text(str(sleep))
    subprocess.run(["chown", "-R", f"{user}:{user}", str(folder)], check=True)
    return str(folder)


def dedent(text: str) -> str:
    return textwrap.dedent(text)


# A client that speaks the protocol by hand, run as a caller: it sends the
# request record it is given (not one the CLI would build), streams the
# folders and files named, and prints every record of the answer.
RAW_CLIENT = '''\
import json, socket, sys, time
from hills.service import protocol

spec = json.load(sys.stdin)
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(spec["socket"])
conn = protocol.Connection(sock)
out = []
try:
    try:
        conn.record(spec["request"])
    except protocol.Closed:
        pass
    answer = conn.receive_record(time.monotonic() + 60)
    out.append(answer)
    if answer["type"] == "accepted":
        for kind, path in spec.get("streams", []):
            (protocol.send_folder if kind == "dir" else protocol.send_file)(conn, path)
        conn.record({"type": "run"})
        for kind, payload in protocol.frames(conn):
            if kind == protocol.RECORD:
                out.append(json.loads(payload))
            elif kind != protocol.DATA:
                out.append({"type": "frame", "kind": kind.decode(), "text": payload.decode("utf-8", "replace")})
except protocol.ProtocolError as exc:
    out.append({"type": "broken", "message": exc.message})
print(json.dumps(out))
'''

# Bytes as they are, from a caller: what comes back before the service
# closes, and how long that took.
RAW_BYTES = '''\
import json, socket, sys, time
spec = json.load(sys.stdin)
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(spec["socket"])
sock.settimeout(spec["timeout"])
started = time.monotonic()
sock.sendall(bytes.fromhex(spec["payload"]))
chunks = []
try:
    while chunk := sock.recv(65536):
        chunks.append(chunk)
except OSError as exc:
    chunks.append(b"")
print(json.dumps({"answer": b"".join(chunks).hex(), "seconds": time.monotonic() - started}))
'''


def raw_request(service: Service, user: str, request: dict, streams: list | None = None) -> list[dict]:
    """The records the service answers `request` from `user`, sent by hand."""
    spec = {"socket": str(service.socket), "request": request, "streams": streams or []}
    done = subprocess.run(service.argv(user, [*service.python, "-c", RAW_CLIENT]), cwd=home_of(user),
                          input=json.dumps(spec), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def raw_bytes(service: Service, user: str, payload: bytes, timeout: float = 30.0) -> tuple[bytes, float]:
    """What the service answers `payload` from `user`, and after how many seconds it closed."""
    spec = {"socket": str(service.socket), "payload": payload.hex(), "timeout": timeout}
    done = subprocess.run(service.argv(user, [*service.python, "-c", RAW_BYTES]), cwd=home_of(user),
                          input=json.dumps(spec), capture_output=True, text=True, timeout=timeout + 60)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    return bytes.fromhex(answer["answer"]), answer["seconds"]


def error_of(answer: bytes) -> dict:
    """The error record a raw answer ends with (the only record of a refusal)."""
    import struct

    kind, length = struct.unpack(">cI", answer[:5])
    assert kind == b"R", answer[:40]
    record = json.loads(answer[5:5 + length])
    assert record["type"] == "error", record
    return record


def request(verb: str, **fields: object) -> dict:
    """A request record of this protocol's version."""
    from hills.service import protocol

    return {"type": "request", "version": protocol.VERSION, "verb": verb, "fields": fields}
