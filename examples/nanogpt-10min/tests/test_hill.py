"""Checks on the hill itself, run by `hills check` in the hill's environment
(plain asserts; tmp_path is the only fixture)."""

import json
import math
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

HILL = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HILL))

import make_data  # noqa: E402
from eval import eval as evaluate, normalize_gpu  # noqa: E402

TINY = {"n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 32}


def run_harness(tmp_path, train_source, budget=30.0, max_steps=0):
    """The solution phase as hills runs it (without the confinement): the
    harness in a copy of the submission. Returns (exit code, stderr, folder)."""
    work = tmp_path / "submission"
    work.mkdir()
    if train_source is not None:
        (work / "train.py").write_text(train_source)
    env = dict(os.environ, HILLS_PARAMS=json.dumps({"time_budget_s": budget, "max_steps": max_steps}))
    done = subprocess.run([sys.executable, str(HILL / "harness.py"), "train.py"], cwd=str(work), env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stderr, work


def save_checkpoint(folder, config=TINY, record=None):
    """A checkpoint of an untrained GPT of the TINY sizes, saved under `config`."""
    import torch

    from gpt import GPT

    torch.manual_seed(0)
    torch.save({"config": config, "model": GPT(TINY).state_dict()}, str(folder / "checkpoint.pt"))
    (folder / "run.json").write_text(json.dumps(record or {"time_budget_s": 1.0, "train_seconds": 1.0}))


def test_the_corpus_was_built_and_split_by_file():
    record = json.loads((HILL / "data" / "corpus.json").read_text())
    assert record["vocab_size"] == 256
    for split, entry in record["splits"].items():
        assert (HILL / entry["path"]).stat().st_size == entry["bytes"] > 0, split
    assert record["splits"]["validation"]["bytes"] == make_data.SPLIT_BYTES
    assert record["splits"]["train"]["bytes"] > 10 * make_data.SPLIT_BYTES
    # The split depends on the library and a salt drawn at creation, kept nowhere.
    root = sysconfig.get_paths()["stdlib"]
    files = make_data.library_files(root)
    split = make_data.splits(root, files, b"s" * 32)
    assert split == make_data.splits(root, files, b"s" * 32) != make_data.splits(root, files, b"t" * 32)
    assert sorted(split) == files and set(split.values()) == {"train", "validation", "holdout"}
    held_out = (HILL / "private" / "validation.bin").read_bytes()[:4096]
    assert held_out not in (HILL / "data" / "train.bin").read_bytes()


def test_an_untrained_model_scores_the_uniform_loss(tmp_path):
    save_checkpoint(tmp_path)
    result = evaluate(tmp_path)
    assert result["passed"] is True, result["details"]
    loss = result["metrics"][0]["value"]
    assert result["metrics"][0] == {"name": "val_loss", "value": loss, "direction": "min"}
    assert abs(loss - math.log(256)) < 0.05
    assert result["details"]["vocab_size"] == 256 and result["details"]["parameters"] > 0
    assert result["details"]["hardware"]["cpus"] >= 1
    assert result["config"][0] == {"name": "gpu", "value": result["config"][0]["value"], "primary": True}
    holdout = evaluate(tmp_path, final=True)
    assert holdout["passed"] is True and holdout["metrics"][0]["value"] != loss
    assert {"name": "mode", "value": "holdout", "primary": True} in holdout["config"]


def test_a_short_training_run_beats_the_uniform_loss(tmp_path):
    code, stderr, work = run_harness(tmp_path, (HILL / "examples" / "gpt" / "train.py").read_text(),
                                     budget=60.0, max_steps=25)
    assert code == 0, stderr
    record = json.loads((work / "run.json").read_text())
    assert record["steps"] == 25 and record["train_seconds"] < 60
    result = evaluate(work, time_budget_s=60.0, max_steps=25)
    assert result["passed"] is True, result["details"]
    assert result["metrics"][0]["value"] < math.log(256) - 0.5
    assert result["details"]["tokens_per_s"] > 0 and result["details"]["steps"] == 25


def test_a_run_past_its_budget_is_killed(tmp_path):
    code, stderr, work = run_harness(tmp_path, "import time\ntime.sleep(60)\n", budget=1.0)
    assert code == 1
    assert "error: train.py ran past its time budget of 1 s and was killed at 3 s" in stderr
    assert not (work / "run.json").exists()


def test_a_run_without_a_checkpoint_or_script_fails(tmp_path):
    code, stderr, _ = run_harness(tmp_path, "print('nothing saved')\n")
    assert code == 1 and "error: train.py wrote no checkpoint.pt" in stderr
    shutil.rmtree(tmp_path / "submission")
    code, stderr, _ = run_harness(tmp_path, None)
    assert code == 1 and "error: the submission has no train.py" in stderr


def test_a_crashing_run_fails(tmp_path):
    code, stderr, _ = run_harness(tmp_path, "raise SystemExit(3)\n")
    assert code == 1 and "error: train.py exited with status 3" in stderr


def test_broken_checkpoints_are_rejected_with_a_reason(tmp_path):
    (tmp_path / "run.json").write_text("{}")
    (tmp_path / "checkpoint.pt").write_bytes(b"not a checkpoint")
    result = evaluate(tmp_path)
    assert result["passed"] is False and "cannot be loaded" in result["details"]["reason"]
    save_checkpoint(tmp_path, dict(TINY, n_embd=15))
    result = evaluate(tmp_path)
    assert result["passed"] is False and "'n_embd' must be a multiple of 'n_head'" in result["details"]["reason"]
    save_checkpoint(tmp_path, dict(TINY, dropout=0.1))
    result = evaluate(tmp_path)
    assert result["passed"] is False and "unknown config key 'dropout'" in result["details"]["reason"]
    (tmp_path / "run.json").unlink()
    result = evaluate(tmp_path)
    assert result["passed"] is False and "run.json is missing" in result["details"]["reason"]


def test_gpu_names_are_normalized():
    table = [("NVIDIA H100 80GB HBM3", 85_000_000_000, "h100-80gb"),
             ("NVIDIA A100-SXM4-40GB", 42_400_000_000, "a100-40gb"),
             ("NVIDIA GeForce RTX 4090", 25_300_000_000, "rtx4090-24gb"),
             ("Tesla T4", 15_800_000_000, "t4-16gb")]
    for name, memory, profile in table:
        assert normalize_gpu(name, memory) == profile, name
