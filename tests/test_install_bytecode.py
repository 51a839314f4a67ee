"""The install compiles hills' bytecode (the Makefile's `bytecode`, run by
its install targets): where PYTHONDONTWRITEBYTECODE=1 forbids writing it at
run time, a cold command still starts from bytecode, not from source."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sources(package):
    for root, folders, files in os.walk(package):
        folders[:] = [name for name in folders if name != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                yield os.path.join(root, name)


def current(source):
    """Whether the bytecode Python would load for `source` is there and
    matches it (a timestamp pyc: flags 0, the source's mtime and size)."""
    cached = importlib.util.cache_from_source(source)
    try:
        with open(cached, "rb") as handle:
            header = handle.read(16)
    except FileNotFoundError:
        return False
    stat = os.stat(source)
    return (header[:4] == importlib.util.MAGIC_NUMBER and int.from_bytes(header[4:8], "little") == 0
            and int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF)


def test_the_install_targets_compile_the_package():
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as handle:
        text = handle.read()
    for target in (r"\$\(BIN\)/\.installed-hills:", r"\$\(BIN\)/\.installed:"):
        recipe = re.search(target + r"[^\n]*\n((?:\t[^\n]*\n)+)", text)
        assert recipe is not None, target
        assert "$(BYTECODE)" in recipe.group(1), recipe.group(1)
    assert re.search(r"^BYTECODE := \$\(BIN\)/python -m compileall -q hills$", text, re.MULTILINE)
    assert re.search(r"^bytecode:\n\t\$\(BYTECODE\)$", text, re.MULTILINE)


def test_after_the_install_step_every_module_has_current_bytecode(tmp_path):
    """The step run on a copy of the package without bytecode, with
    PYTHONDONTWRITEBYTECODE=1 set: every module then has current bytecode."""
    package = tmp_path / "hills"
    shutil.copytree(os.path.join(ROOT, "hills"), package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(ROOT, "Makefile"), tmp_path)
    found = list(sources(package))
    assert len(found) > 100 and not any(current(source) for source in found)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run(["make", "-C", str(tmp_path), "bytecode", f"BIN={os.path.dirname(sys.executable)}"],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert [os.path.relpath(source, package) for source in found if not current(source)] == []
