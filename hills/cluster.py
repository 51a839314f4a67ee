"""Evals on a Ray cluster (`--on ray[://ADDRESS]`): the head ships the hill
as a bundle, each eval is one Ray task that runs the node's own `hills eval`
and returns the report its node signed, and the head verifies every report
against the keys it trusts before appending it to its own attempts log and
notes. docs/cluster.md has the design and the threat model."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import shutil
import queue
import tarfile
import tempfile
import threading
import time
from .base.errors import leave_now
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .base import startup, state
from .evidence import chain, report as report_module, signing, trust
from .run import evaluate, logbook, pinned, snapshot
from .run.plan import check_note, is_dirty, resolve_knobs, resolve_params
from .base.errors import (EXIT_BUG, EXIT_ENVIRONMENT, EXIT_INTERRUPTED, EXIT_NO, EXIT_OK, EnvironmentProblem,
                          HillsError, NotScored, UsageError)
from .disk.hill import Hill

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .disk.manifest_types import Manifest

INSTALL_HINT = "install the extra on this machine and every node: pip install 'hills[ray]'"
Say = Callable[[str], None]
# The node workers (one Ray actor per CPU, or per GPU for a GPU hill) outlive
# the command that started them, so that the next command's evals do not
# wait for Ray to start worker processes; each exits after this many seconds
# without an eval (HILLS_CLUSTER_IDLE_S on the head overrides it).
IDLE_S = 600.0
IDLE_ENV = "HILLS_CLUSTER_IDLE_S"
NAMESPACE = "hills"
# How long a head keeps finding a slot's node worker exiting or dead before
# it counts the eval as lost (one Ray cannot place yet is waited for, as a
# task would wait for a free CPU).
CLAIM_S = 30.0
# Whether a node worker refuses to sign when it started with a variable
# that steers its interpreter (a switch only the tests turn off).
STARTED_CLEAN = True


def idle_seconds() -> float:
    """How long the node workers this head uses wait for an eval before they exit."""
    given = os.environ.get(IDLE_ENV, "").strip()
    if not given:
        return IDLE_S
    try:
        value = float(given)
    except ValueError:
        raise UsageError(f"{IDLE_ENV}='{given}': expected a number of seconds") from None
    if value < 0:
        raise UsageError(f"{IDLE_ENV}='{given}': expected a number of seconds, 0 or more")
    return value


def address_of(on: str) -> str:
    """The address ray.init joins for `--on VALUE`: `ray` is the cluster Ray
    finds itself (RAY_ADDRESS, else the one `ray start` made here),
    `ray://HOST:PORT` the cluster whose head listens there."""
    if on == "ray":
        return os.environ.get("RAY_ADDRESS") or "auto"
    host, colon, port = on[len("ray://"):].rpartition(":")
    if on.startswith("ray://") and colon and host and port.isdigit():
        return f"{host}:{port}"
    raise UsageError(f"--on '{on}': expected 'ray' or 'ray://HOST:PORT'",
                     hint="for example --on ray://10.0.0.1:6379, the address 'ray start --head' printed")


def _reachable(address: str) -> None:
    """Refuse an address where nothing listens, at once: Ray itself keeps
    trying to join it for minutes."""
    import socket

    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except OSError as exc:
        raise EnvironmentProblem(f"cannot join the Ray cluster at '{address}': nothing answers there ({exc})",
                                 hint="start its head with 'ray start --head --port PORT' on that machine, "
                                      "and pass the address it prints") from None


# Whether the head joins the cluster from '/' (a switch only the tests turn off).
NO_DRIVER_PATHS = True


@contextlib.contextmanager
def _no_driver_paths() -> Iterator[None]:
    """ray.init gives every worker of this job its driver's current folder
    (and the script's folder, when on sys.path) at the front of sys.path:
    a node worker the head starts would import `hills` itself, or any
    module not yet imported, from wherever the head's caller ran `hills
    eval`. So the head joins from '/', which only root may write, with
    the script's folder out of sys.path for that call."""
    if not NO_DRIVER_PATHS:
        yield
        return
    import sys

    saved_cwd, saved_path = os.getcwd(), list(sys.path)
    script = os.path.dirname(os.path.realpath(sys.argv[0])) if sys.argv and sys.argv[0] else None
    os.chdir("/")
    sys.path[:] = [folder for folder in sys.path if folder != script]
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        sys.path[:] = saved_path


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise EnvironmentProblem("--on ray needs Ray, which is not installed", hint=INSTALL_HINT) from None
    _errors_to_stderr(ray)
    return ray


def _errors_to_stderr(ray: Any) -> None:
    """Ray's driver prints the cluster's error messages (a worker that died)
    on stdout, where the reports go: send them to stderr. A Ray without
    that function keeps its own ways."""
    worker = getattr(getattr(ray, "_private", None), "worker", None)
    original = getattr(worker, "print_to_stdstream", None)
    if original is None or getattr(original, "hills_stderr", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        original(dict(data, is_err=True), ignore_prefix)

    setattr(to_stderr, "hills_stderr", True)
    setattr(worker, "print_to_stdstream", to_stderr)


@dataclasses.dataclass(frozen=True)
class Job:
    """One eval the head asks of the cluster."""

    submission: str
    param_texts: tuple[str, ...] = ()
    knobs: tuple[str, ...] | Mapping[str, Any] | None = None
    final: bool = False
    repeat: int | None = None
    note: str | None = None  # -m TEXT, in the started entry and the node's report


@dataclasses.dataclass(frozen=True)
class Result:
    """How one job ended at the head: the report it accepted (None when none
    came back, or it was refused), the exit code, the line stdout gets, and
    the error to tell."""

    job: Job
    report: dict[str, Any] | None
    exit_code: int
    line: dict[str, Any]
    message: str | None = None
    hint: str | None = None


def _no_report(job: Job, status: str, reason: str, exit_code: int, hint: str | None = None) -> Result:
    line = {"submission": job.submission, "status": status, "passed": False, "reason": reason}
    return Result(job, None, exit_code, line, reason, hint)


class Session:
    """One hill version on one Ray cluster: the pinned version, the bundle
    in the object store, the keys that check the nodes' reports."""

    def __init__(self, hill: Hill, on: str, say: Say) -> None:
        self.hill, self.say = hill, say
        address = address_of(on)
        # Importing Ray takes a while: it runs beside the head's own work
        # (pinning the version, the keys, the bundle).
        imported: dict[str, Any] = {}

        def load() -> None:
            try:
                imported["ray"] = import_ray()
            except BaseException as exc:
                imported["error"] = exc

        loader = threading.Thread(target=load, name="hills-import-ray", daemon=True)
        loader.start()

        def loaded() -> Any:
            loader.join()
            if "error" in imported:
                raise imported["error"]
            return imported["ray"]

        try:
            self.commit, self.tree_hash, self.spec = _pinned(hill)
            self.key = trust.machine_keys(for_signing=True)
            self.allowed = trust.trusted()
            self.log = logbook.attempts_path(hill.name, self.tree_hash)
            self.idle_s = idle_seconds()
            bundled = _bundle_bytes(hill)
        except BaseException:
            loaded()  # without Ray, that is what to say first
            raise
        ray = loaded()
        self.ray = ray
        self._lock = threading.Lock()
        self._inflight: dict[Any, Any] = {}
        self._stopping = False
        if address != "auto":
            _reachable(address)
        try:
            import logging

            with _no_driver_paths():
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING, namespace=NAMESPACE)
        except (ConnectionError, RuntimeError) as exc:  # RuntimeError: a cluster of another Ray or Python version
            raise EnvironmentProblem(f"cannot join the Ray cluster at '{address}': {exc}",
                                     hint="start one with 'ray start --head --port 6379' and pass "
                                          "--on ray://HOST:6379") from None
        try:
            gpu = self.spec["exclusive"] == "gpu"
            if gpu and ray.cluster_resources().get("GPU", 0) < 1:
                # Ray would hold the task until a GPU joins, which may be never.
                raise EnvironmentProblem(f"hill '{hill.name}' needs a GPU for each eval (exclusive: gpu), and the "
                                         "Ray cluster has none", hint="start a node with a GPU: ray start "
                                                                      "--address HEAD:PORT --num-gpus 1")
            self._bundle_ref = ray.put(bundled)
            self._kind = "gpu" if gpu else "cpu"
            self._worker_class = ray.remote(NodeWorker)
            self._worker_options = {"num_cpus": 0 if gpu else 1, "num_gpus": 1 if gpu else 0, "max_restarts": 0,
                                    "max_task_retries": 0, "lifetime": "detached", "namespace": NAMESPACE,
                                    "get_if_exists": True}
            # Slot i is the node worker named hills-KIND-i, shared by every
            # head: as many as the cluster has CPUs (GPUs), so that together
            # they never ask for more than it holds.
            self._free: queue.LifoQueue[int] = queue.LifoQueue()
            for index in reversed(range(self.slots())):
                self._free.put(index)
        except BaseException:
            ray.shutdown()
            raise

    def close(self) -> None:
        self.ray.shutdown()

    def slots(self) -> int:
        """How many evals the cluster runs at once: its CPUs, or its GPUs
        for a hill that takes one per eval."""
        resources = self.ray.cluster_resources()
        return max(1, int(resources.get("GPU" if self.spec["exclusive"] == "gpu" else "CPU", 1)))

    def cancel(self) -> None:
        """Stop every eval in flight (an interrupt at the head): each job
        still running ends as interrupted, with no retry. The node workers
        running them are killed, and with them the evaluators (a later
        command starts new ones); their own logs keep the started entries,
        abandoned."""
        with self._lock:
            self._stopping = True
            workers = list(self._inflight.values())
        for worker in workers:
            try:
                self.ray.kill(worker, no_restart=True)
            except Exception:  # a worker that has just died cannot be killed
                pass

    def run(self, job: Job) -> Result:
        """Run one job on the cluster, retried once when its node is lost;
        safe to call from several threads."""
        if self._stopping:
            return _no_report(job, "interrupted", f"the eval of '{job.submission}' was not sent (interrupted)",
                              EXIT_INTERRUPTED)
        try:
            prepared = _Prepared.make(self, job)
        except HillsError as exc:
            return _no_report(job, "refused", exc.message, exc.exit_code, exc.hint)
        try:
            start = self._started(prepared)
        except HillsError as exc:
            shutil.rmtree(prepared.folder, ignore_errors=True)
            return _no_report(job, "refused", exc.message, exc.exit_code, exc.hint)
        shutil.rmtree(prepared.folder, ignore_errors=True)
        for attempt in (1, 2):
            answer, lost = self._ask(prepared)
            if self._stopping:
                return _no_report(job, "interrupted", f"the eval of '{job.submission}' was stopped (interrupted)",
                                  EXIT_INTERRUPTED)
            if lost is None:
                return self._settle(prepared, answer, start)
            self._note("lost", prepared, start, reason=lost, attempt=attempt)
            if attempt == 1:
                self.say(f"hills: a node was lost during the eval of '{job.submission}' ({lost}); "
                         "logged, retrying it once on another worker")
        return _no_report(job, "lost", f"the eval of '{job.submission}' was lost twice: {lost}", EXIT_ENVIRONMENT,
                          "see 'ray status': the cluster may have too few live nodes")

    def _ask(self, prepared: _Prepared) -> tuple[dict[str, Any] | None, str | None]:
        """(the node's answer, None), or (None, why it was lost)."""
        ray = self.ray
        index = self._free.get()
        try:
            try:
                worker = self._claim(index)
            except EnvironmentProblem as exc:  # no live worker: a loss like any other, logged and retried
                return None, exc.message
            if worker is None:
                return None, "interrupted"
            with self._lock:
                if self._stopping:
                    return None, "interrupted"
                ref = worker.eval.remote(self.hill.name, self.tree_hash, [self._bundle_ref], prepared.archive,
                                         prepared.options,
                                         {"host": os.uname().nodename, "home": os.path.realpath(state.home())})
                self._inflight[ref] = worker
            try:
                return ray.get(ref), None
            except ray.exceptions.RayTaskError as exc:
                return {"error": f"the node's task failed: {str(exc).strip().splitlines()[-1]}",
                        "exit_code": EXIT_BUG}, None
            except ray.exceptions.RayError as exc:
                # Anything else Ray raises is the cluster's failure, not the eval's:
                # the node worker or its node that died under the eval
                # (ActorDiedError, NodeDiedError), an object lost with it.
                said = str(exc).strip().splitlines()
                return None, type(exc).__name__ + (f": {said[0]}" if said else "")
            finally:
                with self._lock:
                    self._inflight.pop(ref, None)
        finally:
            self._free.put(index)

    def _claim(self, index: int) -> Any:
        """The live node worker of slot `index`, told how long to wait idle
        after this eval: the one a command left (found by name), or a new
        one when it has exited or died. None when interrupted."""
        ray = self.ray
        name = f"hills-{self._kind}-{index}"
        deadline = time.monotonic() + CLAIM_S
        while time.monotonic() < deadline:
            if self._stopping:
                return None
            worker = self._worker_class.options(name=name, **self._worker_options).remote()
            with self._lock:
                ref = worker.claim.remote(self.idle_s)
                self._inflight[ref] = worker  # a worker Ray is still starting is stopped by an interrupt too
            try:
                if ray.get(ref) is not None:
                    return worker
            except ray.exceptions.RayError:
                pass  # it exited or died since: Ray frees its name, and the next try starts one
            finally:
                with self._lock:
                    self._inflight.pop(ref, None)
            time.sleep(0.1)  # it is exiting (idle, or its code was upgraded): wait for its name to be free
        raise EnvironmentProblem(f"the Ray cluster does not keep a node worker '{name}' alive",
                                 hint="see 'ray status' and 'ray list actors --filter namespace=hills'")

    def _started(self, prepared: _Prepared) -> dict[str, Any]:
        """The `started` entry of the head's log for one job, appended before
        it is sent (so a job never answered is counted), under the holdout
        budget's lock when it is a --final one."""
        job, spec = prepared.job, self.spec
        if job.final and spec["final"].get("mode") == "reusable":
            # Thresholdout's threshold noise is sealed in this machine's
            # state; a node would answer from its own.
            raise NotScored(f"hill '{self.hill.name}' has a reusable holdout (final.mode: reusable): "
                            "its --final evals run on this machine, not --on ray",
                            hint="drop --on for the --final eval")
        pid = os.getpid()
        own = logbook.process_start(pid)
        runs = (job.repeat or spec["replicates"]) * (2 if spec["solution"] else 1) + (1 if spec["unit_tests"] else 0)
        record = {"run_id": None, "hill": self.hill.name, "tree_hash": self.tree_hash, "final": job.final,
                  "submission_hash": prepared.submission_hash, "timestamp": report_module.timestamp(), "pid": pid,
                  "host": os.uname().nodename, "pid_start": own[1] if own else None,
                  "timeout_s": spec["timeout"] * runs, "on": "ray"}
        if job.note is not None:
            record["note"] = job.note
        budget = spec["final"]["budget"] if job.final else None
        if budget is None:
            entry = chain.append(self.log, {"started": signing.clean_text(record)}, self.key)
            return {"seq": entry["seq"], "mac": entry["mac"]}
        with state.file_lock(os.path.join(state.state_dir(self.hill.name, self.tree_hash), "final.lock")):
            used = logbook.final_count(self.hill.name, self.tree_hash, self.key)
            if used >= budget:
                raise NotScored(f"the holdout budget of hill '{self.hill.name}' is spent: {used} of {budget} "
                                f"--final evals used for tree {self.tree_hash[:12]}",
                                hint="evals without --final still score on the validation split")
            entry = chain.append(self.log, {"started": signing.clean_text(record)}, self.key)
        return {"seq": entry["seq"], "mac": entry["mac"]}

    def _note(self, event: str, prepared: _Prepared, start: dict[str, Any], **fields: Any) -> None:
        """A `cluster` entry in the head's log: a lost node, a refused
        report; `start` names the job's started entry."""
        record = {"event": event, "hill": self.hill.name, "tree_hash": self.tree_hash,
                  "submission": prepared.job.submission, "submission_hash": prepared.submission_hash,
                  "timestamp": report_module.timestamp(), "start": start, **fields}
        chain.append(self.log, {"cluster": signing.clean_text(record)}, self.key)

    def _settle(self, prepared: _Prepared, answer: dict[str, Any] | None, start: dict[str, Any]) -> Result:
        """Verify the node's answer, log an accepted report, and say how the job ended."""
        job = prepared.job
        assert answer is not None
        node = answer.get("node") or {}
        where = node.get("host", "a node")
        report = answer.get("report")
        if not isinstance(report, dict):
            reason = answer.get("error") or f"the node's eval gave no report (exit {answer.get('exit_code')})"
            self._note("failed", prepared, start, node=node, reason=reason)
            code = answer.get("exit_code")
            return _no_report(job, "failed", f"on {where}: {reason}",
                              code if isinstance(code, int) and code != EXIT_OK else EXIT_BUG, answer.get("hint"))
        problem, signer = self._check(prepared, report)
        if problem is not None:
            self._note("rejected", prepared, start, node=node, reason=problem, signer=report.get("signer"))
            hint = (f"if {where} is a node of yours, trust its key on this machine: hills trust add NAME "
                    f"'{node['key']}'") if "does not trust" in problem and node.get("key") else None
            return _no_report(job, "rejected", f"the report from {where} was refused: {problem}", EXIT_NO, hint)
        logged = {"report": report, "start": start, "node": {"host": where, "signer": signer,
                                                             "node_id": node.get("node_id"), "pid": node.get("pid")}}
        with self._lock:
            entry = chain.append(self.log, logged, self.key)
            if report.get("official"):
                logbook.add_note(self.hill.repo, self.commit, report, entry)
        code = EXIT_OK if report.get("status") == "passing" else answer.get("exit_code") or EXIT_NO
        error = answer.get("error")
        return Result(job, report, code, report, f"on {where}: {error}" if error and code != EXIT_OK else None,
                      answer.get("hint"))

    def _check(self, prepared: _Prepared, report: dict[str, Any]) -> tuple[str | None, str | None]:
        """(why the report is refused or None, the trusted name of its signer)."""
        verdict = signing.verify(report, self.key, self.allowed)
        if not verdict.ok:
            return verdict.reason, None
        expected = {"hill": self.hill.name, "tree_hash": self.tree_hash, "commit": self.commit,
                    "submission_hash": prepared.submission_hash, "params": prepared.params,
                    "final": prepared.job.final, "note": prepared.job.note}
        for key, value in expected.items():
            if report.get(key) != value:
                return f"it answers for {key} {report.get(key)!r}, not {value!r}", verdict.signer
        if prepared.trial is not None and report.get("trial") != prepared.trial:
            return f"it answers for knobs {report.get('trial')!r}, not {prepared.trial!r}", verdict.signer
        return None, verdict.signer


@dataclasses.dataclass(frozen=True)
class _Prepared:
    """A job made ready to send: the snapshot of its submission as a tar,
    its hash, the params and knob values the report must name, and the
    eval's options the node passes on."""

    job: Job
    folder: str
    archive: bytes
    submission_hash: str
    params: dict[str, Any]
    trial: dict[str, Any] | None
    options: dict[str, Any]

    @classmethod
    def make(cls, session: Session, job: Job) -> _Prepared:
        if not os.path.isdir(job.submission):
            raise UsageError(f"submission '{job.submission}' is not a folder",
                             hint="a submission is a folder; pass its path")
        params = resolve_params(session.spec, job.param_texts)
        check_note(job.note)
        request = evaluate.EvalRequest(session.hill, job.submission, job.param_texts, final=job.final,
                                       knobs=job.knobs)
        _, trial, _ = resolve_knobs(request)
        folder = tempfile.mkdtemp(prefix="cluster-", dir=_scratch())
        try:
            copy = os.path.join(folder, "submission")
            submission_hash = snapshot.snapshot(job.submission, copy)
            buffer = io.BytesIO()
            with tarfile.open(fileobj=buffer, mode="w") as archive:
                archive.add(copy, arcname="submission")
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        knobs = dict(job.knobs) if isinstance(job.knobs, Mapping) else list(job.knobs) if job.knobs else None
        options = {"params": list(job.param_texts), "knobs": knobs, "final": job.final, "repeat": job.repeat,
                   "note": job.note}
        return cls(job, folder, buffer.getvalue(), submission_hash, params, trial, options)


def _scratch() -> str:
    folder = os.path.join(state.home(), "cluster", "work")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


def _pinned(hill: Hill) -> tuple[str, str, Manifest]:
    """(commit, tree hash, manifest) of the version the cluster scores: HEAD
    of a clean hill, the approved one when a version is pinned."""
    from .disk import pin

    commit = hill.repo.head()
    if commit is None:
        raise NotScored(f"hill '{hill.name}' has no commits yet",
                        hint=f"freeze it first: hills commit {hill.name} -m MESSAGE")
    changed = is_dirty(hill)
    if changed:
        raise NotScored(f"hill '{hill.name}' has uncommitted changes ({', '.join(changed[:3])}"
                        + (", ..." if len(changed) > 3 else "") + "): --on ray scores its last commit only when clean",
                        hint="commit them first")
    tree_hash = pinned.pinned_tree(hill, commit)
    official, reason = pin.official_status(hill, tree_hash)
    if not official:
        raise NotScored(f"--on ray scores only the approved version of hill '{hill.name}': {reason}",
                        hint="a node cannot mark its report unofficial; pin this version, or evaluate it here")
    return commit, tree_hash, pinned.pinned_manifest(hill, tree_hash)


def _bundle_bytes(hill: Hill) -> bytes:
    from .disk import bundle

    folder = tempfile.mkdtemp(prefix="bundle-", dir=_scratch())
    try:
        path = os.path.join(folder, "hill.hillbundle")
        bundle.write(hill, path)
        with open(path, "rb") as handle:
            return handle.read()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# --- on the node -----------------------------------------------------------

class NodeWorker:
    """A Ray actor on a node that runs evals (`eval`, one at a time) for any
    head: detached and named, so that later commands find it; it exits
    itself once idle for the period the last head that claimed it asked
    for, or at its next claim when the hills installed on its node changed
    since it started."""

    CLAIMED_S = 5.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy = False
        self._exiting = False
        self._idle_s = IDLE_S
        self._last = self._claimed = time.monotonic()
        self._stamp = _code_stamp()
        self._parent = os.getppid()  # the node's raylet
        threading.Thread(target=self._watch, name="hills-idle", daemon=True).start()

    def claim(self, idle_s: float) -> int | None:
        """This worker's pid, its idle clock restarted with `idle_s`; None
        when it is exiting (the caller waits for a new one)."""
        with self._lock:
            if not self._exiting and _code_stamp() != self._stamp:
                self._exiting = True
                threading.Thread(target=self._exit, daemon=True).start()
            if self._exiting:
                return None
            self._idle_s, self._last = float(idle_s), time.monotonic()
            self._claimed = self._last
        return os.getpid()

    def eval(self, hill_name: str, tree_hash: str, bundle_holder: list[Any], archive: bytes,
             options: dict[str, Any], head: dict[str, str]) -> dict[str, Any]:
        with self._lock:
            self._busy = True
        try:
            return node_eval(hill_name, tree_hash, bundle_holder, archive, options, head)
        finally:
            with self._lock:
                self._busy, self._last = False, time.monotonic()

    def _watch(self) -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != self._parent:
                leave_now(1)  # the node's Ray is gone: nothing can reach this worker any more
            with self._lock:
                now = time.monotonic()
                # A claimed worker waits for the eval its claim announced, whatever the idle period.
                if not self._busy and not self._exiting and now - self._last >= self._idle_s \
                        and now - self._claimed >= self.CLAIMED_S:
                    self._exiting = True
                    break
        self._exit()

    def _exit(self) -> None:
        import ray

        try:
            ray.kill(ray.get_runtime_context().current_actor, no_restart=True)
        except Exception:
            pass
        time.sleep(2)  # Ray ends this process; if it has not, leave
        leave_now(0)


def _code_stamp() -> tuple[tuple[str, int, int], ...]:
    """The installed hills package as its files' names, sizes and times."""
    root = os.path.dirname(os.path.abspath(__file__))
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                try:
                    info = os.stat(path)
                except OSError:
                    continue
                found.append((os.path.relpath(path, root), info.st_size, info.st_mtime_ns))
    return tuple(sorted(found))


def node_eval(hill_name: str, tree_hash: str, bundle_holder: list[Any], archive: bytes, options: dict[str, Any],
              head: dict[str, str]) -> dict[str, Any]:
    """The Ray task: the hill version from the node's cache (unbundled from
    `bundle_holder[0]` on a miss), the submission unpacked, and the node's
    own eval pipeline run on it, confined and logged as `hills eval` runs
    it there; returns the report the node's key signed and who ran it."""
    import socket

    import ray

    home = os.path.realpath(state.home())
    node = {"host": socket.gethostname(), "node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}
    if head.get("host") == os.uname().nodename and head.get("home") == home:
        return {"node": node, "exit_code": EXIT_ENVIRONMENT,
                "error": f"the Ray worker shares the head's machine state ('{home}'): a node signs with a key "
                         "of its own, so it needs machine state of its own",
                "hint": "start the node's Ray with another HILLS_HOME, e.g. HILLS_HOME=~/.autolab/hills-node "
                        "ray start --address HEAD:PORT"}
    steered = _steered()
    if steered:
        return {"node": node, "exit_code": EXIT_ENVIRONMENT,
                "error": f"the node's Ray worker started with {', '.join(steered)} in its environment: its "
                         "interpreter, which would sign the report, ran under what they name, so this node "
                         "signs none",
                "hint": "start the node's Ray without them (unset them before 'ray start', and in the "
                        "runtime_env of any job that starts hills' node workers), then stop the node workers: "
                        "python -m hills.cluster stop ray://HEAD:PORT"}
    from .base import ed25519
    from .disk.hill import resolve

    keys = trust.machine_keys(for_signing=True)
    node["key"] = ed25519.public_line(keys.public, trust.comment()) if keys.public else None
    work = None
    try:
        hill_dir = cached_hill(hill_name, tree_hash, lambda: ray.get(bundle_holder[0]))
        work = tempfile.mkdtemp(prefix="eval-", dir=_scratch())
        with tarfile.open(fileobj=io.BytesIO(archive)) as unpacked:
            # The "data" filter exists from Python 3.11.4; the tar is the
            # head's snapshot, which holds no link leaving it.
            extract: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            unpacked.extractall(work, **extract)
        knobs = options.get("knobs")
        request = evaluate.EvalRequest(resolve(hill_dir), os.path.join(work, "submission"),
                                       tuple(options.get("params") or ()), final=bool(options.get("final")),
                                       queue=True, repeat=options.get("repeat"),
                                       knobs=tuple(knobs) if isinstance(knobs, list) else knobs,
                                       note=options.get("note"))
        outcome = evaluate.evaluate(request)
    except HillsError as exc:
        return {"node": node, "exit_code": exc.exit_code, "error": exc.message, "hint": exc.hint}
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    return {"node": node, "report": outcome.report, "exit_code": outcome.exit_code, "error": outcome.message,
            "hint": outcome.hint}


def _steered() -> list[str]:
    """The variables this node worker started with that would steer the
    interpreter or the loader (hills.base.startup), or that only hills sets for
    an eval's own processes: deny by default, as a top-level command does.
    A command can start again clean; a Ray worker cannot, and it signs in
    its own process, so it refuses. Read from /proc/self/environ, the
    environment the process started with, which a `sitecustomize` that
    deletes its own PYTHONPATH from os.environ does not change (Ray's own
    in-process settings, PYTHONBREAKPOINT, are not in it either)."""
    if not STARTED_CLEAN:
        return []
    try:
        with open("/proc/self/environ", "rb") as handle:
            names = [item.split(b"=", 1)[0].decode("utf-8", "replace") for item in handle.read().split(b"\0")
                     if item]
    except OSError:
        names = list(os.environ)
    return sorted(set(startup.steering(names)) | set(startup.internal(names)))


def cached_hill(hill_name: str, tree_hash: str, fetch: Callable[[], bytes]) -> str:
    """The folder of the node's copy of a hill version, unbundled from
    `fetch()` (and checked) the first time this node needs that tree."""
    root = os.path.join(state.home(), "cluster", "hills", tree_hash)
    hill_dir = os.path.join(root, ".hills", hill_name)
    os.makedirs(os.path.dirname(root), exist_ok=True)
    with state.file_lock(root + ".lock"):
        if os.path.isfile(os.path.join(hill_dir, "hill.yaml")):
            from .base.git import Repo

            head = Repo(hill_dir).head()
            if head is not None and Repo(hill_dir).tree_of(head) == tree_hash:
                return hill_dir
        from .disk import bundle

        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
        fd, path = state.private_temp(os.path.dirname(root), ".bundle-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(fetch())
            bundle.unbundle(path, root, register=False, expected_tree=tree_hash)
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        finally:
            os.unlink(path)
    return hill_dir


# --- stopping the node workers ---------------------------------------------

def stop_workers(on: str) -> list[str]:
    """Kill the idle and busy node workers of the cluster `--on` names (every
    head's, any hill's); the names of those stopped. Evals running in them
    are lost to their heads, which log and retry them once."""
    import logging

    ray = import_ray()
    address = address_of(on)
    if address != "auto":
        _reachable(address)
    ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING, namespace=NAMESPACE)
    try:
        stopped = []
        for name in sorted(ray.util.list_named_actors()):
            if name.startswith(("hills-cpu-", "hills-gpu-")):
                try:
                    ray.kill(ray.get_actor(name), no_restart=True)
                except ValueError:  # it exited meanwhile
                    continue
                stopped.append(name)
        return stopped
    finally:
        ray.shutdown()


def main(argv: list[str] | None = None) -> int:
    """`python -m hills.cluster stop ray[://HOST:PORT]`: stop the node workers now."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "stop":
        print("usage: python -m hills.cluster stop ray[://HOST:PORT]", file=sys.stderr)
        return 2
    try:
        stopped = stop_workers(args[1])
    except HillsError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    print(f"{len(stopped)} node worker(s) stopped" + (f": {', '.join(stopped)}" if stopped else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
