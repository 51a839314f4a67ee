"""The running hills package as a wheel file, for a machine that must run
this very hills and cannot reach its source (the verifier image of a
Harbor task): its code, the templates, hook stub and skill it ships, its
dependencies and console scripts as its installed metadata lists them."""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import os
import zipfile

from .. import __version__
from ..base.errors import EnvironmentProblem
from . import hill as hill_module

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

# The folders hills ships beside its code (pyproject.toml maps them into
# the package); inside the wheel they are hills/examples, hooks, skills.
SHIPPED = ("examples", "hooks", "skills")
# What the real wheel leaves out (pyproject.toml's exclude-package-data):
# caches, and the held-out data a template's make_data.py may have drawn.
_SKIPPED_NAMES = ("__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache")
_SKIPPED_TOP = ("examples/quickstart.sh",)
# Zip entries dated 1980-01-01, so the same hills gives the same bytes.
_EPOCH = (1980, 1, 1, 0, 0, 0)


def file_name() -> str:
    return f"hills-{__version__}-py3-none-any.whl"


def _walk(root: str, inside: str) -> Iterator[tuple[str, str]]:
    """(path on disk, path in the wheel) of every plain file below `root`,
    sorted, leaving out caches, compiled files and templates' private/."""
    for folder, folders, files in os.walk(root):
        rel_folder = os.path.relpath(folder, root)
        folders[:] = sorted(name for name in folders if name not in _SKIPPED_NAMES
                            and not (inside == "hills/examples" and name == "private"))
        for name in sorted(files):
            path = os.path.join(folder, name)
            rel = os.path.normpath(os.path.join(rel_folder, name)).replace(os.sep, "/")
            if name.endswith((".pyc", ".pyo")) or os.path.islink(path) or not os.path.isfile(path):
                continue
            if inside == "hills/examples" and "examples/" + rel in _SKIPPED_TOP:
                continue
            yield path, f"{inside}/{rel}"


def package_files() -> list[tuple[str, str]]:
    """(path on disk, path in the wheel) of everything the wheel carries."""
    package = os.path.dirname(os.path.abspath(hill_module.__file__))
    package = os.path.dirname(package)  # hills/, above this layer
    found = [(path, rel) for path, rel in _walk(package, "hills")
             if not rel.startswith(tuple(f"hills/{folder}/" for folder in SHIPPED))]
    for folder in SHIPPED:
        found.extend(_walk(str(hill_module.shipped(folder)), f"hills/{folder}"))
    return sorted(found, key=lambda pair: pair[1])


def _metadata() -> tuple[str, str]:
    """(METADATA, entry_points.txt) from the installed distribution."""
    try:
        dist = importlib.metadata.distribution("hills")
    except importlib.metadata.PackageNotFoundError:
        raise EnvironmentProblem("this hills is not installed as a package, so its dependencies are unknown",
                                 hint="install it (pip install -e . in the checkout) and run it again") from None
    requires = [line for line in dist.requires or [] if "extra ==" not in line]
    metadata = dist.metadata
    lines = ["Metadata-Version: 2.1", "Name: hills", f"Version: {__version__}",
             f"Summary: {metadata['Summary'] or ''}", f"Requires-Python: {metadata['Requires-Python'] or '>=3.11'}"]
    lines += [f"Requires-Dist: {line}" for line in requires]
    scripts = sorted((point.name, point.value) for point in dist.entry_points if point.group == "console_scripts")
    entry_points = "[console_scripts]\n" + "".join(f"{name} = {value}\n" for name, value in scripts)
    return "\n".join(lines) + "\n", entry_points


def _record_line(rel: str, payload: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(payload).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={digest},{len(payload)}\n"


def write(target: str) -> None:
    """Write the wheel of the running hills to `target`."""
    metadata, entry_points = _metadata()
    info = f"hills-{__version__}.dist-info"
    record = ""
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        def add(rel: str, payload: bytes, mode: int = 0o644) -> None:
            nonlocal record
            entry = zipfile.ZipInfo(rel, date_time=_EPOCH)
            entry.external_attr = (0o100000 | mode) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, payload)
            record += _record_line(rel, payload)

        for path, rel in package_files():
            with open(path, "rb") as handle:
                add(rel, handle.read(), 0o755 if os.access(path, os.X_OK) else 0o644)
        add(f"{info}/METADATA", metadata.encode())
        add(f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: hills\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        add(f"{info}/entry_points.txt", entry_points.encode())
        record += f"{info}/RECORD,,\n"
        entry = zipfile.ZipInfo(f"{info}/RECORD", date_time=_EPOCH)
        entry.external_attr = (0o100000 | 0o644) << 16
        archive.writestr(entry, record.encode())
