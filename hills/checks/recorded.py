"""The recorded results of the leak probe and the cheat corpus: sixteen
sandboxed evals that give the same verdict while nothing they read has
changed, so `hills check` (and the commit gate) reuse a passing one.

The record is kept in machine state, sealed with the machine key as the
gate's remembered verdicts are (state.sealed_write): submitted code never
sees the key (the leak probe checks exactly that), and a record written or
edited without it is ignored, so nobody can vouch for a tree the checks
never ran on. Its key (`key`) is the digest of everything the two checks
read: every file of the hill's tree and its blobs (the evaluator, tests,
examples, exploits/, hill.yaml, pyproject.toml, uv.lock), the two locks and
the content of private/ (the corpus scores against it), the environment
they ran in (its build digest and its seal, which moves when it is rebuilt
or changed), the hills package by its sources' digest, the interpreter,
uv and bubblewrap, the variables an eval passes on, and what the probe's
payload tries besides (probe.digest_inputs). A failure is never recorded;
a result is recorded only when the key after the checks ran is the key
before, so a file edited while they ran is judged again.
"""

from __future__ import annotations

import json
import os
import stat as stat_module
import time

from ..base import state
from ..base.digests import sha256
from ..base.errors import HillsError
from ..disk import locks, uvenv, verdicts
from ..disk.hill import Hill
from .shared import Result

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

# A new rule for what a key covers is a new version: older records then never match.
KEY_VERSION = 1
# Records kept per hill folder, newest first: a few versions to go back and forth between.
KEPT = 8
# The checks whose results are recorded (probe.NAME, corpus.NAME).
RECORDED = ("leak probe", "cheat corpus")
SUFFIX = " (recorded for this tree on {date})"
PASSING = ("ok", "warn")  # a failure is never recorded: it runs again


def counted_variable(name: str) -> bool:
    """The environment variables the checks read, or that decide what the
    hill's tests import: PATH (a command evaluator, uv) and Python's own."""
    return name == "PATH" or name.startswith("PYTHON")


def search_path() -> str:
    """PATH, less the exec-path git puts first when it runs a hook: it holds
    git's own helpers, which no check looks up, and a verdict of `hills
    commit` holds for the hook of a plain git commit too."""
    path = os.environ.get("PATH", "")
    exec_path = os.environ.get("GIT_EXEC_PATH")
    first, _, rest = path.partition(os.pathsep)
    return rest if exec_path and first == exec_path else path


def file_identity(path: str) -> list[object]:
    """A binary named by path and, since it can be replaced in place, its size and mtime."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return [real, None]
    return [real, st.st_size, st.st_mtime_ns]


def _digests(hill_dir: str, cache: locks.StatCache, rels: Iterable[str]) -> list[list[object]]:
    """[path, executable bit, content digest] of each file, through the stat cache."""
    found: list[list[object]] = []
    for rel in sorted(rels):
        full = os.path.join(hill_dir, rel)
        st = os.stat(full)
        found.append([rel, bool(st.st_mode & stat_module.S_IXUSR), cache.digest(full, st)])
    return found


def key(hill_dir: str, python: str, cache: locks.StatCache) -> str | None:
    """The digest of everything the probe's and the corpus's verdicts
    depend on (the module's docstring), or None when it cannot be known (a
    file that cannot be read, a link in the hill, no uv): then they run."""
    from ..evidence import report
    from ..run import sandbox
    from . import probe
    from .corpus import VERSION as corpus_version

    hill = Hill(hill_dir)
    listing = verdicts.listing_of(hill)
    if listing is None:
        return None
    env_dir = os.path.dirname(os.path.dirname(python))
    try:
        uv = uvenv.uv_binary()
        with open(uvenv.seal_path(env_dir), "rb") as handle:
            seal = sha256(handle.read()).hexdigest()
        inputs = {
            "version": KEY_VERSION, "tool": report.tool_identity(), "hill": os.path.realpath(hill_dir),
            "files": _digests(hill_dir, cache, listing[0] + listing[1]),
            "locks": _digests(hill_dir, cache, [name for name in (locks.PRIVATE_LOCK, locks.BLOBS_LOCK)
                                                if os.path.isfile(os.path.join(hill_dir, name))]),
            "private": _digests(hill_dir, cache, locks.walk_private(hill_dir)),
            "environment": [os.path.realpath(env_dir), uvenv.env_digest(hill_dir), seal],
            "interpreter": file_identity(uvenv.interpreter()), "uv": file_identity(uv),
            "bwrap": sandbox.bwrap_works(), "home": [state.home(), os.path.realpath(state.home())],
            "corpus": corpus_version, "probe": probe.digest_inputs(hill_dir),
            "variables": {name: search_path() if name == "PATH" else value for name, value in os.environ.items()
                          if counted_variable(name) or name.startswith(("HILLS_", "HILLCLIMB_"))},
        }
    except (HillsError, OSError):
        return None
    return sha256(json.dumps(inputs, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def records_path(hill_dir: str) -> str:
    """Where the records of one hill folder are kept, sealed."""
    folder = sha256(os.path.realpath(hill_dir).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return os.path.join(state.home(), "cache", "checks", folder + ".json")


def _read(path: str) -> list[dict[str, object]]:
    """The records, newest first: none when missing or not sealed by this machine's key."""
    kept = state.sealed_read(path)
    return [entry for entry in kept if isinstance(entry, dict)] if isinstance(kept, list) else []


def lookup(hill_dir: str, record_key: str | None) -> dict[str, Result]:
    """The recorded results under `record_key` by check name, each detail
    saying it was recorded and when; empty when there are none."""
    if record_key is None:
        return {}
    found: dict[str, Result] = {}
    for entry in _read(records_path(hill_dir)):
        results = entry.get("results")
        if entry.get("key") != record_key or not isinstance(results, list):
            continue
        for item in results:
            if not isinstance(item, dict) or item.get("check") not in RECORDED or item.get("status") not in PASSING:
                continue
            at, tried = item.get("at"), item.get("tried")
            date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at if isinstance(at, (int, float)) else 0))
            found[str(item["check"])] = Result(str(item["check"]), str(item["status"]),
                                               str(item.get("detail", "")) + SUFFIX.format(date=date),
                                               [str(name) for name in tried] if isinstance(tried, list) else None)
        break
    return found


def record(hill_dir: str, record_key: str, results: Iterable[Result]) -> None:
    """Keep the passing results (ok or warn) of the recorded checks under
    `record_key`, beside those kept under it already, newest first, KEPT
    records at most; nothing when none passed."""
    now = time.time()
    passing = {result.name: {**result.as_dict(), "at": now} for result in results
               if result.name in RECORDED and result.status in PASSING}
    if not passing:
        return
    path = records_path(hill_dir)
    kept = _read(path)
    for entry in kept:
        earlier = entry.get("results")
        if entry.get("key") == record_key and isinstance(earlier, list):
            for item in earlier:
                if isinstance(item, dict) and item.get("check") in RECORDED:
                    passing.setdefault(str(item["check"]), item)
    entry = {"key": record_key, "results": [passing[name] for name in RECORDED if name in passing]}
    try:
        state.ensure_home()
        state.sealed_write(path, [entry, *[old for old in kept if old.get("key") != record_key]][:KEPT])
    except OSError:
        pass  # a machine state that cannot be written runs the checks next time


def plain(result: Result) -> Result:
    """`result` as it was recorded: its detail without the words saying so."""
    at = result.detail.rfind(SUFFIX.split("{", 1)[0])
    if result.name not in RECORDED or at < 0 or not result.detail.endswith(")"):
        return result
    return Result(result.name, result.status, result.detail[:at], result.tried)
