"""`hills export harbor`'s core: one committed version of a hill written as
a Harbor task folder in Harbor's separate-verifier mode (docs/harbor.md).
The agent's side (instruction.md, environment/, solution/) gets the
committed public files and the example submission; the verifier's side
(tests/) gets hills itself, the hill as a bundle holding its held-out
data, and the script that scores the agent's folder."""

from __future__ import annotations

import dataclasses
import hashlib
import functools
import importlib.resources
import json
import os
import re
import shutil
import tarfile
import zipfile

from .. import __version__
from ..base import state
from ..base.errors import Refused, UsageError
from ..disk import bundle, locks, manifest, wheel
from ..run import pinned

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import IO, Any

    from ..disk.hill import Hill

BASE_IMAGE = "python:3.12-slim"
SPLITS = ("holdout", "validation")
# Where the agent's container holds things, and where Harbor carries the
# submission into the verifier's (the artifact's path is the same in both).
APP = "/app"
SUBMISSION = APP + "/submission"
HILL_COPY = APP + "/hill"
VERIFIER_LOGS = "/logs/verifier"
# The agent works as a user of its own: the hill's copy stays as exported.
AGENT_USER = "agent"
# The verifier builds the hill's environment (uv, from its lock) before
# the first replicate: time on top of the hill's own watchdog.
BUILD_SLACK_S = 900
AGENT_SIDE = ("instruction.md", "task.toml", "environment", "solution")
_EXAMPLE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# An image reference as Docker writes one (registry/name:tag@digest): it
# goes into a FROM line, where anything else could add instructions.
_IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$")


@dataclasses.dataclass(frozen=True)
class HarborRequest:
    """What to export: the hill, the folder, and the choices of the task."""

    hill: Hill
    target: str
    force: bool = False
    example: str | None = None
    split: str = "holdout"
    failed_reward: float = 0.0
    base_image: str = BASE_IMAGE


@dataclasses.dataclass(frozen=True)
class Exported:
    """What was written: the task folder and the version it holds."""

    path: str
    hill: str
    commit: str
    tree_hash: str
    example: str
    private_files: int

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def export(request: HarborRequest) -> Exported:
    """Write the Harbor task of the hill's HEAD to `request.target`: built
    whole in a temporary folder beside it, checked, then renamed into
    place, so an error leaves nothing half-written."""
    hill = request.hill
    commit, tree_hash = bundle.head_version(hill)
    target = os.path.abspath(request.target)
    _check_target(hill, target, request.force)
    parent = os.path.dirname(target)
    missing = []  # the folders above DIR made here, deepest first: removed again on an error
    folder = parent
    while not os.path.isdir(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    os.makedirs(parent, exist_ok=True)
    staging = _temp_folder(parent, os.path.basename(target))
    try:
        exported = _write(request, commit, tree_hash, staging)
        _replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for made in missing:
            try:
                os.rmdir(made)
            except OSError:
                break
        raise
    return dataclasses.replace(exported, path=target)


def _check_target(hill: Hill, target: str, force: bool) -> None:
    inside = os.path.realpath(hill.path)
    real = os.path.realpath(target)
    if real == inside or real.startswith(inside + os.sep):
        raise UsageError(f"cannot export hill '{hill.name}' into its own folder ('{target}')",
                         hint="name a folder outside the hill with -o DIR")
    if os.path.lexists(target) and (os.path.islink(target) or not os.path.isdir(target)):
        raise UsageError(f"cannot export into '{target}': it exists and is not a folder")
    if os.path.isdir(target) and os.listdir(target) and not force:
        raise UsageError(f"folder '{target}' is not empty",
                         hint="name a new or empty folder, or pass --force to replace its contents")


def _temp_folder(parent: str, name: str) -> str:
    while True:
        path = os.path.join(parent, f".{name}.export-{os.urandom(4).hex()}")
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue


def _replace(staging: str, target: str) -> None:
    """Rename the finished folder onto `target`; an old folder there (empty,
    or with --force) is moved aside first and removed after."""
    old = None
    if os.path.isdir(target):
        old = staging + ".old"
        os.rename(target, old)
    try:
        os.rename(staging, target)
    except BaseException:
        if old is not None:
            os.rename(old, target)
        raise
    os.chmod(target, 0o755)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _write(request: HarborRequest, commit: str, tree_hash: str, root: str) -> Exported:
    hill = request.hill
    if request.split not in SPLITS:
        raise UsageError(f"unknown split '{request.split}'", hint="use holdout or validation")
    if not _IMAGE_RE.match(request.base_image):
        shown = request.base_image.encode("unicode_escape").decode("ascii")  # a newline stays on the line
        raise UsageError(f"--base-image '{shown}' is not a Docker image reference",
                         hint="name one such as python:3.12-slim or registry.example/team/image@sha256:...")
    text = hill.repo.show_blob(commit, "hill.yaml")
    if text is None:
        raise Refused(f"hill '{hill.name}' has no hill.yaml at commit {commit[:12]}")
    spec: dict[str, Any] = dict(manifest.parse_text(text, f"hill.yaml at {commit[:12]}", hill.name))
    entries = {lock_name: _lock_entries(hill, commit, lock_name)
               for lock_name in (locks.PRIVATE_LOCK, locks.BLOBS_LOCK)}

    tests = os.path.join(root, "tests")
    os.makedirs(tests)
    bundle_name = f"{hill.name}.hillbundle"
    bundle.write(hill, os.path.join(tests, bundle_name))
    wheel.write(os.path.join(tests, wheel.file_name()))

    environment = os.path.join(root, "environment")
    public = os.path.join(environment, "hill")
    os.makedirs(public)
    pinned.materialize(hill, commit, public)
    _copy_blobs(hill, entries[locks.BLOBS_LOCK], public)
    example = _example(public, request.example)
    state.copy_tree(os.path.join(public, "examples", example), os.path.join(environment, "submission"))

    task = {"hill": hill.name, "commit": commit, "tree_hash": tree_hash, "bundle": bundle_name,
            "submission": SUBMISSION, "logs": VERIFIER_LOGS, "split": request.split,
            "failed_reward": request.failed_reward, "hills_version": __version__}
    _write_text(os.path.join(tests, "task.json"), json.dumps(task, indent=2, sort_keys=True) + "\n")
    files = {"wheel": wheel.file_name(), "bundle": bundle_name, "base_image": request.base_image,
             "submission": SUBMISSION, "example": f"{HILL_COPY}/examples/{example}", "agent_user": AGENT_USER}
    _template(environment, "Dockerfile", "agent.Dockerfile", files)
    _template(tests, "Dockerfile", "verifier.Dockerfile", files)
    _template(tests, "docker-compose.yaml", "verifier-compose.yaml", files)
    _template(tests, "test.sh", "test.sh", files, mode=0o755)
    _template(tests, "hills_reward.py", "hills_reward.py", files)
    os.makedirs(os.path.join(root, "solution"))
    _template(os.path.join(root, "solution"), "solve.sh", "solve.sh", files, mode=0o755)
    readme = hill.repo.show_blob(commit, "README.md")
    _write_text(os.path.join(root, "instruction.md"), instruction(hill.name, spec, tree_hash, example,
                                                                  request.split, readme))
    _write_text(os.path.join(root, "task.toml"), task_toml(spec, task, _sha256(os.path.join(tests, bundle_name))))

    private = {(entry["size"], entry["digest"]) for entry in entries[locks.PRIVATE_LOCK].values()}
    for side in AGENT_SIDE:
        found = leaked(os.path.join(root, side), private)
        if found:
            shown = side if found[0] == side else f"{side}/{found[0]}"
            raise Refused(f"hill '{hill.name}' holds held-out data outside private/: '{shown}' of the task "
                          "is a copy of a file of private/",
                          hint="remove the copy from the hill's public files and commit again")
    return Exported(root, hill.name, commit, tree_hash, example, len(entries[locks.PRIVATE_LOCK]))


def _lock_entries(hill: Hill, commit: str, lock_name: str) -> dict[str, dict[str, Any]]:
    text = hill.repo.show_blob(commit, lock_name)
    return locks.decode(text, f"{lock_name} at {commit[:12]}") if text else {}


def _copy_blobs(hill: Hill, blobs: dict[str, dict[str, Any]], public: str) -> None:
    """The hill's public blobs (data outside git, bound by blobs.lock) into
    the public copy, each copy checked against its digest."""
    for rel, entry in sorted(blobs.items()):
        if rel.startswith(locks.PRIVATE_DIR + "/") or bundle.git_dir_part(rel) is not None:
            continue
        copy = os.path.join(public, rel)
        os.makedirs(os.path.dirname(copy), exist_ok=True)
        shutil.copyfile(os.path.join(hill.path, rel), copy)
        if locks.file_digest(copy) != entry["digest"]:
            raise Refused(f"blob '{rel}' of hill '{hill.name}' does not match {locks.BLOBS_LOCK}",
                          hint=f"restore it, or commit the change: hills commit {hill.name} -m MESSAGE")


def _example(public: str, wanted: str | None) -> str:
    """The example submission the agent starts from: `wanted`, or the first."""
    examples = os.path.join(public, "examples")
    names = sorted(name for name in os.listdir(examples) if os.path.isdir(os.path.join(examples, name))) \
        if os.path.isdir(examples) else []
    if wanted is not None and wanted not in names:
        raise UsageError(f"the hill has no example '{wanted}'",
                         hint="its examples: " + (", ".join(names) or "none"))
    if not names:
        raise Refused("the hill has no example submission under examples/ to start the agent from")
    chosen = wanted or names[0]
    if not _EXAMPLE_RE.match(chosen):
        raise UsageError(f"example name '{chosen}' is not safe in a shell script",
                         hint="use letters, digits, '.', '_' and '-'")
    return chosen


def _template(folder: str, name: str, source: str, values: dict[str, str], mode: int = 0o644) -> None:
    text = importlib.resources.files(__package__).joinpath("harbor_task", source).read_text(encoding="utf-8")
    if source.endswith((".Dockerfile", ".sh")):
        text = text.format(**values)
    _write_text(os.path.join(folder, name), text, mode)


def _write_text(path: str, text: str, mode: int = 0o644) -> None:
    with open(path, "x", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(path, mode)


def _sha256(path: str) -> str:
    hasher = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            hasher.update(chunk)
    return "sha256:" + hasher.hexdigest()


def primary_metric(spec: dict[str, Any]) -> dict[str, Any] | None:
    """The first metric hill.yaml declares (a function evaluator may
    declare none: its report names them)."""
    metrics = spec.get("metrics") or []
    return dict(metrics[0]) if metrics else None


def instruction(name: str, spec: dict[str, Any], tree_hash: str, example: str, split: str,
                readme: str | None) -> str:
    """instruction.md: where the submission lives and how it is scored,
    then the hill's own task text."""
    metric = primary_metric(spec)
    scored = (f"Its primary metric is `{metric['name']}`, "
              f"{'lower' if metric.get('direction') == 'min' else 'higher'} is better."
              if metric else "Its primary metric is the first one the evaluator reports.")
    lines = [f"# {name}", "", spec.get("description") or "", "",
             f"- Your submission is the folder `{SUBMISSION}`. It starts as a copy of the hill's example "
             f"submission `examples/{example}`; what it holds when you stop is what is scored.",
             f"- The hill's public files are in `{HILL_COPY}`: its task text, its evaluator and its public "
             "data. Its held-out data is not in this container.",
             f"- When you stop, the hill's frozen evaluator (tree `{tree_hash[:12]}`) scores `{SUBMISSION}` on "
             f"the {split} split, in a separate container. {scored}",
             "- hills is not installed here: the task text below names `hills` commands you cannot run; "
             "you get no score before the end.", "", "## The task", ""]
    return "\n".join(lines) + "\n" + (readme or "(the hill has no README.md)\n")


def task_toml(spec: dict[str, Any], task: dict[str, Any], bundle_digest: str) -> str:
    """task.toml: the package, hills' metadata, a separate verifier with its
    own environment (tests/ is its image), and the submission as the
    artifact Harbor carries from the agent's container to the verifier's."""
    import tomli_w

    replicates = spec.get("replicates") or 1
    timeout = float(spec.get("timeout") or 60) * (int(replicates) if isinstance(replicates, int) else 1)
    metric = primary_metric(spec)
    metadata = {"hills_version": __version__, "hill": task["hill"], "hill_version": str(spec.get("version", "")),
                "commit": task["commit"], "tree_hash": task["tree_hash"], "bundle_sha256": bundle_digest,
                "split": task["split"], "failed_reward": task["failed_reward"],
                "reward": "the primary metric, negated for a min metric, when the eval passes; "
                          "failed_reward when it fails or is buggy"}
    if metric:
        metadata.update(metric=str(metric["name"]), direction=str(metric.get("direction", "max")))
    document = {
        "schema_version": "1.4",
        "task": {"name": f"hills/{task['hill']}", "description": str(spec.get("description") or ""),
                 "keywords": ["hills"]},
        "metadata": {"hills": metadata},
        "verifier": {"environment_mode": "separate", "timeout_sec": timeout + BUILD_SLACK_S,
                     "environment": {"build_timeout_sec": 1800.0}},
        "agent": {"user": AGENT_USER},
        "environment": {"build_timeout_sec": 600.0},
        "artifacts": [SUBMISSION],
    }
    return tomli_w.dumps(document)


def leaked(folder: str, private: set[tuple[int, str]]) -> list[str]:
    """The files under `folder` (or the file `folder`) whose content is one
    of `private`'s (size, blake3 digest) pairs, as the locks write them,
    members of tar and zip files included: relative paths, `FILE!MEMBER`
    for a member. Only a file or member of a size in `private` is hashed."""
    sizes = {size for size, _ in private}
    found = []
    paths = [(folder, os.path.basename(folder))] if os.path.isfile(folder) else [
        (os.path.join(current, name), os.path.relpath(os.path.join(current, name), folder))
        for current, _, files in sorted(os.walk(folder)) for name in sorted(files)]
    for path, rel in paths:
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        size = os.path.getsize(path)
        if size in sizes and (size, locks.file_digest(path)) in private:
            found.append(rel)
        for member, member_size, stream in _members(path):
            if member_size in sizes and (member_size, _stream_digest(stream())) in private:
                found.append(f"{rel}!{member}")
    return sorted(found)


def _stream_digest(stream: IO[bytes]) -> str:
    import blake3

    hasher = blake3.blake3()
    with stream:
        while chunk := stream.read(1 << 20):
            hasher.update(chunk)
    return "blake3:" + hasher.hexdigest()


def _members(path: str) -> Iterator[tuple[str, int, Callable[[], IO[bytes]]]]:
    """(name, size, opener) of each plain member of a tar or zip file."""
    if tarfile.is_tarfile(path):
        with tarfile.open(path) as archive:
            for member in archive:
                if member.isfile():
                    yield member.name, member.size, functools.partial(_extracted, archive, member)
    elif zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zipped:
            for info in zipped.infolist():
                if not info.is_dir():
                    yield info.filename, info.file_size, functools.partial(zipped.open, info)


def _extracted(archive: tarfile.TarFile, member: tarfile.TarInfo) -> IO[bytes]:
    stream = archive.extractfile(member)
    assert stream is not None  # a plain member
    return stream
