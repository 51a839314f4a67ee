"""hills from Python: the stable API a loop calls instead of a shell line
(docs/api.md). Four calls, `evaluate`, `describe`, `attempts` and
`verify`, each the command line's own path:

- `evaluate` runs `hills eval` as a process of its own, as a shell would,
  and reads its report: the signer must run in an interpreter hills
  controls (docs/confinement.md, "Fail closed"), never in the caller's,
  whose modules, threads and variables hills cannot vouch for. The warm
  server and the service serve it as they serve the command line.
- `describe`, `attempts` and `verify` sign nothing: they read in this
  process, through the functions their commands call, or through the
  service when this machine uses one, as the commands would.

Importing this module loads nothing of hills' own: each call imports what
it needs."""

from __future__ import annotations

import os
import sys
from typing import Any, NamedTuple

from .base.errors import HillsError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from pathlib import Path

# The API's own version: 1 for as long as every name below keeps its meaning
# (docs/api.md, "Versions"). A new keyword or field does not change it.
API_VERSION = 1

__all__ = ["API_VERSION", "Attempts", "HillsError", "Report", "Verification", "attempts", "describe",
           "evaluate", "verify"]

# The statuses a scored report carries (hills-report(5)).
STATUSES = ("passing", "failing", "buggy")


class Report(NamedTuple):
    """One signed report, as `hills eval --json` prints it (`data`), with
    typed views of the fields a loop reads. (A NamedTuple, not a dataclass:
    importing this module must stay as cheap as the interpreter's start.)"""

    data: dict[str, Any]

    def __repr__(self) -> str:
        return f"Report(status={self.status!r}, {self.metric}={self.score!r}, official={self.official!r})"

    @property
    def status(self) -> str:
        """"passing", "failing" or "buggy"."""
        return str(self.data.get("status"))

    @property
    def passed(self) -> bool:
        return self.data.get("passed") is True

    @property
    def official(self) -> bool:
        return self.data.get("official") is True

    @property
    def official_reason(self) -> str | None:
        """Why the report is unofficial (None when it is official)."""
        reason = self.data.get("official_reason")
        return reason if isinstance(reason, str) else None

    @property
    def metrics(self) -> dict[str, float]:
        """Each metric's value by name, in the hill's order (primary first)."""
        return {entry["name"]: entry["value"] for entry in self._metric_entries()}

    @property
    def directions(self) -> dict[str, str]:
        """Each metric's direction by name: "max" or "min"."""
        return {entry["name"]: entry.get("direction", "max") for entry in self._metric_entries()}

    @property
    def metric(self) -> str | None:
        """The primary metric's name: the first the hill declares."""
        entries = self._metric_entries()
        return entries[0]["name"] if entries else None

    @property
    def direction(self) -> str | None:
        """The primary metric's direction, "max" or "min"."""
        entries = self._metric_entries()
        return entries[0].get("direction", "max") if entries else None

    @property
    def score(self) -> float | None:
        """The primary metric's value, as the evaluator gave it; None when
        the report has none (a buggy eval)."""
        entries = self._metric_entries()
        value = entries[0]["value"] if entries else None
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    @property
    def fitness(self) -> float | None:
        """The score oriented so that larger is better (a min metric
        negated), for loops that only maximise; None for a buggy eval, whose
        number, if any, is no score."""
        if self.status == "buggy" or self.score is None:
            return None
        return -self.score if self.direction == "min" else self.score

    @property
    def reason(self) -> str | None:
        """Why the eval failed or was buggy, in the report's words."""
        reason = self.data.get("reason")
        return reason if isinstance(reason, str) and reason else None

    @property
    def details(self) -> dict[str, Any]:
        details = self.data.get("details")
        return details if isinstance(details, dict) else {}

    @property
    def trust(self) -> str | None:
        return self.data.get("trust")

    def json(self) -> str:
        """The report as one line of JSON, byte for byte what `hills eval --json` prints."""
        import json

        return json.dumps(self.data, ensure_ascii=False)

    def _metric_entries(self) -> list[dict[str, Any]]:
        metrics = self.data.get("metrics")
        if not isinstance(metrics, list):
            return []
        return [entry for entry in metrics if isinstance(entry, dict) and isinstance(entry.get("name"), str)]


class Verification(NamedTuple):
    """Whether a report's signature holds (`valid`), why (`message`), who
    signed it (`signer`: this machine, a trusted name, with the key's
    fingerprint) and the trust mode the report claims."""

    valid: bool
    message: str
    signer: str | None = None
    trust: str | None = None

    def __bool__(self) -> bool:
        return self.valid


class Attempts(list):  # a list of attempt rows, as `hills attempts --json` lists them
    """A hill version's attempts, oldest first, each `{number, seq, line,
    report}`; `best` is the best passing report per comparable group,
    `chain_ok` whether the log's chain holds, `data` the whole of
    `hills attempts --json`."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data.get("attempts") or [])
        self.data = data
        self.best: list[dict[str, Any]] = data.get("best") or []
        self.chain_ok: bool = bool((data.get("chain") or {}).get("ok"))


class _Ran(NamedTuple):
    """What one command line of hills ended with."""

    code: int
    stdout: str
    stderr: str = ""
    args: tuple[str, ...] = ()


def evaluate(submission: str | os.PathLike[str], hill: str, *, params: Mapping[str, Any] | None = None,
             final: bool = False, repeat: int = 1, note: str | None = None,
             knobs: Mapping[str, Any] | None = None, force: bool = False, current: bool = False,
             verbose: bool = False) -> Report:
    """Score the submission folder against the hill (a name or a path) and
    return the signed, logged report: the same pipeline, log, signature and
    trust mode as `hills eval SUBMISSION -H HILL --json`, which it runs.
    A failing or buggy eval is a report (read `status` and `reason`); an eval
    refused before it was scored (a dirty hill, a spent budget, a param out
    of range, a sandbox that cannot start) raises HillsError with the
    command's message, hint and exit code, and `report` where one was logged.
    `verbose` streams the evaluator's output to this process's stderr."""
    args = eval_args(submission, hill, params=params, final=final, repeat=repeat, note=note, knobs=knobs,
                     force=force, current=current, verbose=verbose)
    ran = _run_cli(args, stderr_through=verbose)
    report = _report_in(ran.stdout)
    if ran.code in (0, 1) and report is not None:
        return Report(report)
    problem = _error_of(ran)
    if report is not None:
        problem.report = Report(report)  # type: ignore[attr-defined]  # the refused eval's logged report
    raise problem


def eval_args(submission: str | os.PathLike[str], hill: str, *, params: Mapping[str, Any] | None = None,
              final: bool = False, repeat: int = 1, note: str | None = None,
              knobs: Mapping[str, Any] | None = None, force: bool = False, current: bool = False,
              verbose: bool = False) -> list[str]:
    """The `hills eval` command line `evaluate` runs, after `hills`."""
    if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1:
        from .base.errors import UsageError

        raise UsageError(f"repeat must be a whole number of at least 1, got {repeat!r}")
    args = ["eval", os.fspath(submission), "-H", hill, "--json"]
    args += [item for pair in _pairs("params", params) for item in ("-p", pair)]
    args += [item for pair in _pairs("knobs", knobs) for item in ("-k", pair)]
    if repeat != 1:
        args += ["--repeat", str(repeat)]
    if note is not None:
        args += ["-m", note]
    args += [flag for flag, given in (("--final", final), ("--force", force), ("--current", current),
                                      ("-v", verbose)) if given]
    return args


def describe(hill: str) -> dict[str, Any]:
    """What a climber needs of the hill (a name or a path): exactly what
    `hills describe HILL --json` prints."""
    remote = _through_service(["describe", hill, "--json"])
    if remote is not None:
        return _json_or_raise(remote)
    from .disk import hill as hills_on_disk
    from .disk.manifest import ManifestError
    from .views import info

    target = hills_on_disk.resolve(hill)
    try:
        return info.describe(target)
    except ManifestError as exc:
        raise exc.refused(target.name) from None


def attempts(hill: str, *, current: bool = False, tree: str | None = None) -> Attempts:
    """The attempts of the hill's committed version (another version's
    with `tree`, the working tree's unofficial ones with `current`), with its
    best reports and its chain's state: what `hills attempts HILL --json`
    prints. A broken chain is no error here: read `chain_ok`."""
    args = ["attempts", hill, "--json"] + (["--current"] if current else []) + (["--tree", tree] if tree else [])
    remote = _through_service(args)
    if remote is not None:
        return Attempts(_json_or_raise(remote, ok_codes=(0, 1)))
    from .disk import hill as hills_on_disk
    from .views import attempts as attempts_view

    return Attempts(attempts_view.collect(hills_on_disk.resolve(hill), current=current, tree_hash=tree))


def verify(report: Report | Mapping[str, Any] | str | Path) -> Verification:
    """Whether the report's signature holds, by this machine's key or one
    it trusts (`hills trust add`): a Report, the report's dict, or the path
    of a report file. Never creates a key."""
    data, path = _report_and_path(report)
    if path is not None or data is not None:
        remote = _verify_through_service(data, path)
        if remote is not None:
            return remote
    from .evidence import signing
    from .evidence import verify as verifying

    if data is None:
        try:
            data = signing.load_report(str(path))
        except HillsError as exc:
            return Verification(False, exc.message)
    found = verifying.verdict(data)
    if not found.ok:
        return Verification(False, found.reason, trust=data.get("trust"))
    return Verification(True, "signature valid", verifying.signer_text(found, data), data.get("trust"))


def _report_and_path(report: object) -> tuple[dict[str, Any] | None, str | None]:
    if isinstance(report, Report):
        return dict(report.data), None
    if isinstance(report, (str, os.PathLike)):
        return None, os.fspath(report)
    if isinstance(report, dict) or hasattr(report, "keys"):
        return dict(report), None  # type: ignore[call-overload]
    from .base.errors import UsageError

    raise UsageError(f"verify takes a Report, a report's dict or a report file's path, got {type(report).__name__}")


def _verify_through_service(data: dict[str, Any] | None, path: str | None) -> Verification | None:
    """The service's verdict on the report, when this machine uses one."""
    if _service_socket() is None:
        return None
    import json
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hills-verify-") as folder:
        if path is None:
            path = os.path.join(folder, "report.json")
            with open(path, "w", encoding="utf-8") as handle:
                json.dump(data, handle, ensure_ascii=False)
        ran = _run_cli(["verify", path])
    lines = ran.stdout.splitlines()
    if ran.code == 0 and lines:
        signer = next((line.split(":", 1)[1].strip() for line in lines if line.strip().startswith("key:")), None)
        # The trust mode the report claims, which the service's verdict just held to its key.
        claimed = data if data is not None else _loaded(path)
        return Verification(True, "signature valid", signer, claimed.get("trust") if claimed else None)
    if ran.code == 1 and lines:
        return Verification(False, lines[0].removeprefix("signature INVALID: "))
    raise _error_of(ran)


def _loaded(path: str) -> dict[str, Any] | None:
    import json

    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _pairs(what: str, given: Mapping[str, Any] | None) -> Iterable[str]:
    """NAME=VALUE for each entry, the value as the command line spells it."""
    if not given:
        return []
    if not hasattr(given, "items"):
        from .base.errors import UsageError

        raise UsageError(f"{what} must be a mapping of NAME to value, got {type(given).__name__}")
    pairs = []
    for name, value in given.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, float):
            text = repr(value)
        else:
            text = str(value)
        pairs.append(f"{name}={text}")
    return pairs


def _service_socket() -> str | None:
    from .service import client

    return client.service_socket()


def _through_service(args: list[str]) -> _Ran | None:
    """The command run through the service, when this machine uses one
    for that verb (the command line's own rule); None to read here."""
    from .service import client

    if client.remote_verb("hills", args) is None or client.service_socket() is None:
        return None
    return _run_cli(args)


def _run_cli(args: list[str], stderr_through: bool = False) -> _Ran:
    """`hills ARGS` run as its own process, by the interpreter this hills is
    installed in, its output read here; `stderr_through` copies its stderr
    to this process's as it comes."""
    import subprocess

    command = [sys.executable, "-m", "hills", *args]
    try:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        from .base.errors import EnvironmentProblem

        raise EnvironmentProblem(f"cannot start '{sys.executable} -m hills': {exc.strerror or exc}") from None
    with child:
        if stderr_through:
            import threading

            said: list[bytes] = []
            reader = threading.Thread(target=_copy_lines, args=(child.stderr, said), daemon=True)
            reader.start()
            stdout = child.stdout.read() if child.stdout else b""
            reader.join()
            stderr = b"".join(said)
        else:
            stdout, stderr = child.communicate()
        code = child.wait()
    if code == 130:
        raise KeyboardInterrupt
    return _Ran(code, stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace"), tuple(args))


def _copy_lines(stream: Any, said: list[bytes]) -> None:
    for line in iter(stream.readline, b""):
        said.append(line)
        sys.stderr.write(line.decode("utf-8", "replace"))
        sys.stderr.flush()


def _report_in(stdout: str) -> dict[str, Any] | None:
    """The report `hills eval --json` printed, if it printed one."""
    import json

    text = stdout.strip()
    if not text.startswith("{"):
        return None
    try:
        report = json.loads(text.splitlines()[-1] if "\n" in text else text)
    except ValueError:
        return None
    return report if isinstance(report, dict) else None


def _json_or_raise(ran: _Ran, ok_codes: tuple[int, ...] = (0,)) -> dict[str, Any]:
    import json

    if ran.code in ok_codes:
        try:
            value = json.loads(ran.stdout)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
    raise _error_of(ran)


def _error_of(ran: _Ran) -> HillsError:
    """The command's own error (its `error:` and `hint:` lines), as the
    kind of HillsError that exits as it did, with its exit code."""
    from .base import errors

    message = hint = None
    for line in ran.stderr.splitlines():
        if line.startswith("error: ") and message is None:
            message = line.removeprefix("error: ")
        elif line.startswith("hint: ") and hint is None:
            hint = line.removeprefix("hint: ")
    if message is None:
        last = ran.stderr.strip().splitlines()[-1:] or ["no message"]
        message = f"'hills {' '.join(ran.args[:1])}' ended with exit {ran.code}: {last[0]}"
    kinds: dict[int, type[HillsError]] = {errors.EXIT_USAGE: errors.UsageError, errors.EXIT_NO: errors.Refused,
                                          errors.EXIT_NOT_SCORED: errors.NotScored,
                                          errors.EXIT_ENVIRONMENT: errors.EnvironmentProblem}
    problem = kinds.get(ran.code, HillsError)(message, hint)
    problem.exit_code = ran.code
    return problem
