"""The commit gate: the checks of `hills check` run before `hills commit`
and the pre-commit hook, their passing verdict remembered by content."""

import hashlib
import json
import os
from collections.abc import Callable
from typing import NamedTuple

from ..base import state
from ..checks import check, recorded, shared
from ..disk import locks, uvenv, verdicts
from ..evidence import report
from ..run import sandbox
from ..base.errors import HillsError
from ..disk.hill import Hill

KEY_VERSION = 1
# Verdicts kept per hill folder, newest first: enough to go back and forth
# between a few versions without running their tests again.
KEPT = 8


class Gate(NamedTuple):
    """What the gate found: one result per check, and whether they were
    remembered from an earlier run over the same inputs."""

    results: list[shared.Result]
    remembered: bool
    listing: verdicts.Listing | None  # the hill's files as the verdict saw them

    @property
    def failed(self) -> list[shared.Result]:
        return [result for result in self.results if result.status == "fail"]


def gate_key(hill: Hill, cache: locks.StatCache, listing: verdicts.Listing | None) -> str | None:
    """The digest of everything the gate's verdict depends on, or None when
    that cannot be known without running the checks (a hill.yaml that does
    not load, a link in the hill, no uv): then the checks run, and say why.

    It covers the files that would enter the tree and blobs.lock (path,
    executable bit, content through the stat cache), the environment (the
    interpreter and uv binaries, bubblewrap's usability, PATH and PYTHON*),
    the hills version and source digest, the hill's folder and the options
    of the run, and what the leak probe's verdict depends on besides
    (probe.digest_inputs: the names of the private files it tries, where
    $HOME, the project and the temporary folder are). Not the content of
    private/ and not the two locks: what they say about the held-out data
    is checked at every commit by regenerating the locks and by the leak
    audit, never remembered.
    """
    if listing is None:
        return None
    regular, blobs = listing
    try:
        uv = uvenv.uv_binary()
    except HillsError:
        return None
    digest = hashlib.sha256()

    def add(label: str, value: object) -> None:
        digest.update(json.dumps([label, value], sort_keys=True, separators=(",", ":")).encode() + b"\n")

    add("gate", KEY_VERSION)
    add("tool", report.tool_identity())
    add("hill", os.path.realpath(hill.path))
    add("options", {"tests": True})
    # The cheat corpus's verdict depends on its version, and on exploits/, a folder of the hill's files.
    from ..checks.corpus import VERSION as corpus_version

    add("cheat corpus", corpus_version)
    entries = verdicts.file_entries(hill, cache, regular + blobs)
    if entries is None:
        return None
    for entry in entries:
        add("file", entry)
    add("interpreter", recorded.file_identity(uvenv.interpreter()))
    add("uv", recorded.file_identity(uv))
    add("bwrap", sandbox.bwrap_works())
    # The isolation check mounts machine state where it really is.
    add("home", [state.home(), os.path.realpath(state.home())])
    from ..checks import probe

    add("leak probe", probe.digest_inputs(hill.path))
    add("variables", {name: recorded.search_path() if name == "PATH" else value
                      for name, value in os.environ.items() if recorded.counted_variable(name)})
    return digest.hexdigest()


def _remembered(path: str, key: str) -> list[shared.Result] | None:
    """The results remembered under `key`, or None."""
    kept = state.sealed_read(path)
    if not isinstance(kept, list):
        return None
    for entry in kept:
        if isinstance(entry, dict) and entry.get("key") == key and isinstance(entry.get("results"), list):
            return [shared.Result(item["check"], item["status"], item["detail"], item.get("tried"))
                    for item in entry["results"]]
    return None


def _remember(path: str, key: str, results: list[shared.Result], files: str | None = None) -> None:
    """Keep `results` under `key`, newest first, KEPT at most, with the
    digest of the files they judged and the corpus version they passed."""
    from ..checks.corpus import NAME as corpus_name, VERSION as corpus_version

    kept = state.sealed_read(path)
    kept = [entry for entry in kept if isinstance(entry, dict) and entry.get("key") != key] \
        if isinstance(kept, list) else []
    entry: dict[str, object] = {"key": key, "results": [result.as_dict() for result in results]}
    if files and any(result.name == corpus_name and result.status == "ok" for result in results):
        entry.update(files=files, corpus=corpus_version)
    try:
        state.sealed_write(path, [entry, *kept][:KEPT])
    except OSError:
        pass  # a machine state that cannot be written runs the checks next time, as before


def run(hill: Hill, cache: locks.StatCache, tell: Callable[[shared.Result], object] | None = None) -> Gate:
    """Every check with the hill's tests, or their passing verdict when the
    same inputs passed before. A failure is never remembered: it runs again
    next time. A verdict is remembered only when the inputs after the run
    are the ones before it, so a file edited while the tests ran is judged
    again. `tell` gets each check's result as it finishes, a remembered
    verdict's all at once."""
    listing = verdicts.listing_of(hill)
    key = gate_key(hill, cache, listing)
    path = verdicts.verdicts_path(hill)
    if key is not None:
        results = _remembered(path, key)
        if results is not None:
            for result in results:
                result.detail += " (remembered)"
            from ..checks import leakscan

            # The answer-leak scan reads private/, which the key leaves out:
            # its verdict is looked up by its own digest, or the scan runs.
            gate = Gate(leakscan.refresh(hill.path, cache, listing, results), True, listing)
            if tell is not None:
                for result in gate.results:
                    tell(result)
            return gate
    results = check.run_checks(hill.path, tests=True, tell=tell)
    gate = Gate(results, False, None)
    if gate.failed:
        return gate
    gate = gate._replace(listing=verdicts.listing_of(hill))
    if key is not None and gate_key(hill, cache, gate.listing) == key:
        _remember(path, key, [recorded.plain(result) for result in results],
                  verdicts.files_digest(hill, cache, gate.listing))
    return gate


def checked(hill: Hill, tests: bool = True, tell: Callable[[shared.Result], object] | None = None,
            say: Callable[[str], object] | None = None, fresh: bool = False) -> list[shared.Result]:
    """`hills check`: every check runs (the leak probe and the cheat corpus
    from their records, unless `fresh`), and when all pass with the hill's
    tests, the verdict is remembered as `run` remembers it, with the answer
    leak scan's: a `hills commit` of the same inputs right after runs none
    of them again. Only when the inputs after the checks are the ones
    before them, as in `run`."""
    from ..checks import leakscan

    cache = locks.StatCache(hill.path)
    listing = verdicts.listing_of(hill)
    key = gate_key(hill, cache, listing) if tests else None
    leak_key = _leak_key(hill, cache, listing) if key is not None else None
    results = check.run_checks(hill.path, tests=tests, tell=tell, say=say, fresh=fresh)
    if key is None or any(result.status == "fail" for result in results):
        cache.save()
        return results
    after = verdicts.listing_of(hill)
    if gate_key(hill, cache, after) == key:
        plain = [recorded.plain(result) for result in results]
        _remember(verdicts.verdicts_path(hill), key, plain, verdicts.files_digest(hill, cache, after))
        scan = next((result for result in plain if result.name == "answer leak"), None)
        if scan is not None and scan.status == "ok" and leak_key is not None \
                and _leak_key(hill, cache, after) == leak_key:
            leakscan.remember(hill.path, leak_key, scan)
    cache.save()
    return results


def _leak_key(hill: Hill, cache: locks.StatCache, listing: verdicts.Listing | None) -> str | None:
    """The answer leak scan's verdict key (leakscan.verdict_key), or None where it cannot be known."""
    from ..checks import leakscan

    if listing is None:
        return None
    try:
        return leakscan.verdict_key(hill.path, cache, listing[0] + listing[1])
    except (HillsError, OSError):
        return None
