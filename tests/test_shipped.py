"""The files hills ships beside its code live once: the example hills in
the top-level examples/, the pre-commit stub in hooks/. The wheel carries
them inside the package; a checkout and the editable install read them
where they are. A second copy anywhere in the checkout fails here."""

import hashlib
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from hills import hill

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = REPO_ROOT / "examples"
HOOK_STUB = REPO_ROOT / "hooks" / "pre-commit"
# Shorter files (an empty __init__.py, "42\n") may match by chance.
SMALLEST_COPY = 64


def checkout_files() -> list[str]:
    """The checkout's files, relative to its root: tracked, and untracked
    ones git does not ignore."""
    done = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                          cwd=REPO_ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip("not a git checkout")
    return sorted({rel for rel in done.stdout.split("\0") if rel and (REPO_ROOT / rel).is_file()})


def digest(rel: str) -> str:
    return hashlib.sha256((REPO_ROOT / rel).read_bytes()).hexdigest()


def shipped_files() -> list[str]:
    return [rel for rel in checkout_files() if rel.startswith(("examples/", "hooks/"))
            and rel != "examples/quickstart.sh"]


def test_the_package_reads_the_top_level_folders_in_a_checkout() -> None:
    assert Path(hill.shipped("examples")) == EXAMPLES
    assert Path(hill.shipped("hooks")) == HOOK_STUB.parent
    assert Path(hill.shipped("skills")) == REPO_ROOT / "skills"
    assert sorted(hill.templates()) == sorted(path.parent.name for path in EXAMPLES.glob("*/hill.yaml"))


def test_the_hook_stub_is_one_plain_file() -> None:
    assert HOOK_STUB.is_file() and not HOOK_STUB.is_symlink()
    assert os.access(HOOK_STUB, os.X_OK)
    assert [rel for rel in checkout_files() if os.path.basename(rel) == "pre-commit"] == ["hooks/pre-commit"]


def test_no_shipped_file_has_a_copy() -> None:
    files = checkout_files()
    sizes = {rel: (REPO_ROOT / rel).stat().st_size for rel in files}
    by_digest: dict[str, list[str]] = {}
    for rel in files:
        if sizes[rel] >= SMALLEST_COPY:
            by_digest.setdefault(digest(rel), []).append(rel)
    for rel in shipped_files():
        if sizes[rel] >= SMALLEST_COPY:
            twins = [other for other in by_digest[digest(rel)] if other != rel]
            assert not twins, f"{rel} has a copy at {', '.join(twins)}: keep one and read it from there"


def test_every_hill_template_lives_in_examples() -> None:
    # A template's hill.yaml names the hill `{{name}}`, filled in by `hills new`.
    for rel in checkout_files():
        if os.path.basename(rel) == "hill.yaml" and "{{name}}" in (REPO_ROOT / rel).read_text(encoding="utf-8"):
            parts = Path(rel).parts
            assert len(parts) == 3 and parts[0] == "examples", (
                f"{rel} is a hill template outside examples/: the example hills live once, in examples/NAME/")
    for name in ("examples", "templates", "hooks", "skills"):
        assert not (REPO_ROOT / "hills" / name).exists(), (
            f"hills/{name} exists: the wheel builds it from the top-level folder, a checkout holds no copy")


def test_the_wheel_lists_every_package_and_maps_the_shipped_folders() -> None:
    with open(REPO_ROOT / "pyproject.toml", "rb") as handle:
        setuptools = tomllib.load(handle)["tool"]["setuptools"]
    packages = {"hills"} | {
        "hills." + ".".join(folder.relative_to(REPO_ROOT / "hills").parts)
        for folder in (init.parent for init in (REPO_ROOT / "hills").rglob("__init__.py"))
        if folder != REPO_ROOT / "hills"}
    assert sorted(setuptools["packages"]) == sorted(packages | {"hills.examples", "hills.hooks", "hills.skills"}), (
        "pyproject.toml [tool.setuptools] packages must list every package under hills/ "
        "(a package left out is missing from the wheel)")
    assert setuptools["package-dir"] == {"hills.examples": "examples", "hills.hooks": "hooks", "hills.skills": "skills"}
