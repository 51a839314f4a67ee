"""Read-only views of a hill: status against HEAD, version log, description."""

from __future__ import annotations

import hashlib
import os

from ..disk import hill as hill_module, locks
from ..freeze import commit as commit_module
from ..base.errors import HillsError, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from ..disk.hill import Hill
    from ..disk.manifest_types import Manifest

NOTES_REF = "refs/notes/hills/reports"


def git_blob_id(path: Path | str) -> str:
    with open(path, "rb") as handle:
        data = handle.read()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def status(hill: Hill) -> dict[str, Any]:
    """{'head', 'files': [(change, path)], 'private': [...], 'blobs': [...]}."""
    head = hill.repo.head()
    regular, blobs = hill_module.list_tree_files(hill)
    committed = hill.repo.ls_tree(head) if head else {}
    files = []
    for rel in regular:
        if rel in (locks.PRIVATE_LOCK, locks.BLOBS_LOCK):
            continue
        full = os.path.join(hill.path, rel)
        mode = "100755" if os.stat(full).st_mode & 0o100 else "100644"
        if rel not in committed:
            files.append(("added", rel))
        elif committed[rel] != (mode, git_blob_id(full)):
            files.append(("modified", rel))
    for rel in committed:
        if rel in (locks.PRIVATE_LOCK, locks.BLOBS_LOCK):
            continue
        if rel not in regular:
            files.append(("deleted" if not os.path.exists(os.path.join(hill.path, rel)) else "now a blob", rel))
    cache = locks.StatCache(hill.path)
    drift: dict[str, list[tuple[str, str]]] = {}
    links: list[str] = []  # under private/: drift that hills-eval refuses, shown rather than an error here
    for lock_name, rel_paths in ((locks.PRIVATE_LOCK, locks.walk_private(hill.path, links)),
                                 (locks.BLOBS_LOCK, blobs)):
        actual = locks.hash_files(hill.path, rel_paths, cache)
        text = hill.repo.show_blob(head, lock_name) if head else None
        expected = locks.decode(text, f"{lock_name} at HEAD") if text else {}
        drift[lock_name] = locks.compare(expected, actual)
    cache.save()
    changes = [change for change in drift[locks.PRIVATE_LOCK] if change[1] not in links]
    drift[locks.PRIVATE_LOCK] = sorted(changes + [("symlink", rel) for rel in links], key=lambda c: c[1])
    return {"hill": hill.name, "head": head, "files": sorted(files, key=lambda c: c[1]),
            "private": drift[locks.PRIVATE_LOCK], "blobs": drift[locks.BLOBS_LOCK]}


def eval_counts(hill: Hill) -> dict[str, int]:
    """{commit: number of official reports in the notes}: each note's own
    count, O(1) a commit in either layout (docs/history.md)."""
    from ..run.logbook import note_summary

    counts: dict[str, int] = {}
    out = hill.repo.run("notes", f"--ref={NOTES_REF}", "list", ok_codes=(0, 1))
    pairs = [line.split() for line in out.splitlines() if line.strip()]
    if not pairs:
        return counts
    batch = hill.repo.run("cat-file", "--batch", input="".join(note + "\n" for note, _ in pairs), binary=True)
    position = 0
    for _note, annotated in pairs:
        header_end = batch.index(b"\n", position)
        size = int(batch[position:header_end].split()[2])
        body = batch[header_end + 1:header_end + 1 + size]
        position = header_end + 1 + size + 1
        counts[annotated] = note_summary(body.decode("utf-8", "replace"))[0]
    return counts


def log(hill: Hill) -> list[dict[str, Any]]:
    """Versions, newest first: tree hash, commit, message, date, eval count."""
    head = hill.repo.head()
    if not head:
        return []
    out = hill.repo.run("log", "-z", "--format=%H%x1f%T%x1f%cI%x1f%s", commit_module.BRANCH)
    counts = eval_counts(hill)
    versions = []
    for record in out.split("\0"):
        record = record.strip("\n")
        if not record:
            continue
        commit_id, tree_hash, date, subject = record.split("\x1f", 3)
        versions.append({"commit": commit_id, "tree_hash": tree_hash, "date": date,
                         "message": subject, "evals": counts.get(commit_id, 0)})
    return versions


def final_used(hill: Hill, tree_hash: str | None) -> int | None:
    """What the committed version has spent of its holdout budget: its
    --final evals, or under a reusable holdout its releases; None before
    the first commit or where its log does not verify."""
    if tree_hash is None:
        return None
    from ..evidence.trust import machine_keys
    from ..run import logbook

    try:
        return logbook.final_count(hill.name, tree_hash, machine_keys())
    except HillsError:
        return None


def describe(hill: Hill) -> dict[str, Any]:
    spec = hill.manifest()
    readme_path = os.path.join(hill.path, "README.md")
    try:
        with open(readme_path, encoding="utf-8") as handle:
            readme = handle.read()
    except FileNotFoundError:
        raise UsageError(f"hill '{hill.name}' has no README.md")
    head = hill.repo.head()
    described: dict[str, Any] = {
        "hill": spec["name"],
        "version": spec["version"],
        "description": spec["description"],
        "tree_hash": hill.repo.tree_of(head) if head else None,
        "path": hill.path,
        "evaluator": spec["evaluator"]["shape"],
        "params": spec["params"],
        "metrics": spec["metrics"],
        "timeout": spec["timeout"],
        "replicates": spec["replicates"],
        "final_budget": spec["final"]["budget"],
        "final_mode": spec["final"].get("mode", "plain"),
        "final_used": final_used(hill, hill.repo.tree_of(head) if head else None),
        "sandbox": spec["sandbox"],
        "examples": sorted(e for e in os.listdir(os.path.join(hill.path, "examples"))
                           if not e.startswith(".")) if os.path.isdir(os.path.join(hill.path, "examples")) else [],
        "submission": {
            "what": "a folder; it is copied (snapshotted) and hashed before every eval",
            "command": f"hills eval DIR -H {spec['name']} [-p NAME=VALUE ...]",
            "params": "pass -p NAME=VALUE to override a param within its type and bounds",
            "symlinks": "a symlink that points outside the submission folder is refused",
        },
        "readme": readme,
    }
    described["dev_run"] = dev_run_entry(spec)
    described["env"] = env_entry(spec["name"], described["tree_hash"])
    from .attempts import bests

    # What the climb has reached so far, with its noise and the selection bound (docs/noise.md).
    described["best"] = bests(hill) if head else []
    if spec["unit_tests"]:
        # The climber may run and even edit the working copy; evals never read it.
        copy = os.path.join(hill.path, spec["unit_tests"]["path"])
        described["submission"]["unit_tests"] = (
            f"frozen unit tests run against every submission after its first replicate: "
            f"{' '.join(spec['unit_tests']['command'])}; a disposable copy is at {copy} (yours to run "
            f"and change: an official eval always uses the copy frozen in the hill's commit)")
    return described


def dev_run_entry(spec: Manifest) -> dict[str, Any]:
    """How the climber dev-runs a submission (`hills run`), or why it cannot."""
    name = spec["name"]
    if not spec["solution"]:
        return {"available": False, "command": None,
                "what": "no solution phase: the evaluator runs the submission itself, so only 'hills eval' runs "
                        f"it; run your code in the hill's environment ('hills env {name}')"}
    inputs = (spec["solution"].get("inputs") or {}).get("validation")
    if inputs and os.path.normpath(inputs).split(os.sep)[0] == locks.PRIVATE_DIR:
        return {"available": False, "command": None,
                "what": "the solution phase's validation inputs are in private/, and a dev run gets public "
                        "inputs only; score with 'hills eval'"}
    return {"available": True, "command": f"hills run DIR -H {name} [-p NAME=VALUE ...] [-o OUTDIR]",
            "what": "runs the solution phase on DIR as an eval does (confined, same environment, caps and "
                    "time limit) on the public inputs; not logged, not signed, no score"}


def env_entry(name: str, tree_hash: str | None) -> dict[str, Any]:
    """Where the committed version's locked environment is (`hills env`)."""
    from ..run import devrun

    found = devrun.env_paths(name, tree_hash)
    return {"command": f"hills env {name} [--shell | --activate]", "python": found[0] if found else None,
            "built": bool(found and found[1])}
