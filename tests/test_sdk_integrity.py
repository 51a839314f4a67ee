"""The sdk folder in machine state (the `hills` package evaluators import,
its bytecode and the `bin/python` wrapper) is sealed when made: a file
planted or edited there is noticed before the next eval, which runs on a
fresh copy."""

import os
from pathlib import Path

import pytest

from testing.eval_fixtures import hills, hills_home, make_hill, on_machine, submission
from hills.disk import uvenv
from hills.evidence import report
from hills.run import env

# Its metric is 1.0 unless something planted ran before or while it imported
# the sdk and spaces.
PROBE_EVAL = """\
    import builtins
    import os

    def eval(submission, *, final=False, **params):
        from hills import sdk, spaces  # noqa: F401

        planted = os.environ.get("HILLS_TEST_PWNED") or getattr(builtins, "PWNED", None)
        value = 0.0 if planted else 1.0
        return {"passed": True, "metrics": [{"name": "clean", "value": value, "direction": "max"}],
                "details": {"planted": planted}}
    """

PLANTS = {
    "sitecustomize.py": "import builtins\nbuiltins.PWNED = 'sitecustomize'\n",
    "zz-evil.pth": "import os; os.environ['HILLS_TEST_PWNED'] = 'pth'\n",
}


@pytest.fixture(scope="module")
def probe(module_machine):
    with on_machine(module_machine):
        return make_hill("sdkprobe", PROBE_EVAL)


@pytest.fixture
def sub(tmp_path):
    return submission(tmp_path / "sub", {"answer.txt": "1\n"})


def sdk_dir():
    return hills_home() / "sdk" / report.tool_identity()["sha256"][:16]


def scored(sub):
    result = hills("eval", sub, "-H", "sdkprobe")
    assert result.code == 0, result.output
    return result


def assert_clean(result):
    assert result.report["details"]["planted"] is None, result.report["details"]
    assert result.report["metrics"][0]["value"] == 1.0
    assert result.report["official"] is True and result.report["status"] == "passing"


def plant(name):
    if name == "spaces.py":
        spaces = sdk_dir() / "hills" / "spaces.py"
        spaces.write_text(spaces.read_text() + "\nimport builtins\nbuiltins.PWNED = 'spaces'\n")
        for cached in (sdk_dir() / "hills" / "__pycache__").glob("spaces.*"):
            cached.unlink()
        return spaces
    planted = sdk_dir() / name
    planted.write_text(PLANTS[name])
    return planted


@pytest.mark.parametrize("name", ["sitecustomize.py", "zz-evil.pth", "spaces.py"])
def test_a_planted_sdk_file_is_noticed_and_the_folder_made_again(probe, sub, name):
    assert_clean(scored(sub))
    planted = plant(name)
    result = scored(sub)
    assert "sdk folder" in result.err and "changed since it was made" in result.err
    assert_clean(result)
    if name == "spaces.py":
        assert "PWNED" not in planted.read_text()
    else:
        assert not planted.exists()
    again = scored(sub)
    assert "changed since it was made" not in again.err  # sealed again
    assert_clean(again)


@pytest.mark.parametrize("name", ["sitecustomize.py", "spaces.py"])
def test_without_the_check_a_planted_file_rewrites_the_metrics(probe, sub, name, monkeypatch):
    """What the seal closes: the same plant, the check made to pass."""
    assert_clean(scored(sub))
    plant(name)
    with monkeypatch.context() as patch:
        patch.setattr(env, "_sdk_intact", lambda root: os.path.isdir(root))
        result = scored(sub)
    assert result.report["metrics"][0]["value"] == 0.0
    assert result.report["details"]["planted"]
    assert_clean(scored(sub))


def test_an_edit_that_keeps_size_and_mtime_is_noticed(probe, sub):
    assert_clean(scored(sub))
    wrapper = sdk_dir() / "bin" / "python"
    text, before = wrapper.read_text(), wrapper.stat()
    edited = text.replace('exec "$HILLS_REAL_PYTHON" -I', 'exec "$HILLS_REAL_PYTHON"  -I')[:len(text)]
    assert edited != text
    wrapper.write_text(edited)
    os.utime(wrapper, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert wrapper.stat().st_size == before.st_size and wrapper.stat().st_mtime_ns == before.st_mtime_ns
    assert not env._sdk_intact(str(sdk_dir()))
    result = scored(sub)
    assert "changed since it was made" in result.err
    assert wrapper.read_text() == text
    assert_clean(result)


def test_a_forged_or_missing_seal_means_a_new_folder(probe, sub):
    assert_clean(scored(sub))
    seal = Path(str(sdk_dir()) + ".seal.json")
    seal.write_text('{"value": {}, "mac": "' + "0" * 64 + '"}\n')
    assert "changed since it was made" in scored(sub).err
    seal.unlink()
    assert "changed since it was made" in scored(sub).err
    assert env._sdk_intact(str(sdk_dir()))


def test_hills_calls_uv_with_files_shared_with_its_cache_whatever_the_caller_set(monkeypatch):
    # D-326: a clone where the file system makes one, else a hard link, under a content-checked seal.
    monkeypatch.setenv("UV_LINK_MODE", "copy")
    assert uvenv._uv_env()["UV_LINK_MODE"] == "clone"
