"""Environment integrity (issue 5 item 3): a cached hill environment that
changed since it was built is rebuilt before the eval and does not affect
it; the evaluator's process environment is built from an allow-list, so no
credential of the caller reaches the evaluator or the submitted code."""

import glob
import json
import os
import re
from pathlib import Path

import pytest

from testing.eval_fixtures import hills, hills_home, make_hill, on_machine, real, submission, tree_of
from hills.disk import uvenv

# Reports what it sees: whether something planted in the environment ran
# (PWNED in the environment, or a changed builtin), and the names in its own
# process environment and in that of submitted code started through the SDK.
PROBE_EVAL = """\
    import builtins
    import json
    import os
    import sys

    def eval(submission, *, final=False, **params):
        from hills import sdk

        print("evaluator output")
        child = sdk.run_submission([sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"],
                                   timeout=10, capture_output=True, text=True)
        details = {
            "pwned": os.environ.get("HILLS_TEST_PWNED"),
            "builtin": getattr(builtins, "PWNED", None),
            "env": dict(os.environ),
            "submission_env": json.loads(child.stdout or "{}"),
            "prefix": sys.prefix,
        }
        value = 0.0 if details["pwned"] or details["builtin"] else 1.0
        return {"passed": True, "metrics": [{"name": "clean", "value": value, "direction": "max"}], "details": details}
    """

SITECUSTOMIZE = """\
import builtins
import os
print("PWNED")
os.environ["HILLS_TEST_PWNED"] = "sitecustomize"
builtins.PWNED = True
"""

CREDENTIALS = {"AWS_SECRET_ACCESS_KEY": "aws-secret-123", "GITHUB_TOKEN": "ghp_token_456",
               "OPENAI_API_KEY": "sk-789", "HF_TOKEN": "hf_000", "SSH_AUTH_SOCK": "/tmp/agent.sock",
               "PYTHONSTARTUP": "/tmp/evil-startup.py", "LD_PRELOAD": "", "PYTHONHOME": ""}


@pytest.fixture(scope="module")
def probe(module_machine):
    with on_machine(module_machine):
        return make_hill("probe", PROBE_EVAL)


@pytest.fixture
def sub(tmp_path):
    return submission(tmp_path / "sub", {"answer.txt": "1\n"})


def env_dir(hill_dir):
    return hills_home() / "envs" / "probe" / tree_of(hill_dir)


def site_packages(hill_dir):
    found = glob.glob(str(env_dir(hill_dir) / "lib" / "python3*" / "site-packages"))
    assert found, f"no site-packages under {env_dir(hill_dir)}"
    return Path(found[0])


def clean_eval(sub):
    result = hills("eval", sub, "-H", "probe")
    assert result.code == 0, result.output
    return result


def assert_unaffected(result, hill_dir):
    details = result.report["details"]
    assert details["pwned"] is None and details["builtin"] is None, details
    assert result.report["metrics"][0]["value"] == 1.0
    run_dir = hills_home() / "runs" / "probe" / result.report["run_id"]
    assert "PWNED" not in (run_dir / "stdout.log").read_text()


@pytest.mark.slow
def test_a_dropped_sitecustomize_is_detected_and_the_env_rebuilt(probe, sub):
    clean_eval(sub)  # builds the environment (or reuses it)
    planted = site_packages(probe) / "sitecustomize.py"
    planted.write_text(SITECUSTOMIZE)
    assert uvenv.changed_since_built(str(env_dir(probe))) is not None
    result = clean_eval(sub)
    assert "changed since it was built" in result.err
    assert not planted.exists()
    assert_unaffected(result, probe)
    again = clean_eval(sub)
    assert "changed since it was built" not in again.err  # sealed again after the rebuild


def test_a_dropped_pth_file_is_detected(probe, sub):
    clean_eval(sub)
    (site_packages(probe) / "zz-evil.pth").write_text("import os; os.environ['HILLS_TEST_PWNED'] = 'pth'\n")
    result = clean_eval(sub)
    assert "changed since it was built" in result.err
    assert_unaffected(result, probe)


def test_an_edit_that_keeps_size_and_mtime_is_still_detected(probe, sub):
    """pyvenv.cfg flipped to see the system site-packages, its size and mtime
    put back: the ctime still changes, and the seal covers it."""
    clean_eval(sub)
    cfg = env_dir(probe) / "pyvenv.cfg"
    text = cfg.read_text()
    assert "include-system-site-packages = false" in text, text
    before = cfg.stat()
    cfg.write_text(text.replace("include-system-site-packages = false", "include-system-site-packages = true "))
    os.utime(cfg, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert cfg.stat().st_size == before.st_size and cfg.stat().st_mtime_ns == before.st_mtime_ns
    result = clean_eval(sub)
    assert "changed since it was built" in result.err
    assert "include-system-site-packages = false" in cfg.read_text()
    assert_unaffected(result, probe)


def test_a_replaced_interpreter_is_detected(probe, sub):
    clean_eval(sub)
    python = env_dir(probe) / "bin" / "python"
    target = os.path.realpath(python)
    python.unlink()
    python.write_text(f"#!/bin/sh\nexport HILLS_TEST_PWNED=wrapper\nexec {target} \"$@\"\n")
    python.chmod(0o755)
    result = clean_eval(sub)
    assert "changed since it was built" in result.err
    assert python.is_symlink() or "HILLS_TEST_PWNED" not in python.read_text()
    assert_unaffected(result, probe)


def test_a_forged_seal_does_not_pass(probe, sub):
    """The seal is a MAC with the machine key: rewriting it after planting
    a file does not make the environment look clean."""
    clean_eval(sub)
    (site_packages(probe) / "sitecustomize.py").write_text(SITECUSTOMIZE)
    seal = Path(str(env_dir(probe)) + ".seal.json")
    seal.write_text(json.dumps({"mac": "0" * 64}) + "\n")
    result = clean_eval(sub)
    assert "changed since it was built" in result.err
    assert_unaffected(result, probe)


def test_a_missing_seal_means_a_rebuild(probe, sub):
    clean_eval(sub)
    Path(str(env_dir(probe)) + ".seal.json").unlink()
    result = clean_eval(sub)
    assert "changed since it was built" in result.err and "no seal" in result.err
    assert_unaffected(result, probe)


def test_credentials_of_the_caller_reach_neither_evaluator_nor_submission(probe, sub, monkeypatch):
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    result = clean_eval(sub)
    details = result.report["details"]
    for env in (details["env"], details["submission_env"]):
        assert not set(CREDENTIALS) & set(env), sorted(set(CREDENTIALS) & set(env))
        assert not [value for value in env.values() if value in ("aws-secret-123", "ghp_token_456", "sk-789")]
    # What it does get: a PATH, HOME, and hills' own variables.
    assert "PATH" in details["env"] and details["env"]["HILLS_SUBMISSION"]
    assert details["env"]["PYTHONPATH"].startswith(str(hills_home()))
    assert "HILLS_SUBMISSION_SANDBOX" not in details["submission_env"]


def test_credentials_do_not_cross_the_real_executable_either(probe, sub):
    env = dict(os.environ, **{k: v for k, v in CREDENTIALS.items() if v})
    done = real("hills", "eval", sub, "-H", "probe", env=env)
    assert done.code == 0, done.output
    details = json.loads(done.out)["details"]
    assert not set(CREDENTIALS) & set(details["env"])
    assert not set(CREDENTIALS) & set(details["submission_env"])


def _wheel(folder):
    """A tiny pure-Python wheel, built by hand (no network, no build backend)."""
    import base64
    import hashlib
    import zipfile

    files = {"tinydep/__init__.py": b"VALUE = 41\n",
             "tinydep-0.1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinydep\nVersion: 0.1.0\n",
             "tinydep-0.1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
                                              b"Tag: py3-none-any\n"}
    record = [f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
              f"{len(data)}" for name, data in files.items()]
    files["tinydep-0.1.0.dist-info/RECORD"] = ("\n".join(record + ["tinydep-0.1.0.dist-info/RECORD,,"]) + "\n").encode()
    path = Path(folder) / "tinydep-0.1.0-py3-none-any.whl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


DEP_EVAL = """\
def eval(submission, *, final=False, **params):
    import tinydep

    return {"passed": True, "metrics": [{"name": "sum_radii", "value": float(tinydep.VALUE), "direction": "max"}]}
"""


def _hill_with_tinydep(name, wheel):
    """A committed circle-packing hill whose evaluator reads tinydep's VALUE."""
    created = hills("new", name, "-t", "circle-packing")
    assert created.code == 0, created.output
    hill_dir = Path(created.out.strip())
    pyproject = hill_dir / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(
        "dependencies = []", f'dependencies = ["tinydep @ {wheel.as_uri()}"]'))
    (hill_dir / "eval.py").write_text(DEP_EVAL)
    # 41 is no packing: the template's best known bound would make it implausible.
    manifest_path = hill_dir / "hill.yaml"
    manifest_path.write_text(re.sub(r"    (best_known|max_gain|for_params): .*\n", "", manifest_path.read_text()))
    (hill_dir / "tests" / "test_eval.py").write_text("def test_imports():\n    import eval  # noqa: F401\n")
    uvenv.lock(str(hill_dir))
    committed = hills("commit", name, "-m", "with a dependency")
    assert committed.code == 0, committed.output
    return hill_dir


@pytest.mark.slow
def test_environments_sharing_package_files_do_not_rebuild_each_other(project, tmp_path):
    """Two environments of the same packages, built from one uv cache: one
    built must not make the other look edited (each eval would rebuild the
    other hill's environment)."""
    wheel = _wheel(tmp_path / "wheels")
    for name in ("dep-a", "dep-b"):
        _hill_with_tinydep(name, wheel)
    sub = submission(tmp_path / "sub", {"circles.json": "[]\n"})  # the template's output, scored as it is
    for round_ in range(3):
        for name in ("dep-a", "dep-b"):
            result = hills("eval", sub, "-H", name)
            assert result.code == 0, result.output
            assert result.report["metrics"][0]["value"] == 41.0
            assert "changed since it was built" not in result.err, (round_, name, result.err)


@pytest.mark.slow
def test_an_edit_of_the_uv_cache_does_not_reach_an_eval(project, tmp_path, monkeypatch):
    """A cache file edited in place, its size and mtime put back: where the
    environment's file is a clone or a copy, the environment is as it was
    built; where it is a hard link of the cached file (ext4), the seal sees
    the edit (its ctime moved and its content is not the build's), and the
    eval rebuilds the environment with the packages fetched anew. Either
    way the eval scores the package as released."""
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))  # the test edits it
    hill_dir = _hill_with_tinydep("dep-c", _wheel(tmp_path / "wheels"))
    sub = submission(tmp_path / "sub", {"circles.json": "[]\n"})  # the template's output, scored as it is
    assert hills("eval", sub, "-H", "dep-c").report["metrics"][0]["value"] == 41.0
    cached = [path for path in Path(os.environ["UV_CACHE_DIR"]).rglob("__init__.py")
              if path.parent.name == "tinydep" and path.read_bytes() == b"VALUE = 41\n"]
    assert cached, "the wheel's files are not in uv's cache"
    for path in cached:
        before = path.stat()
        path.write_bytes(b"VALUE = 42\n")
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    env_dir = hills_home() / "envs" / "dep-c" / tree_of(hill_dir)
    installed = glob.glob(str(env_dir / "lib" / "python3*" / "site-packages" / "tinydep" / "__init__.py"))
    assert installed
    linked = any(Path(installed[0]).stat().st_ino == path.stat().st_ino for path in cached)
    assert Path(installed[0]).read_bytes() == (b"VALUE = 42\n" if linked else b"VALUE = 41\n")
    result = hills("eval", sub, "-H", "dep-c")
    assert result.code == 0, result.output
    assert result.report["metrics"][0]["value"] == 41.0
    if linked:
        assert "shared with uv's cache, was edited); rebuilding it, its packages fetched anew" in result.err
    else:
        assert "changed since it was built" not in result.err


def test_uv_trusts_the_machine_s_certificate_store_unless_told_otherwise(monkeypatch):
    from hills.disk import uvenv

    monkeypatch.delenv("UV_SYSTEM_CERTS", raising=False)
    monkeypatch.delenv("UV_NATIVE_TLS", raising=False)
    assert uvenv._uv_env()["UV_SYSTEM_CERTS"] == "1"
    monkeypatch.setenv("UV_SYSTEM_CERTS", "false")
    assert uvenv._uv_env()["UV_SYSTEM_CERTS"] == "false"
    monkeypatch.delenv("UV_SYSTEM_CERTS")
    monkeypatch.setenv("UV_NATIVE_TLS", "1")  # the older name, which uv still reads
    assert "UV_SYSTEM_CERTS" not in uvenv._uv_env()
