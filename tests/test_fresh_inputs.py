"""Fresh inputs in the bin-packing template: hill.yaml `solution.generate`
writes each replicate's fresh instances from the secret seed before the
solution phase; the scorer draws the same ones. A submission that replays
answers remembered for the public instances fails on them; with the
generator taken out of hill.yaml (the control) the same replay passes."""

import json
from pathlib import Path

import pytest

from testing.util import needs_bwrap
from testing.eval_fixtures import hills, last_report, submission, tree_of

pytestmark = needs_bwrap

# Packs only the instances it has seen, from a table it carries; anything
# else gets its first item alone in one bin (an invalid packing).
REPLAY = """\
import json
from pathlib import Path
KNOWN = json.loads(Path(__file__).with_name("known.json").read_text())

def pack(items, capacity):
    key = json.dumps([capacity, items])
    return KNOWN.get(key, [[0]])
"""


def _known(hill_dir):
    """Next-fit packings of the public instances, keyed by their content."""
    known = {}
    for path in sorted((hill_dir / "data" / "validation").glob("*.json")):
        instance = json.loads(path.read_text())
        bins, room = [], 0
        for index, size in enumerate(instance["items"]):
            if not bins or size > room:
                bins.append([])
                room = instance["capacity"]
            bins[-1].append(index)
            room -= size
        known[json.dumps([instance["capacity"], instance["items"]])] = bins
    return json.dumps(known)


def _hill(name, generate=True):
    created = hills("new", name, "-t", "bin-packing")
    assert created.code == 0, created.output
    hill_dir = Path(created.out.strip())
    if not generate:
        text = (hill_dir / "hill.yaml").read_text()
        (hill_dir / "hill.yaml").write_text(text.replace('  generate: ["{python}", make_inputs.py]\n', ""))
    committed = hills("commit", name, "-m", "first")
    assert committed.code == 0, committed.output
    return hill_dir


@pytest.mark.slow
def test_the_example_packs_fresh_instances_and_records_them(tmp_path):
    hill_dir = _hill("fresh")
    result = hills("eval", hill_dir / "examples" / "first-fit-decreasing", "-H", "fresh", "--repeat", "2")
    assert result.code == 0, result.output
    report = last_report("fresh", tree_of(hill_dir))
    assert "fresh_excess_bins" in report["side_metrics"]
    assert len(set(report["seeds"]["secret"])) == 2
    # The template's honest example tries nothing outside its view.
    assert report["audit"]["runs"] == 2 and report["audit"]["attempts"] == 0, report["audit"]


@pytest.mark.slow
def test_a_replay_of_remembered_answers_fails_on_the_fresh_instances(tmp_path):
    hill_dir = _hill("replayed")
    folder = submission(tmp_path / "sub", {"solution.py": REPLAY, "known.json": _known(hill_dir)})
    result = hills("eval", folder, "-H", "replayed")
    report = last_report("replayed", tree_of(hill_dir))
    assert result.code == 1 and report["status"] == "buggy", report["reason"]
    assert "fresh instance 'fresh-1'" in report["reason"]


def test_control_without_the_generator_the_replay_passes(tmp_path):
    hill_dir = _hill("unfresh", generate=False)
    folder = submission(tmp_path / "sub", {"solution.py": REPLAY, "known.json": _known(hill_dir)})
    result = hills("eval", folder, "-H", "unfresh")
    assert result.code == 1, result.output
    report = last_report("unfresh", tree_of(hill_dir))
    # The scorer still draws fresh instances from the secret seed, but no
    # generator handed them to the solution phase: nothing packed them.
    assert "fresh instance 'fresh-1' has no packing" in report["reason"]


@pytest.mark.parametrize("value", [["{python}"], [], 3, {"a": 1}])
def test_a_bad_generate_is_named(tmp_path, value):
    from hills.disk import manifest
    from hills.base.errors import UsageError

    text = ('spec: 1\nname: h\nversion: "1"\nevaluator: {shape: function}\n'
            f"solution:\n  run: [x]\n  outputs: [o]\n  generate: {json.dumps(value)}\n")
    if value == ["{python}"]:
        manifest.parse_text(text, "hill.yaml", "h")  # a one-word command is a command
        return
    with pytest.raises(UsageError) as caught:
        manifest.parse_text(text, "hill.yaml", "h")
    assert "solution.generate" in caught.value.message
