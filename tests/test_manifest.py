"""hill.yaml validation and the check gate: every broken manifest, missing
file or failing hill test is a FAIL line naming the key or file, `hills
check` exits 1, and `hills commit` refuses (exit 1) without moving HEAD."""

import copy
import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest

from testing.util import git, run_cli
from hills.checks import check
from hills.disk import manifest, schema
from hills.base.errors import UsageError
from testing.key_fixtures import key_paths, put, wrong_type

# (what is broken, edit applied to the circle-packing hill.yaml, words the FAIL line must hold)
MANIFEST_ERRORS = [
    ("unknown-key", lambda t: t.replace("timeout: 60", "timout: 60"),
     ["unknown key 'timout'"]),
    ("mistyped-param-type", lambda t: t.replace("type: int\n", "type: integer\n"),
     ["key 'params.n.type'", "expected one of int, float, str, bool, categorical", "got 'integer'"]),
    ("missing-evaluator", lambda t: re.sub(r"evaluator:\n(  .*\n)+", "", t),
     ["missing key 'evaluator'", "expected a mapping with shape and entry"]),
    ("negative-timeout", lambda t: t.replace("timeout: 60", "timeout: -5"),
     ["key 'timeout'", "expected a number of seconds greater than 0", "got -5"]),
    ("bad-blobs-threshold", lambda t: t + "blobs:\n  threshold: lots\n",
     ["key 'blobs.threshold'", "expected a size in bytes", "got 'lots'"]),
    ("unknown-param-key", lambda t: t.replace("    primary: true\n", "    primary: true\n    lo: 1\n"),
     ["unknown key 'params.n.lo'"]),
    ("name-mismatch", lambda t: t.replace('name: "circle-packing"', 'name: "other"'),
     ["key 'name'", "expected 'circle-packing' (the hill's folder name)", "got 'other'"]),
    ("default-out-of-bounds", lambda t: t.replace("default: 26", "default: 500"),
     ["key 'params.n.default'", "must be in [1, 100]", "got 500"]),
    ("not-yaml", lambda t: t + "params: [unclosed\n",
     ["not valid YAML"]),
]


@pytest.fixture
def hill(shared_hill, project):
    """The module's committed hill; any file a test changes is put back."""
    saved = {rel: (shared_hill / rel).read_bytes() for rel in ("hill.yaml", "eval.py", "pyproject.toml")}
    head = git(shared_hill, "rev-parse", "HEAD").out.strip()
    yield shared_hill
    for rel, data in saved.items():
        (shared_hill / rel).write_bytes(data)
    shutil.rmtree(shared_hill / "tests" / "broken", ignore_errors=True)
    extra = shared_hill / "tests" / "test_broken.py"
    if extra.exists():
        extra.unlink()
    assert git(shared_hill, "rev-parse", "HEAD").out.strip() == head, "a refused commit moved HEAD"


def fail_lines(result):
    return [line.strip() for line in result.out.splitlines() if line.strip().startswith("FAIL ")]


@pytest.mark.slow
@pytest.mark.parametrize("case, edit, words", MANIFEST_ERRORS, ids=[c[0] for c in MANIFEST_ERRORS])
def test_manifest_error_fails_check_and_commit(hill, case, edit, words):
    path = hill / "hill.yaml"
    path.write_text(edit(path.read_text()))

    checked = run_cli("check", "circle-packing")
    assert checked.code == 1, checked.output
    lines = fail_lines(checked)
    assert len(lines) == 1 and lines[0].split()[1] == "manifest", checked.out
    assert str(path) in lines[0]
    for word in words:
        assert word in lines[0]
    assert checked.out.rstrip().endswith("circle-packing: 1 check(s) failed")

    as_json = json.loads(run_cli("check", "circle-packing", "--json").out)
    assert as_json["passed"] is False
    assert as_json["checks"][0]["check"] == "manifest" and as_json["checks"][0]["status"] == "fail"

    committed = run_cli("commit", "circle-packing", "-m", "broken")
    assert committed.code == 1, committed.output
    assert committed.error_lines[0].startswith("error: hill 'circle-packing' failed check 'manifest': ")
    for word in words:
        assert word in committed.err
    assert committed.out == ""


def test_missing_evaluator_file_fails_layout(hill):
    (hill / "eval.py").unlink()
    checked = run_cli("check", "circle-packing")
    assert checked.code == 1
    assert fail_lines(checked) == ["FAIL  layout              missing: eval.py"]
    committed = run_cli("commit", "circle-packing", "-m", "no evaluator")
    assert committed.code == 1
    assert committed.error_lines == ["error: hill 'circle-packing' failed check 'layout': missing: eval.py"]


def test_evaluator_that_does_not_bind_fails_the_contract(hill):
    (hill / "eval.py").write_text("def eval(submission, *, final=False):\n    return {}\n")
    checked = run_cli("check", "circle-packing", "--no-tests")
    assert checked.code == 1
    lines = fail_lines(checked)
    assert len(lines) == 1 and lines[0].startswith("FAIL  evaluator contract")
    assert "tolerance" in lines[0] or "n" in lines[0]


@pytest.mark.slow
def test_failing_hill_tests_block_the_commit(hill):
    (hill / "tests" / "test_broken.py").write_text("def test_always_fails():\n    assert 1 == 2\n")
    checked = run_cli("check", "circle-packing")
    assert checked.code == 1
    lines = fail_lines(checked)
    assert len(lines) == 1 and lines[0].startswith("FAIL  tests"), checked.out
    assert "1 failed" in lines[0]
    assert "test_always_fails" in checked.out
    # --no-tests skips exactly that check.
    assert run_cli("check", "circle-packing", "--no-tests").code == 0

    committed = run_cli("commit", "circle-packing", "-m", "broken tests")
    assert committed.code == 1
    assert committed.error_lines[0].startswith("error: hill 'circle-packing' failed check 'tests': ")
    assert "nothing was committed" in committed.err


@pytest.mark.slow
def test_stale_uv_lock_fails_dependencies_even_after_a_passing_check(hill):
    assert run_cli("check", "circle-packing", "--no-tests").code == 0  # uv's yes is now remembered
    pyproject = hill / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "0.1.0"', 'version = "0.2.0"'))
    checked = run_cli("check", "circle-packing", "--no-tests")
    assert checked.code == 1, checked.output
    lines = fail_lines(checked)
    assert len(lines) == 1 and lines[0].startswith("FAIL  dependencies"), checked.out
    committed = run_cli("commit", "circle-packing", "-m", "stale lock")
    assert committed.code == 1
    assert committed.error_lines[0].startswith("error: hill 'circle-packing' failed check 'dependencies'")


@pytest.mark.slow
def test_check_passes_on_a_good_hill(hill):
    checked = run_cli("check", "circle-packing")
    assert checked.code == 0, checked.output
    names = [line[8:27].strip() for line in checked.out.splitlines() if line.strip().startswith("ok")]
    assert names == ["manifest", "layout", "readme", "dependencies", "answer leak", "evaluator contract", "tests",
                     "isolation", "leak probe", "cheat corpus"]
    assert checked.out.rstrip().endswith("circle-packing: all checks passed")


def test_nothing_to_commit(hill):
    head = git(hill, "rev-parse", "HEAD").out.strip()
    committed = run_cli("commit", "circle-packing", "-m", "again")
    assert committed.code == 1
    assert committed.error_lines == [f"error: nothing to commit: hill 'circle-packing' is unchanged since {head[:12]}"]
    assert "hint: change the hill first; 'hills status circle-packing' shows what changed" in committed.err
    assert committed.out == ""


@pytest.mark.slow
def test_the_default_template_note_to_the_author_fails_check_and_commit(project):
    created = run_cli("new", "demo")
    assert created.code == 0, created.output
    assert "hint: write the task in .hills/demo/README.md" in created.err
    readme = project / ".hills" / "demo" / "README.md"
    assert check.AUTHOR_NOTE in readme.read_text()
    checked = run_cli("check", "demo", "--no-tests")
    assert checked.code == 1, checked.output
    assert fail_lines(checked) == ["FAIL  readme              README.md still holds the template's note for the "
                                   "hill's author (the <!-- ... --> block): write the task there and delete the note"]
    # The checks after it still ran: the author sees everything at once.
    assert "evaluator contract" in checked.out
    committed = run_cli("commit", "demo", "-m", "as generated")
    assert committed.code == 1
    assert committed.error_lines[0].startswith("error: hill 'demo' failed check 'readme': README.md still holds")
    assert git(readme.parent, "rev-parse", "--verify", "-q", "refs/heads/main").code != 0
    readme.write_text("# demo\n\nFind a number as large as you can; answer.txt holds it.\n")
    assert run_cli("check", "demo", "--no-tests").code == 0
    assert run_cli("commit", "demo", "-m", "the task written").code == 0


def test_empty_commit_message_is_a_usage_error(hill):
    committed = run_cli("commit", "circle-packing", "-m", " ")
    assert committed.code == 2
    assert committed.error_lines == ["error: empty commit message"]


def test_missing_message_option_is_a_usage_error(hill):
    committed = run_cli("commit", "circle-packing")
    assert committed.code == 2
    assert committed.error_lines == ["error: missing option '-m' / '--message'"]


def test_unknown_hill_is_a_usage_error(project):
    result = run_cli("check", "nope")
    assert result.code == 2
    assert result.error_lines == ["error: no hill named 'nope'"]
    assert "hint: see 'hills list'" in result.err


# The core function, without the CLI: every error names the file and the key.

BASE = """spec: 1
name: demo
version: "1"
evaluator: {shape: function, entry: eval.py}
"""


def parse(extra="", base=BASE):
    return manifest.parse_text(base + extra, "demo/hill.yaml", "demo")


def test_parse_defaults():
    parsed = parse()
    assert parsed["timeout"] == manifest.DEFAULT_TIMEOUT
    assert parsed["blobs"] == {"track": [], "threshold": manifest.DEFAULT_BLOB_THRESHOLD}
    assert parsed["params"] == {} and parsed["metrics"] == [] and parsed["replicates"] == 1


@pytest.mark.parametrize("threshold, size", [("1KB", 1000), ("1KiB", 1024), ("2 MB", 2_000_000), (512, 512)])
def test_parse_sizes(threshold, size):
    assert parse(f"blobs: {{threshold: {threshold!r}}}\n")["blobs"]["threshold"] == size


@pytest.mark.parametrize("extra, words", [
    ("timout: 5\n", "'demo/hill.yaml': unknown key 'timout'"),
    ("timeout: 0\n", "'demo/hill.yaml': key 'timeout': expected a number of seconds greater than 0, got 0"),
    ("timeout: .nan\n", "key 'timeout'"),
    ("params: {k: {type: integer, default: 1}}\n", "key 'params.k.type': expected one of"),
    ("params: {k: {type: int}}\n", "missing key 'params.k.default'"),
    ("params: {k: {type: int, default: 1.5}}\n", "key 'params.k.default'"),
    ("params: {k: {type: categorical, default: a, choices: []}}\n",
     "key 'params.k.choices': expected a non-empty list"),
    ("blobs: {threshold: -1}\n", "key 'blobs.threshold': expected a size in bytes"),
    ("blobs: {treshold: 1}\n", "unknown key 'blobs.treshold'"),
    ("metrics: [{name: m, direction: up}]\n", "key 'metrics[0].direction': expected max or min, got 'up'"),
    ("replicates: 0\n", "key 'replicates': expected an integer >= 1, got 0"),
    ("sandbox: docker\n", "key 'sandbox': expected auto, bwrap or none, got 'docker'"),
])
def test_parse_errors_name_file_and_key(extra, words):
    with pytest.raises(UsageError) as caught:
        parse(extra)
    assert words in caught.value.message


def test_parse_missing_spec():
    with pytest.raises(UsageError) as caught:
        parse(base=BASE.replace("spec: 1\n", ""))
    assert caught.value.message == "'demo/hill.yaml': missing key 'spec': expected the integer 1"


def test_command_evaluator_needs_metrics():
    base = BASE.replace("{shape: function, entry: eval.py}", "{shape: command, entry: ./verify.sh}")
    with pytest.raises(UsageError) as caught:
        parse(base=base)
    assert "missing key 'metrics'" in caught.value.message
    parsed = parse("metrics: [{name: score, direction: max}]\n", base=base)
    assert parsed["evaluator"] == {"shape": "command", "entry": ["./verify.sh"]}


# The key table: one declaration drives validation, defaults and hill.yaml(5).

MAN_PAGE = Path(__file__).resolve().parent.parent / "man" / "hill.yaml.5"
VALID = {"spec": 1, "name": "demo", "version": "1", "evaluator": {"shape": "function", "entry": "eval.py"},
         "params": {"n": {"type": "int", "default": 1}}, "metrics": [{"name": "m", "direction": "max"}],
         "unit_tests": {"command": ["pytest"]}, "solution": {"run": ["python", "solution.py"], "outputs": ["out"]}}


def man_definitions(section: str) -> dict[str, tuple[str, str]]:
    """The definition list of one section of hill.yaml(5): term -> (label, body)."""
    text = MAN_PAGE.read_text(encoding="utf-8")
    body = text.split(f"\n.SH {section}\n", 1)[1].split("\n.SH ", 1)[0]
    found = {}
    for entry in ("\n" + body).split("\n.TP\n")[1:]:
        term, _, rest = entry.partition("\n")
        match = re.fullmatch(r"\.B \\fB(\w+)\\fP(?: \((.*)\))?", term)
        assert match, term
        found[match.group(1)] = (match.group(2) or "", rest.split("\n.UNINDENT", 1)[0])
    return found


@pytest.mark.parametrize("section, table", [("KEYS", manifest.KEYS), ("PARAMS", manifest.PARAM_KEYS),
                                            ("METRICS", manifest.METRIC_KEYS)])
def test_the_key_table_is_the_man_page(section: str, table: schema.Table) -> None:
    documented = man_definitions(section)
    assert list(documented) == table.names()
    for key in table.keys:
        label, body = documented[key.name]
        assert label == key.label()
        inner = key.table()
        if inner is not None and inner not in (manifest.PARAM_KEYS, manifest.METRIC_KEYS):
            for sub in inner.names():
                assert f"\\fB{sub}\\fP" in body, f"{key.name}.{sub} is not in the page"


MANIFEST_PATHS = list(key_paths(manifest.KEYS))


@pytest.mark.parametrize("path, key", MANIFEST_PATHS, ids=[path for path, _ in MANIFEST_PATHS])
def test_each_key_refuses_a_wrong_type_naming_the_key(path: str, key: schema.Key) -> None:
    wrong = wrong_type(key)
    with pytest.raises(UsageError) as caught:
        manifest.validate(put(copy.deepcopy(VALID), path, wrong), "demo/hill.yaml", "demo")
    assert caught.value.message.startswith(f"'demo/hill.yaml': key '{path}': expected ")
    assert caught.value.message.endswith(", got " + ("list" if isinstance(wrong, list) else "a mapping"))


def test_defaults_come_from_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = parse()
    for key in manifest.KEYS.keys:
        if key.name in BASE or key.default is schema.ABSENT:
            continue
        expected = key.default if not isinstance(key.check, schema.Table) else {
            sub.name: sub.default for sub in key.check.keys if sub.default is not schema.ABSENT}
        if key.name == "limits":
            expected = {"time": parsed["timeout"], "cpu": parsed["timeout"], **expected}  # defaults from another key
        assert parsed[key.name] == expected, key.name
    changed = dataclasses.replace(manifest.KEYS, keys=tuple(
        dataclasses.replace(key, default=7) if key.name == "timeout" else key for key in manifest.KEYS.keys))
    monkeypatch.setattr(manifest, "KEYS", changed)
    assert parse()["timeout"] == 7 and parse()["limits"]["time"] == 7
    assert manifest.key_docs(changed)["timeout"][0] == "number, default 7"


def test_key_docs_are_the_page_sections_in_table_order() -> None:
    docs = manifest.key_docs()
    assert list(docs) == manifest.KEYS.names()
    assert docs["spec"] == ("integer, required", "The manifest format version. Must be 1.")
    assert manifest.key_docs(manifest.PARAM_KEYS)["primary"][0] == "boolean, default false"
