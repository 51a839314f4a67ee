"""Evals on a Ray cluster (`--on ray[://ADDRESS]`): the head ships the hill
as a bundle, each eval is one Ray task that runs the node's own `hills eval`
and returns the report its node signed, and the head verifies every report
against the keys it trusts before appending it to its own attempts log and
notes. docs/cluster.md has the design and the threat model."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import tarfile
import tempfile
import threading
from collections.abc import Callable, Mapping
from typing import Any

from . import chain, evaluate, report as report_module, signing, snapshot, state, trust
from .errors import (EXIT_BUG, EXIT_ENVIRONMENT, EXIT_INTERRUPTED, EXIT_NO, EXIT_OK, EnvironmentProblem, HillsError,
                     NotScored, UsageError)
from .hill import Hill

INSTALL_HINT = "install the extra on this machine and every node: pip install 'hills[ray]'"
Say = Callable[[str], None]


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
        ray = import_ray()
        self.ray = ray
        self.commit, self.tree_hash, self.spec = _pinned(hill)
        self.key = trust.machine_keys(for_signing=True)
        self.allowed = trust.trusted()
        self.log = evaluate.attempts_path(hill.name, self.tree_hash)
        self._lock = threading.Lock()
        self._inflight: set[Any] = set()
        self._stopping = False
        address = address_of(on)
        if address != "auto":
            _reachable(address)
        try:
            import logging

            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
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
            self._bundle_ref = ray.put(_bundle_bytes(hill))
            self._task = ray.remote(node_eval).options(num_cpus=0 if gpu else 1, num_gpus=1 if gpu else 0,
                                                         max_retries=0)
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
        """Stop every task in flight (an interrupt at the head): each job
        still running ends as interrupted, with no retry. The nodes kill
        their workers, and with them the evaluators; their own logs keep
        the started entries, abandoned."""
        with self._lock:
            self._stopping = True
            refs = list(self._inflight)
        for ref in refs:
            try:
                self.ray.cancel(ref, force=True)
            except Exception:  # a task that has just finished cannot be cancelled
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
            self._note("lost", prepared, reason=lost, attempt=attempt)
            if attempt == 1:
                self.say(f"hills: a node was lost during the eval of '{job.submission}' ({lost}); "
                         "logged, retrying it once on another worker")
        return _no_report(job, "lost", f"the eval of '{job.submission}' was lost twice: {lost}", EXIT_ENVIRONMENT,
                          "see 'ray status': the cluster may have too few live nodes")

    def _ask(self, prepared: _Prepared) -> tuple[dict[str, Any] | None, str | None]:
        """(the node's answer, None), or (None, why it was lost)."""
        ray = self.ray
        with self._lock:
            if self._stopping:
                return None, "interrupted"
            ref = self._task.remote(self.hill.name, self.tree_hash, [self._bundle_ref], prepared.archive,
                                    prepared.options,
                                    {"host": os.uname().nodename, "home": os.path.realpath(state.home())})
            self._inflight.add(ref)
        try:
            return ray.get(ref), None
        except ray.exceptions.RayTaskError as exc:
            return {"error": f"the node's task failed: {str(exc).strip().splitlines()[-1]}",
                    "exit_code": EXIT_BUG}, None
        except ray.exceptions.RayError as exc:
            # Anything else Ray raises is the cluster's failure, not the eval's:
            # a worker or node that died under the task (WorkerCrashedError,
            # NodeDiedError), an object lost with it.
            said = str(exc).strip().splitlines()
            return None, type(exc).__name__ + (f": {said[0]}" if said else "")
        finally:
            with self._lock:
                self._inflight.discard(ref)

    def _started(self, prepared: _Prepared) -> dict[str, Any]:
        """The `started` entry of the head's log for one job, appended before
        it is sent (so a job never answered is counted), under the holdout
        budget's lock when it is a --final one."""
        job, spec = prepared.job, self.spec
        pid = os.getpid()
        own = evaluate.process_start(pid)
        runs = (job.repeat or spec["replicates"]) * (2 if spec["solution"] else 1) + (1 if spec["unit_tests"] else 0)
        record = {"run_id": None, "hill": self.hill.name, "tree_hash": self.tree_hash, "final": job.final,
                  "submission_hash": prepared.submission_hash, "timestamp": report_module.timestamp(), "pid": pid,
                  "host": os.uname().nodename, "pid_start": own[1] if own else None,
                  "timeout_s": spec["timeout"] * runs, "on": "ray"}
        budget = spec["final"]["budget"] if job.final else None
        if budget is None:
            entry = chain.append(self.log, {"started": signing.clean_text(record)}, self.key)
            return {"seq": entry["seq"], "mac": entry["mac"]}
        with state.file_lock(os.path.join(state.state_dir(self.hill.name, self.tree_hash), "final.lock")):
            used = evaluate.final_count(self.hill.name, self.tree_hash, self.key)
            if used >= budget:
                raise NotScored(f"the holdout budget of hill '{self.hill.name}' is spent: {used} of {budget} "
                                f"--final evals used for tree {self.tree_hash[:12]}",
                                hint="evals without --final still score on the validation split")
            entry = chain.append(self.log, {"started": signing.clean_text(record)}, self.key)
        return {"seq": entry["seq"], "mac": entry["mac"]}

    def _note(self, event: str, prepared: _Prepared, **fields: Any) -> None:
        """A `cluster` entry in the head's log: a lost node, a refused report."""
        record = {"event": event, "hill": self.hill.name, "tree_hash": self.tree_hash,
                  "submission": prepared.job.submission, "submission_hash": prepared.submission_hash,
                  "timestamp": report_module.timestamp(), **fields}
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
            self._note("failed", prepared, node=node, reason=reason)
            code = answer.get("exit_code")
            return _no_report(job, "failed", f"on {where}: {reason}",
                              code if isinstance(code, int) and code != EXIT_OK else EXIT_BUG, answer.get("hint"))
        problem, signer = self._check(prepared, report)
        if problem is not None:
            self._note("rejected", prepared, node=node, reason=problem, signer=report.get("signer"))
            hint = (f"if {where} is a node of yours, trust its key on this machine: hills trust add NAME "
                    f"'{node['key']}'") if "does not trust" in problem and node.get("key") else None
            return _no_report(job, "rejected", f"the report from {where} was refused: {problem}", EXIT_NO, hint)
        logged = {"report": report, "start": start, "node": {"host": where, "signer": signer,
                                                             "node_id": node.get("node_id")}}
        with self._lock:
            entry = chain.append(self.log, logged, self.key)
            if report.get("official"):
                note = json.dumps({"report": report, "attempt": {"seq": entry["seq"], "mac": entry["mac"]}},
                                  sort_keys=True, separators=(",", ":"))
                with state.file_lock(os.path.join(self.hill.repo.git_dir, "hills-notes.lock")):
                    self.hill.repo.run("notes", f"--ref={evaluate.NOTES_REF}", "append", "--file=-", self.commit,
                                       input=note)
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
                    "final": prepared.job.final}
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
        params = evaluate.resolve_params(session.spec, job.param_texts)
        request = evaluate.EvalRequest(session.hill, job.submission, job.param_texts, final=job.final,
                                       knobs=job.knobs)
        _, trial, _ = evaluate.resolve_knobs(request)
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
        options = {"params": list(job.param_texts), "knobs": knobs, "final": job.final, "repeat": job.repeat}
        return cls(job, folder, buffer.getvalue(), submission_hash, params, trial, options)


def _scratch() -> str:
    folder = os.path.join(state.home(), "cluster", "work")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


def _pinned(hill: Hill) -> tuple[str, str, dict[str, Any]]:
    """(commit, tree hash, manifest) of the version the cluster scores: HEAD
    of a clean hill, the approved one when a version is pinned."""
    from . import pin

    commit = hill.repo.head()
    if commit is None:
        raise NotScored(f"hill '{hill.name}' has no commits yet",
                        hint=f"freeze it first: hills commit {hill.name} -m MESSAGE")
    changed = evaluate.is_dirty(hill)
    if changed:
        raise NotScored(f"hill '{hill.name}' has uncommitted changes ({', '.join(changed[:3])}"
                        + (", ..." if len(changed) > 3 else "") + "): --on ray scores its last commit only when clean",
                        hint="commit them first")
    tree_hash = evaluate.pinned_tree(hill, commit)
    official, reason = pin.official_status(hill, tree_hash)
    if not official:
        raise NotScored(f"--on ray scores only the approved version of hill '{hill.name}': {reason}",
                        hint="a node cannot mark its report unofficial; pin this version, or evaluate it here")
    return commit, tree_hash, evaluate.pinned_manifest(hill, tree_hash)


def _bundle_bytes(hill: Hill) -> bytes:
    from . import bundle

    folder = tempfile.mkdtemp(prefix="bundle-", dir=_scratch())
    try:
        path = os.path.join(folder, "hill.hillbundle")
        bundle.write(hill, path)
        with open(path, "rb") as handle:
            return handle.read()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# --- on the node -----------------------------------------------------------

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
    from . import ed25519
    from .hill import resolve

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
                                       knobs=tuple(knobs) if isinstance(knobs, list) else knobs)
        outcome = evaluate.evaluate(request)
    except HillsError as exc:
        return {"node": node, "exit_code": exc.exit_code, "error": exc.message, "hint": exc.hint}
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    return {"node": node, "report": outcome.report, "exit_code": outcome.exit_code, "error": outcome.message,
            "hint": outcome.hint}


def cached_hill(hill_name: str, tree_hash: str, fetch: Callable[[], bytes]) -> str:
    """The folder of the node's copy of a hill version, unbundled from
    `fetch()` (and checked) the first time this node needs that tree."""
    root = os.path.join(state.home(), "cluster", "hills", tree_hash)
    hill_dir = os.path.join(root, ".hills", hill_name)
    os.makedirs(os.path.dirname(root), exist_ok=True)
    with state.file_lock(root + ".lock"):
        if os.path.isfile(os.path.join(hill_dir, "hill.yaml")):
            from .git import Repo

            head = Repo(hill_dir).head()
            if head is not None and Repo(hill_dir).tree_of(head) == tree_hash:
                return hill_dir
        from . import bundle

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
