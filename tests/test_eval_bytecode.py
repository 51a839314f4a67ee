"""The bytecode an evaluator starts from: made by hills for the pristine
tree and the sdk folder, hash-checked against its source, and sealed with
the tree, so an edited source or forged bytecode is never what runs."""

import importlib.util
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testing.eval_fixtures import SCORE_EVAL, hills, hills_home, make_hill, on_machine, submission, tree_of

from hills.run import env

FORGED_EVAL = """\
def eval(submission, *, final=False, **params):
    return {"passed": True, "metrics": [{"name": "total", "value": 1e9, "direction": "max"}]}
"""


@pytest.fixture(scope="module")
def compiled(module_machine):
    with on_machine(module_machine):
        return make_hill("compiled", SCORE_EVAL)


def score(tmp_path, value=2.5):
    result = hills("eval", submission(tmp_path / "sub", {"score.txt": f"{value}\n"}), "-H", "compiled")
    assert result.code == 0, result.output
    return result.report


def pristine(hill_dir):
    return hills_home() / "state" / f"compiled@{tree_of(hill_dir)}" / "tree"


def pyc_of(source):
    return Path(importlib.util.cache_from_source(str(source)))


def checked_hash_of(pyc):
    """The source hash a hash-checked pyc records, or None for another kind."""
    data = pyc.read_bytes()
    assert data[:4] == importlib.util.MAGIC_NUMBER
    flags = int.from_bytes(data[4:8], "little")
    return data[8:16] if flags == 0b11 else None


def test_the_tree_the_run_and_the_sdk_hold_hash_checked_bytecode(compiled, tmp_path):
    report = score(tmp_path)
    source = pristine(compiled) / "eval.py"
    assert checked_hash_of(pyc_of(source)) == importlib.util.source_hash(source.read_bytes())
    run_copy = hills_home() / "runs" / "compiled" / report["run_id"] / "hill" / "eval.py"
    assert pyc_of(run_copy).read_bytes() == pyc_of(source).read_bytes()
    sdk = Path(env.sdk_path()) / "hills"
    for name in ("shim.py", "sdk.py", "spaces.py"):
        assert checked_hash_of(pyc_of(sdk / name)) == importlib.util.source_hash((sdk / name).read_bytes())


def test_forged_bytecode_in_the_pristine_tree_is_never_run(compiled, tmp_path):
    score(tmp_path / "first")
    source = pristine(compiled) / "eval.py"
    pyc = pyc_of(source)
    # Bytecode of another evaluator, claiming the committed source's hash:
    # the loader alone would take it, the tree's seal must not.
    forged = compile(FORGED_EVAL, str(source), "exec")
    pyc.write_bytes(importlib.util.MAGIC_NUMBER + (0b11).to_bytes(4, "little")
                    + importlib.util.source_hash(source.read_bytes()) + marshal.dumps(forged))
    report = score(tmp_path / "second")
    assert report["metrics"][0]["value"] == 2.5
    assert checked_hash_of(pyc) == importlib.util.source_hash(source.read_bytes())
    assert b"1e9" not in pyc.read_bytes()


def test_an_edited_pristine_source_is_never_run(compiled, tmp_path):
    score(tmp_path / "first")
    source = pristine(compiled) / "eval.py"
    kept = os.stat(source)
    source.write_text(FORGED_EVAL)
    os.utime(source, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    report = score(tmp_path / "second")
    assert report["metrics"][0]["value"] == 2.5
    assert "1e9" not in source.read_text()


def test_bytecode_is_used_only_while_its_source_hashes_the_same(tmp_path):
    module = tmp_path / "scored_module.py"
    module.write_text("VALUE = 1\n")
    env.compile_bytecode(str(tmp_path))
    kept = os.stat(module)
    module.write_text("VALUE = 2\n")  # same size, and the same timestamps below
    os.utime(module, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    done = subprocess.run([sys.executable, "-B", "-c", "import scored_module; print(scored_module.VALUE)"],
                          cwd=tmp_path, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=""))
    assert done.stdout.strip() == "2", done.stderr


def test_a_file_that_does_not_compile_is_left_to_its_importer(tmp_path):
    (tmp_path / "broken.py").write_text("def (:\n")
    (tmp_path / "fine.py").write_text("VALUE = 1\n")
    env.compile_bytecode(str(tmp_path))
    assert not pyc_of(tmp_path / "broken.py").exists()
    assert pyc_of(tmp_path / "fine.py").exists()
