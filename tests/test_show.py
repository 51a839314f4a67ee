"""`hills show REPORT`: a report rendered for a person: the signature
verdict, status, metrics with their spread, the report block worst segment
first and the instances worst first; exit 1 when the report was tampered."""

import json

import pytest

from testing.command_fixtures import candidate, make_command_hill
from testing.eval_fixtures import hills, make_hill, on_machine, submission
from hills.evidence import signing, trust
from hills.views import show

# A function evaluator minimising an error, with instances and a breakdown.
ERROR_EVAL = """\
    import os
    from pathlib import Path

    def eval(submission, *, final=False):
        seed = int(os.environ["HILLS_REPLICATE_SEED"])
        error = float((Path(submission) / "score.txt").read_text()) + seed
        return {
            "passed": True,
            "metrics": [{"name": "error", "value": error, "direction": "min"}],
            "config": [{"name": "mode", "value": "validation", "primary": True}],
            "details": {},
            "instances": {"easy": 1.0 + seed, "hard": 9.0 + seed, "middling": 4.0 + seed},
            "report": {"version": 1, "segment_label": "store", "overall": {"error": error},
                       "zones": [{"zone": "store-1", "score": 2.0}, {"zone": "store-7", "score": 19.9},
                                 {"zone": "store-3", "score": 7.5}],
                       "horizons": [{"bucket": "1-12h", "score": 3.0}],
                       "residual_bias": {"mean_error": -1.2}},
        }
    """


@pytest.fixture(scope="module")
def saved(module_machine, tmp_path_factory):
    """Report files: a command-shape one with replicates, a function-shape one
    minimising, and a buggy one."""
    folder = tmp_path_factory.mktemp("reports")
    with on_machine(module_machine):
        make_command_hill("shown")
        make_hill("errors", ERROR_EVAL, extra="seeds: fixed\n")  # it scores by seed: 0..N-1
        files = {}
        runs = {
            "command": ("shown", candidate(folder / "c", case="seed", solution="print(0)\n"), ["--repeat", "5"]),
            "function": ("errors", submission(folder / "f", {"score.txt": "3"}), ["--repeat", "3"]),
            "buggy": ("shown", candidate(folder / "b", case="nan"), []),
            "warned": ("shown", candidate(folder / "w", files={"params.json": "[]"}), []),
        }
        for label, (hill, sub, args) in runs.items():
            files[label] = folder / f"{label}.json"
            result = hills("eval", sub, "-H", hill, "-o", files[label], *args)
            assert result.code in (0, 1), result.output
        return files


def lines_of(result):
    return result.out.splitlines()


@pytest.mark.slow
def test_show_renders_a_replicated_command_report(saved):
    result = hills("show", saved["command"])
    assert result.code == 0, result.output
    lines = lines_of(result)
    assert lines[0] == "signature valid"
    assert lines[1].startswith("shown @ ")
    assert "  status       PASSED   score=3 (max)" in lines
    metric = next(line for line in lines if line.startswith("  score "))
    assert metric.endswith("(max)  spread min 1 max 5 MAD 1 over 5")
    assert "side metrics (recorded, not ranked):" in lines
    assert "report (from replicate 1, the one nearest the median):" in lines
    # Worst segment first: for a max metric, the lowest score.
    zones = lines[lines.index("  by case (worst first):") + 1:][:3]
    assert [zone.split()[0] for zone in zones] == ["bad", "mid", "good"]
    assert lines[lines.index("instances (2, worst first):") + 1].split() == ["a", "2"]


def test_show_orders_worst_first_for_a_min_metric(saved):
    result = hills("show", saved["function"])
    assert result.code == 0, result.output
    lines = lines_of(result)
    assert "  status       PASSED   error=4 (min)" in lines
    assert any("spread min 3 max 5 MAD 1 over 3" in line for line in lines)
    zones = lines[lines.index("  by store (worst first):") + 1:][:3]
    assert [zone.split()[0] for zone in zones] == ["store-7", "store-3", "store-1"]
    instances = lines[lines.index("instances (3, worst first):") + 1:][:3]
    assert [line.split() for line in instances] == [["hard", "10"], ["middling", "5"], ["easy", "2"]]
    assert "  horizons:" in lines and "    bucket=1-12h  score=3" in lines
    assert "  residual_bias: {'mean_error': -1.2}" in lines


@pytest.mark.slow
def test_show_a_buggy_report_names_the_reason(saved):
    result = hills("show", saved["buggy"])
    assert result.code == 0, result.output
    assert "  status       BUGGY" in result.out
    assert "  reason       malformed result: 'score' is NaN; it must be a finite number" in result.out
    assert "metrics:" not in result.out


def test_show_reports_a_malformed_declaration_warning(saved):
    result = hills("show", saved["warned"])
    assert result.code == 0, result.output
    assert "  warning      params.json: expected a non-empty JSON object" in result.out


def test_show_exits_1_on_a_tampered_report(saved, tmp_path):
    report = json.loads(saved["command"].read_text())
    report["metrics"][0]["value"] = 300.0
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(report))
    result = hills("show", tampered)
    assert result.code == 1, result.output
    assert result.out.splitlines()[0].startswith("signature INVALID")
    assert "score=300 (max)" in result.out  # still shown, marked INVALID


@pytest.mark.parametrize("content, code, words", [
    (None, 2, "does not exist"),
    ("[1, 2]", 2, "not a JSON object"),
])
def test_show_refuses_what_is_not_a_report(tmp_path, content, code, words):
    path = tmp_path / "report.json"
    if content is not None:
        path.write_text(content)
    result = hills("show", path)
    assert result.code == code, result.output
    assert words in result.err


@pytest.mark.parametrize("status", [["passing"], {"passing": True}, 7, None])
def test_show_a_signed_object_whatever_its_status(tmp_path, status):
    path = tmp_path / "signed.json"
    keys = trust.machine_keys(for_signing=True)
    path.write_text(json.dumps(signing.self_reported({"hill": "h", "status": status}, keys)))
    result = hills("show", path)
    assert result.code == 0, result.output
    assert result.out.splitlines()[2] == "  status       ?"


def test_render_marks_self_reported_blocks_and_failed_unit_tests():
    out = []
    report = {"hill": "h", "tree_hash": None, "status": "failing", "official": False, "trust": "self-reported",
              "metrics": [{"name": "m", "value": 1.0, "direction": "max"}],
              "unit_tests": {"passed": False, "exit_code": 1, "duration_s": 0.1},
              "report": {"zones": [{"zone": "z", "score": 1.0}]}, "instances": {}}
    show.render(report, "signature valid", out.append)
    assert "unit tests:  FAILED (exit code 1)" in out
    assert "report (self-reported):" in out
    assert any("unofficial: self-reported" in line for line in out)


@pytest.mark.parametrize("primary, legend", [(False, False), (True, True)])
def test_the_primary_legend_is_shown_only_with_a_primary_entry(capsys, primary, legend):
    from hills.cli import summary as eval_summary

    report = {"hill": "h", "tree_hash": "a" * 40, "status": "passing", "official": True, "official_reason": None,
              "params": {}, "metrics": [{"name": "m", "value": 1.0, "direction": "max"}],
              "config": [{"name": "mode", "value": "validation", "primary": primary},
                         {"name": "isolation", "value": "bwrap", "primary": False}]}
    out = []
    show.render(report, "signature valid", out.append)
    shown = [line for line in out if line.startswith("  config")]
    eval_summary.render(report, "sub")
    summary = [line for line in capsys.readouterr().err.splitlines() if line.startswith("  config")]
    expected = "  config       mode=validation" + ("*" if primary else "") + "  isolation=bwrap" \
        + ("   (* = primary)" if legend else "")
    assert shown == summary == [expected]
