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

from hills.disk import hill

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


def test_no_template_ships_a_private_folder() -> None:
    # A template's held-out data is drawn by its make_data.py at `hills new`.
    shipped = [rel for rel in shipped_files() if "private" in Path(rel).parts]
    assert not shipped, f"held-out data ships with hills: {shipped}"
    for template in hill.templates():
        assert not hill.shipped("examples").joinpath(template, "private").is_dir(), template


def _made(tmp_path: Path, template: str) -> Path:
    """`template` copied as `hills new` copies it, its make_data.py run."""
    import shutil

    made = tmp_path / template
    shutil.copytree(EXAMPLES / template, made, ignore=hill._template_ignore(str(EXAMPLES / template)))
    hill.make_data(str(made))
    return made


@pytest.mark.slow
def test_the_wheel_holds_no_held_out_data_of_any_template(tmp_path: Path) -> None:
    """Built from this checkout, the wheel carries the templates and none of
    what a hill made from one keeps in private/: no copy of a private file
    (whole, or as a member of an archive in it) and no row or sequence of
    numbers of one. The control: a private file that is a shipped one is
    found in the same wheel by the same scan."""
    import shutil
    import sys
    import zipfile

    from hills.checks import leakscan
    from hills.disk import locks

    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "wheel"),
                           str(REPO_ROOT)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [wheel] = (tmp_path / "wheel").glob("hills-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "hills/examples/dataset/make_data.py" in names and "hills/examples/bin-packing/make_data.py" in names
    assert not [name for name in names if "/private/" in name or name.endswith((".gz", ".csv"))], names
    installed = [(leakscan.PACKAGE, str(tmp_path / "wheel"))]
    for template in sorted(hill.templates()):
        made = _made(tmp_path, template)
        private = locks.walk_private(str(made), links=[])
        if template in ("bin-packing", "dataset", "nanogpt-10min"):
            assert len(private) >= 2, (template, private)
        scanned = leakscan.scan(str(made), [], {}, locks.StatCache(str(made)), installed)
        assert scanned.installed_files == (1 if private else 0) and scanned.private_files == len(private)
        assert not scanned.findings, [finding.describe() for finding in scanned.findings]
    made = tmp_path / "bin-packing"
    shutil.copy(made / "data" / "validation" / "v01-uniform.json", made / "private" / "holdout" / "h07.json")
    scanned = leakscan.scan(str(made), [], {}, locks.StatCache(str(made)), installed)
    assert [(finding.where, finding.member, finding.kind, finding.private) for finding in scanned.findings] == [
        (str(wheel), "hills/examples/bin-packing/data/validation/v01-uniform.json", "copy", "private/holdout/h07.json")]
