"""The nanogpt-10min template on the CPU: `hills new` builds its corpus
from this interpreter's library, `hills commit` passes its checks (the
leak probe and cheat corpus at the params' `check:` values), a 30 s
training run scores a finite val_loss below ln(vocab_size), `--final`
reads the holdout split, and a report from other hardware ranks apart.

torch comes from PyPI into the hill's own environment, about 3 GB to
download once: these tests keep uv's cache in the suite's lasting one
(testing.util.UV_CACHE: UV_CACHE_DIR as given, else in the checkout),
not in the session's throwaway one, and never in the real HOME."""

import json
import math
import re
from pathlib import Path

import pytest

from testing.util import UV_CACHE, needs_bwrap, run_cli
from hills.evidence import signing, trust
from hills.views import rank

# Slow as a whole: every test needs the committed nanogpt hill (torch, a gate that trains).
pytestmark = pytest.mark.slow

KEY = trust.Keys(None, None, b"n" * 32, can_sign=True)


@pytest.fixture(scope="module")
def nanogpt(module_machine):
    """`hills new nano -t nanogpt-10min`, committed (so checked) once."""
    with pytest.MonkeyPatch.context() as patch:
        module_machine.apply(patch)
        patch.setenv("UV_CACHE_DIR", UV_CACHE)
        patch.chdir(module_machine.project)
        created = run_cli("new", "nano", "-t", "nanogpt-10min")
        assert created.code == 0, created.output
        committed = run_cli("commit", "nano", "-m", "first version")
        assert committed.code == 0, committed.output
        yield Path(created.out.strip()), committed


@pytest.fixture
def cached_uv(nanogpt, monkeypatch):
    monkeypatch.setenv("UV_CACHE_DIR", UV_CACHE)
    return nanogpt[0]


def test_the_corpus_is_built_from_this_interpreters_library(cached_uv):
    import sys
    import sysconfig

    hill_dir = cached_uv
    record = json.loads((hill_dir / "data" / "corpus.json").read_text())
    assert record["source"] == "the standard library sources of Python " + sys.version.split()[0]
    assert record["splits"]["validation"]["bytes"] == record["splits"]["holdout"]["bytes"] == 256 * 1024
    train = (hill_dir / "data" / "train.bin").read_bytes()
    assert len(train) == record["splits"]["train"]["bytes"] > 5_000_000
    sys.path.insert(0, str(hill_dir))
    try:
        import make_data
    finally:
        sys.path.remove(str(hill_dir))
    files = make_data.library_files(sysconfig.get_paths()["stdlib"])
    assert files == sorted(files) and "os.py" in files and not any(rel.startswith("test/") for rel in files)
    # Which files are held out depends on a salt drawn at creation: train.bin
    # opens with one of the library's first files (each is held out with a
    # chance of 1 in 10), whole, between NUL bytes.
    sources = [(Path(sysconfig.get_paths()["stdlib"]) / rel).read_bytes() for rel in files[:20]]
    assert any(train.startswith(b"\0" + source + b"\0") for source in sources if source)
    # train.bin is a public blob; the held-out splits are private, bound by private.lock.
    assert "data/train.bin" in (hill_dir / "blobs.lock").read_text()
    private_lock = (hill_dir / "private.lock").read_text()
    assert "validation.bin" in private_lock and "holdout.bin" in private_lock


@needs_bwrap
def test_the_commit_passed_the_probe_and_the_corpus(nanogpt):
    _, committed = nanogpt
    lines = dict(re.findall(r"^\s+(?:ok|warn|FAIL)\s+(\S+(?: \S+)?)\s{2,}(.*)$", committed.err, re.M))
    statuses = {name: status for status, name in re.findall(r"^\s+(ok|warn|FAIL)\s+(\S+(?: \S+)?)\s{2,}",
                                                             committed.err, re.M)}
    assert statuses["leak probe"] == statuses["cheat corpus"] == statuses["tests"] == "ok", committed.err
    assert "none got through" in lines["cheat corpus"] and "confined" in lines["leak probe"]


@needs_bwrap
def test_a_30_second_run_on_the_cpu_beats_the_untrained_loss(cached_uv):
    result = run_cli("eval", "-H", "nano", cached_uv / "examples" / "gpt", "-p", "time_budget_s=30")
    assert result.code == 0, result.output
    report = result.report
    loss = report["metrics"][0]
    assert loss["name"] == "val_loss" and loss["direction"] == "min"
    assert math.isfinite(loss["value"]) and loss["value"] < math.log(256) - 0.5, loss
    config = {entry["name"]: entry for entry in report["config"]}
    assert config["gpu"] == {"name": "gpu", "value": "cpu", "primary": True}
    assert config["time_budget_s"]["value"] == 30.0 and config["mode"]["value"] == "validation"
    details = report["details"]
    assert details["vocab_size"] == 256 and details["parameters"] > 100_000
    assert details["tokens_per_s"] > 0 and 0 < details["train_seconds"] <= 30 * 1.02 + 2
    print(f"val_loss {loss['value']:.4f} after {details['steps']} steps in {details['train_seconds']} s "
          f"(ln 256 = {math.log(256):.4f})")
    apart = hardware_apart(report)
    assert apart is not None


def hardware_apart(report):
    """The same report from an H100 scores better, and ranks in a group of
    its own: never above or beside the CPU's."""
    cpu = {key: value for key, value in report.items() if key != "signature"}
    gpu = json.loads(json.dumps(cpu))
    for entry in gpu["config"]:
        if entry["name"] == "gpu":
            entry["value"] = "h100-80gb"
    gpu["metrics"][0]["value"] = cpu["metrics"][0]["value"] / 2
    twin = json.loads(json.dumps(cpu))
    twin["metrics"][0]["value"] = cpu["metrics"][0]["value"] + 0.1
    for item in (cpu, gpu, twin):
        signing.seal(item, KEY)
    ranked = rank.rank([("cpu", cpu), ("h100", gpu), ("cpu-worse", twin)], KEY)
    groups = sorted([entry["source"] for entry in group["entries"]] for group in ranked["groups"])
    assert groups == [["cpu", "cpu-worse"], ["h100"]], ranked
    return groups


@needs_bwrap
def test_final_scores_the_holdout_split(cached_uv):
    result = run_cli("eval", "-H", "nano", cached_uv / "examples" / "gpt", "--final", "-p", "time_budget_s=20")
    assert result.code == 0, result.output
    config = {entry["name"]: entry["value"] for entry in result.report["config"]}
    assert config["mode"] == "holdout" and result.report["final"] is True
    assert math.isfinite(result.report["metrics"][0]["value"])


@needs_bwrap
def test_a_run_past_its_budget_is_buggy(cached_uv, tmp_path):
    (tmp_path / "train.py").write_text("import time\ntime.sleep(30)\n")
    result = run_cli("eval", "-H", "nano", str(tmp_path), "-p", "time_budget_s=2")
    assert result.code == 1
    assert result.report["status"] == "buggy"
    assert "train.py ran past its time budget of 2 s and was killed at 4 s" in result.report["reason"]


def test_a_budget_out_of_bounds_is_refused(cached_uv):
    result = run_cli("eval", "-H", "nano", cached_uv / "examples" / "gpt", "-p", "time_budget_s=0.5")
    assert result.code == 2
    assert "time_budget_s" in result.err and "error:" in result.err

