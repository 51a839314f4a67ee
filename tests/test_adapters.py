"""The loop adapters (hills/adapters, docs/adapters.md), each driven by the
real loop package through that package's own code that loads and calls an
evaluator: OpenEvolve's Evaluator, ShinkaEvolve's JobScheduler (which runs
evaluate.py and reads metrics.json and correct.json), GEPA's
optimize_anything with a stub reflection model. No model, no API key.
Every report they make is a real, signed and logged hills eval."""

import asyncio
import importlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testing.eval_fixtures import REPO_ROOT, hills, make_hill, on_machine
from testing.util import needs_bwrap

from hills.adapters import gepa_eval, loopcore, openevolve_eval, shinka_eval
from hills.base.errors import HillsError, UsageError

# The test extra installs the loops: a missing one fails here, never skips.
openevolve_evaluator = importlib.import_module("openevolve.evaluator")
openevolve_config = importlib.import_module("openevolve.config")
shinka_scheduler = importlib.import_module("shinka.launch.scheduler")
gepa_oa = importlib.import_module("gepa.optimize_anything")

ADAPTERS = REPO_ROOT / "hills" / "adapters"
DOCS = REPO_ROOT / "docs" / "adapters.md"
# Where the examples of the loops are written, each block marked
# `<!-- example: LOOP -->`; the README's section "Use hills from your loop"
# holds the same blocks.
EXAMPLE_SOURCES = [DOCS, REPO_ROOT / "README.md"]

# Candidates for circle-packing, each a solution.py (the file its solution
# phase runs): a valid 5 x 5 grid plus one small circle, one that crashes,
# and one whose packing breaks the rules.
GRID = textwrap.dedent("""\
    import json
    circles = [[0.1 + 0.2 * (i % 5), 0.1 + 0.2 * (i // 5), 0.1] for i in range(25)] + [[0.2, 0.2, 0.0414]]
    json.dump(circles, open("circles.json", "w"))
    """)
CRASH = "raise RuntimeError('the candidate broke on purpose')\n"
EMPTY = "open('circles.json', 'w').write('[]')\n"

# A hill whose one metric is minimised: the number solution.py writes.
COST_EVAL = '''
from pathlib import Path

def eval(submission, *, final=False):
    out = Path(submission) / "out.txt"
    text = out.read_text().strip() if out.is_file() else ""
    try:
        value = float(text)
    except ValueError:
        return {"passed": False, "metrics": [{"name": "cost", "value": 0.0, "direction": "min"}],
                "config": [], "details": {"reason": f"out.txt holds no number: {text[:20]!r}"}}
    return {"passed": True, "metrics": [{"name": "cost", "value": value, "direction": "min"}],
            "config": [], "details": {}}
'''
SOLUTION_PHASE = """\
    solution:
      run: ["{python}", solution.py]
      when: solution.py
      outputs: [out.txt]
    """

# The attack: a hill whose scorer pays 1.0 for its private answer, and a
# candidate that tries to read that answer where the hill keeps it.
SECRET = "the-private-answer-7f3a\n"
STEAL_EVAL = '''
from pathlib import Path

def eval(submission, *, final=False):
    answer = (Path(__file__).parent / "private" / "answer.txt").read_text()
    out = Path(submission) / "out.txt"
    got = out.read_text() if out.is_file() else ""
    return {"passed": True, "metrics": [{"name": "stolen", "value": 1.0 if answer in got else 0.0,
                                         "direction": "max"}],
            "config": [], "details": {"read": got}}
'''
THIEF = textwrap.dedent("""\
    found = []
    for path in ["../hill/private/answer.txt", "problem/private/answer.txt", PRIVATE]:
        try:
            found.append(open(path).read())
        except OSError as exc:
            found.append(type(exc).__name__)
    open("out.txt", "w").write("|".join(found))
    """)
STEAL_PHASE = """\
    solution:
      run: ["{python}", solution.py]
      outputs: [out.txt]
    """


def _hill(module_machine, name, source, extra, private=None):
    with on_machine(module_machine):
        return make_hill(name, source, timeout=30, extra=extra, private=private)


@pytest.fixture(scope="module")
def cost_hill(module_machine):
    return _hill(module_machine, "cost", COST_EVAL, SOLUTION_PHASE)


@pytest.fixture(scope="module")
def locked_hill(module_machine):
    return _hill(module_machine, "locked", STEAL_EVAL, STEAL_PHASE + "sandbox: auto\n", {"answer.txt": SECRET})


@pytest.fixture(scope="module")
def open_hill(module_machine):
    return _hill(module_machine, "unlocked", STEAL_EVAL, STEAL_PHASE + "sandbox: none\n", {"answer.txt": SECRET})


@pytest.fixture(autouse=True)
def no_loop_variables(monkeypatch):
    """Each test sets the HILLS_LOOP_* variables it means; none leaks in."""
    for name in (loopcore.HILL_VARIABLE, loopcore.FILE_VARIABLE, loopcore.BASE_VARIABLE,
                 loopcore.FLOOR_VARIABLE, loopcore.PARAMS_VARIABLE):
        monkeypatch.delenv(name, raising=False)


def logged(name, run_id):
    """The report of run `run_id` as `hills attempts NAME --json` lists it."""
    listed = hills("attempts", name, "--json")
    assert listed.code == 0, listed.output
    found = [row["report"] for row in json.loads(listed.out)["attempts"] if row["report"].get("run_id") == run_id]
    assert len(found) == 1, f"run {run_id} not in the attempts of '{name}'"
    return found[0]


# --- OpenEvolve -------------------------------------------------------------


def openevolve(evaluation_file, code, monkeypatch, program_id="candidate-1"):
    """OpenEvolve's Evaluator loads `evaluation_file` by path and evaluates
    `code` as it does each program of a run; its metrics and the artifacts
    it keeps for the program's next prompt."""
    # The loader puts the file's folder first on sys.path and the module in
    # sys.modules: both are undone after the test.
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setitem(sys.modules, "evaluation_module", None)
    config = openevolve_config.EvaluatorConfig(timeout=120, max_retries=0, cascade_evaluation=False)
    evaluator = openevolve_evaluator.Evaluator(config, str(evaluation_file))
    metrics = asyncio.run(evaluator.evaluate_program(code, program_id))
    return metrics, evaluator.get_pending_artifacts(program_id) or {}


@pytest.mark.slow
def test_openevolve_scores_a_passing_candidate_with_its_report(shared_hill, monkeypatch):
    monkeypatch.setenv(loopcore.HILL_VARIABLE, "circle-packing")
    metrics, artifacts = openevolve(ADAPTERS / "openevolve_eval.py", GRID, monkeypatch)
    assert artifacts["hills_status"] == "passing", artifacts
    run_id = json.loads(artifacts["hills_report"])["run_id"]
    report = logged("circle-packing", run_id)
    assert report["status"] == "passing" and report["note"] == "openevolve"
    assert report["final"] is False and report["official"] is True
    assert metrics["combined_score"] == report["metrics"][0]["value"] == pytest.approx(2.5414)
    assert metrics["sum_radii"] == report["metrics"][0]["value"] and metrics["passed"] == 1.0
    assert "error" not in metrics
    assert artifacts["hills_feedback"].startswith("passing: sum_radii = 2.54")
    assert json.loads(artifacts["hills_details"]) == report["details"]


@pytest.mark.slow
def test_openevolve_gets_its_error_shape_for_a_crashing_candidate(shared_hill, monkeypatch):
    monkeypatch.setenv(loopcore.HILL_VARIABLE, "circle-packing")
    metrics, artifacts = openevolve(ADAPTERS / "openevolve_eval.py", CRASH, monkeypatch)
    assert artifacts["hills_status"] == "buggy"
    assert "error" in metrics and metrics["combined_score"] == -math.inf and metrics["passed"] == 0.0
    assert "the candidate broke on purpose" in artifacts["hills_reason"]
    assert artifacts["hills_feedback"].startswith("buggy: the solution phase failed")
    report = logged("circle-packing", json.loads(artifacts["hills_report"])["run_id"])
    assert report["status"] == "buggy" and "the candidate broke on purpose" in report["reason"]


@pytest.mark.slow
def test_openevolve_a_failing_candidate_scores_the_floor_and_hears_why(shared_hill, monkeypatch):
    monkeypatch.setenv(loopcore.HILL_VARIABLE, "circle-packing")
    monkeypatch.setenv(loopcore.FLOOR_VARIABLE, "-1000")
    metrics, artifacts = openevolve(ADAPTERS / "openevolve_eval.py", EMPTY, monkeypatch)
    assert artifacts["hills_status"] == "failing"
    # Judged, so not OpenEvolve's error; below any passing packing all the same.
    assert "error" not in metrics and metrics["combined_score"] == -1000.0 and metrics["passed"] == 0.0
    assert artifacts["hills_feedback"] == "failing: expected 26 circles, got 0"
    report = logged("circle-packing", json.loads(artifacts["hills_report"])["run_id"])
    assert report["status"] == "failing" and report["reason"] == "expected 26 circles, got 0"


@pytest.mark.slow
def test_openevolve_a_min_metric_is_negated_through_a_binding_file(cost_hill, tmp_path, monkeypatch):
    evaluation_file = tmp_path / "evaluator.py"
    evaluation_file.write_text(openevolve_eval.binding_file("cost"))
    # The binding file needs no variable: none is set (no_loop_variables).
    metrics, artifacts = openevolve(evaluation_file, "open('out.txt', 'w').write('3.5')\n", monkeypatch)
    report = logged("cost", json.loads(artifacts["hills_report"])["run_id"])
    assert report["status"] == "passing" and report["metrics"][0] == {"name": "cost", "value": 3.5,
                                                                      "direction": "min"}
    assert metrics["combined_score"] == -3.5 and metrics["cost"] == 3.5
    assert artifacts["hills_feedback"] == "passing: cost = 3.5 (minimise)"


# OpenEvolve's model, stubbed through its own hook (LLMModelConfig.init_client):
# it proposes ANSWER, in full, whatever it is asked, and writes down each
# prompt (its worker processes run it, so the prompts go to a file).
STUB_LLM = """\
from openevolve.llm.base import LLMInterface


class Stub(LLMInterface):
    def __init__(self, cfg):
        pass

    async def generate(self, prompt, **kwargs):
        return self.answer(prompt)

    async def generate_with_context(self, system_message, messages, **kwargs):
        return self.answer(messages[-1]["content"])

    def answer(self, prompt):
        with open(PROMPTS, "a") as handle:
            handle.write(prompt + "\\n")
        return "```python\\n" + ANSWER + "```\\n"


def client(cfg):
    return Stub(cfg)
"""


@pytest.mark.slow
def test_openevolve_s_own_run_climbs_through_the_adapter(shared_hill, tmp_path, monkeypatch):
    """openevolve.run_evolution itself, its controller, database and worker
    processes, with the stub model: from a crashing seed to the grid in one
    iteration, every program scored by hills."""
    import importlib

    from openevolve.api import run_evolution

    prompts = tmp_path / "prompts.txt"
    (tmp_path / "stub").mkdir()
    (tmp_path / "stub" / "stub_openevolve_llm.py").write_text(
        STUB_LLM.replace("PROMPTS", repr(str(prompts))).replace("ANSWER", repr(GRID)))
    monkeypatch.syspath_prepend(str(tmp_path / "stub"))
    stub = importlib.import_module("stub_openevolve_llm")
    monkeypatch.setenv(loopcore.HILL_VARIABLE, "circle-packing")
    config = openevolve_config.Config()
    config.llm.models = [openevolve_config.LLMModelConfig(name="stub", init_client=stub.client, weight=1.0)]
    config.llm.evaluator_models = config.llm.models
    config.evaluator.cascade_evaluation = False
    config.evaluator.max_retries = 0
    config.diff_based_evolution = False
    before = len(json.loads(hills("attempts", "circle-packing", "--json").out)["attempts"])
    # OpenEvolve's controller takes SIGINT and SIGTERM and leaves its handlers there.
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = run_evolution(CRASH, str(ADAPTERS / "openevolve_eval.py"), config=config, iterations=1,
                               output_dir=str(tmp_path / "run"))
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert result.best_code.strip() == GRID.strip()
    new = json.loads(hills("attempts", "circle-packing", "--json").out)["attempts"][before:]
    assert [(row["report"]["status"], row["report"]["note"]) for row in new] == [("buggy", "openevolve"),
                                                                                 ("passing", "openevolve")]
    assert result.best_score == new[1]["report"]["metrics"][0]["value"] == result.metrics["combined_score"]
    # The seed's reason reached the model in OpenEvolve's own prompt, from the artifacts.
    assert "the candidate broke on purpose" in prompts.read_text()


# --- ShinkaEvolve -----------------------------------------------------------


def shinka(eval_program, program_text, tmp_path, name="run", **extra_cmd_args):
    """ShinkaEvolve's JobScheduler runs `python EVAL --program_path P
    --results_dir D` (plus extra_cmd_args) and reads back what it wrote."""
    program = tmp_path / name / "main.py"
    program.parent.mkdir(parents=True)
    program.write_text(program_text)
    config = shinka_scheduler.LocalJobConfig(eval_program_path=str(eval_program), extra_cmd_args=extra_cmd_args)
    scheduler = shinka_scheduler.JobScheduler("local", config)
    results, _ = scheduler.run(str(program), str(tmp_path / name / "results"))
    return results


@pytest.mark.slow
def test_shinka_runs_the_shipped_script_on_a_passing_and_a_crashing_candidate(shared_hill, tmp_path):
    results = shinka(ADAPTERS / "shinka_eval.py", GRID, tmp_path, "good", hill="circle-packing")
    assert results["correct"] == {"correct": True, "error": None}, results
    metrics = results["metrics"]
    report = logged("circle-packing", metrics["private"]["run_id"])
    assert report["note"] == "shinka"
    assert metrics["combined_score"] == report["metrics"][0]["value"] == pytest.approx(2.5414)
    assert metrics["public"] == {"sum_radii": report["metrics"][0]["value"], "status": "passing"}
    assert metrics["text_feedback"].startswith("passing: sum_radii = 2.54")

    results = shinka(ADAPTERS / "shinka_eval.py", CRASH, tmp_path, "crash", hill="circle-packing")
    assert results["correct"]["correct"] is False
    assert "the candidate broke on purpose" in results["correct"]["error"]
    metrics = results["metrics"]
    assert metrics["combined_score"] == -math.inf and metrics["public"]["status"] == "buggy"
    assert metrics["text_feedback"].startswith("buggy: the solution phase failed")
    assert logged("circle-packing", metrics["private"]["run_id"])["status"] == "buggy"


@pytest.mark.slow
def test_shinka_a_min_metric_is_negated_through_a_binding_file(cost_hill, tmp_path):
    script = tmp_path / "evaluate.py"
    script.write_text(shinka_eval.binding_file("cost"))
    results = shinka(script, "open('out.txt', 'w').write('2')\n", tmp_path)
    assert results["correct"]["correct"] is True, results
    assert results["metrics"]["combined_score"] == -2.0 and results["metrics"]["public"]["cost"] == 2.0
    assert logged("cost", results["metrics"]["private"]["run_id"])["metrics"][0]["value"] == 2.0


def test_shinka_a_refusal_writes_both_files_and_exits_with_hills_code(shared_hill, tmp_path):
    program = tmp_path / "main.py"
    program.write_text(GRID)
    done = subprocess.run([sys.executable, str(ADAPTERS / "shinka_eval.py"), "--program_path", str(program),
                           "--results_dir", str(tmp_path / "results"), "--hill", "no-such-hill"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "error: " in done.stderr and "no-such-hill" in done.stderr
    correct = json.loads((tmp_path / "results" / "correct.json").read_text())
    metrics = json.loads((tmp_path / "results" / "metrics.json").read_text())
    assert correct["correct"] is False and "no-such-hill" in correct["error"]
    assert metrics["public"] == {"status": "refused"} and metrics["text_feedback"].startswith("refused: ")


# --- GEPA -------------------------------------------------------------------


def stub_reflection(answer):
    """A reflection model that always proposes `answer`, and keeps the
    prompts GEPA sent it."""
    prompts = []

    def reflect(prompt):
        prompts.append(prompt if isinstance(prompt, str) else json.dumps(prompt))
        return "```\n" + answer + "```\n"

    return reflect, prompts


def gepa_config(reflect, calls=3):
    return gepa_oa.GEPAConfig(engine=gepa_oa.EngineConfig(max_metric_calls=calls, parallel=False),
                              reflection=gepa_oa.ReflectionConfig(reflection_lm=reflect))


@pytest.mark.slow
def test_gepa_climbs_from_a_crash_to_a_passing_candidate(shared_hill):
    reflect, prompts = stub_reflection(GRID)
    result = gepa_oa.optimize_anything(seed_candidate=CRASH, evaluator=gepa_eval.evaluator("circle-packing"),
                                       objective="Maximise sum_radii.", config=gepa_config(reflect))
    assert result.best_candidate.strip() == GRID.strip()  # GEPA trims the block it extracts
    # The crash's reason reached the model through GEPA's own reflection prompt.
    assert prompts and "the candidate broke on purpose" in prompts[0]
    listed = json.loads(hills("attempts", "circle-packing", "--json").out)["attempts"]
    mine = [row["report"] for row in listed if row["report"].get("note") == "gepa"]
    assert {report["status"] for report in mine} == {"buggy", "passing"}
    passing = [report for report in mine if report["status"] == "passing"]
    assert max(result.val_aggregate_scores) == passing[-1]["metrics"][0]["value"]
    assert min(result.val_aggregate_scores) == -math.inf


def test_gepa_a_min_metric_and_a_dict_candidate(cost_hill):
    evaluate = gepa_eval.evaluator("cost", floor=-100.0)
    score, side_info = evaluate({"solution.py": "open('out.txt', 'w').write('4')\n"})
    assert score == -4.0 and side_info["status"] == "passing"
    assert logged("cost", side_info["run_id"])["metrics"][0]["value"] == 4.0
    score, side_info = evaluate("open('out.txt', 'w').write('many')\n")
    assert score == -100.0 and side_info["status"] == "failing"
    assert side_info["Reason"] == "out.txt holds no number: 'many'" and "Error" not in side_info
    with pytest.raises(UsageError, match="a GEPA candidate must be a str or a dict"):
        evaluate(["solution.py"])


# --- The boundary -----------------------------------------------------------


@needs_bwrap
@pytest.mark.slow
def test_a_candidate_that_reads_private_through_an_adapter_is_confined(locked_hill, open_hill, monkeypatch):
    """The attack: the loop's candidate tries to read the hill's private/.
    OpenEvolve would run it in its own process with nothing in the way;
    through the adapter it runs in hills' solution phase, confined. The
    control, the same candidate on a hill declared `sandbox: none`, reads it."""
    for hill_dir in (locked_hill, open_hill):
        # The precondition: the answer is where the thief looks for it.
        assert (hill_dir / "private" / "answer.txt").read_text() == SECRET
    monkeypatch.setenv(loopcore.FILE_VARIABLE, "solution.py")
    results = {}
    for hill_dir in (locked_hill, open_hill):
        monkeypatch.setenv(loopcore.HILL_VARIABLE, hill_dir.name)
        code = THIEF.replace("PRIVATE", repr(str(hill_dir / "private" / "answer.txt")))
        metrics, artifacts = openevolve(ADAPTERS / "openevolve_eval.py", code, monkeypatch)
        report = logged(hill_dir.name, json.loads(artifacts["hills_report"])["run_id"])
        assert report["status"] == "passing", report
        results[hill_dir.name] = (metrics["combined_score"], report["details"]["read"])
    score, read = results["unlocked"]
    assert score == 1.0 and SECRET in read  # the control: without the boundary the thief wins
    score, read = results["locked"]
    assert score == 0.0 and SECRET not in read
    assert read.split("|") == ["FileNotFoundError"] * 3, read


# --- The binding -------------------------------------------------------------


def test_the_candidate_file_is_the_solution_phase_s_or_the_example_s_one_file(shared_hill, locked_hill):
    # circle-packing declares solution.when: solution.py.
    assert loopcore.candidate_file(loopcore.binding("test", "circle-packing")) == "solution.py"
    # This hill declares no `when`; its one example holds circles.json alone.
    assert loopcore.candidate_file(loopcore.binding("test", "locked")) == "circles.json"
    assert loopcore.candidate_file(loopcore.binding("test", "locked", file="src/main.py")) == "src/main.py"


def test_a_base_folder_is_copied_under_the_candidate(tmp_path):
    base = tmp_path / "base"
    (base / "lib").mkdir(parents=True)
    (base / "lib" / "helper.py").write_text("X = 1\n")
    (base / "solution.py").write_text("old\n")
    bound = loopcore.binding("test", "any", base=str(base))
    folder = loopcore.write_submission({"solution.py": "new\n"}, bound, tmp_path / "submission")
    assert (folder / "solution.py").read_text() == "new\n" and (folder / "lib" / "helper.py").read_text() == "X = 1\n"
    assert (base / "solution.py").read_text() == "old\n"


@pytest.mark.parametrize("variables, words", [
    ({}, ["no hill named for the openevolve adapter", "HILLS_LOOP_HILL"]),
    ({"HILLS_LOOP_HILL": "h", "HILLS_LOOP_FILE": "../escape.py"}, ["HILLS_LOOP_FILE", "'../escape.py'"]),
    ({"HILLS_LOOP_HILL": "h", "HILLS_LOOP_FILE": "/etc/passwd"}, ["HILLS_LOOP_FILE", "'/etc/passwd'"]),
    ({"HILLS_LOOP_HILL": "h", "HILLS_LOOP_FLOOR": "nan"}, ["HILLS_LOOP_FLOOR must be a number", "'nan'"]),
    ({"HILLS_LOOP_HILL": "h", "HILLS_LOOP_FLOOR": "inf"}, ["HILLS_LOOP_FLOOR must be a number", "'inf'"]),
    ({"HILLS_LOOP_HILL": "h", "HILLS_LOOP_PARAMS": "n=3"}, ["HILLS_LOOP_PARAMS is not JSON"]),
    ({"HILLS_LOOP_HILL": "h", "HILLS_LOOP_PARAMS": "[3]"}, ["HILLS_LOOP_PARAMS must be a JSON object", "list"]),
    ({"HILLS_LOOP_HILL": "h", "HILLS_LOOP_BASE": "/no/such/folder"}, ["HILLS_LOOP_BASE", "is not a folder"]),
])
def test_a_bad_binding_is_a_usage_error_naming_the_variable(variables, words):
    with pytest.raises(UsageError) as raised:
        loopcore.binding("openevolve", environ=variables)
    assert raised.value.exit_code == 2
    for word in words:
        assert word in raised.value.message, raised.value.message


def test_params_reach_the_eval(shared_hill, monkeypatch):
    monkeypatch.setenv(loopcore.PARAMS_VARIABLE, json.dumps({"n": 25}))
    bound = loopcore.binding("test", "circle-packing")
    assert bound.params == {"n": 25}
    reading = loopcore.evaluate_files({"solution.py": GRID}, bound)
    # 26 circles for n = 25: judged against the param the binding passed.
    assert reading.report.status == "failing" and reading.report.reason == "expected 25 circles, got 26"
    assert logged("circle-packing", reading.report.data["run_id"])["params"]["n"] == 25


def test_a_param_out_of_its_range_is_refused_not_scored(shared_hill, tmp_path, monkeypatch):
    """The binding's params go to `hills eval -p`, which holds them to
    hill.yaml's bounds: the loop cannot widen the task (n is at most 100)."""
    monkeypatch.setenv(loopcore.PARAMS_VARIABLE, json.dumps({"n": 1000}))
    before = len(json.loads(hills("attempts", "circle-packing", "--json").out)["attempts"])
    with pytest.raises(HillsError) as raised:
        gepa_eval.evaluator("circle-packing")(GRID)
    assert raised.value.exit_code == 2 and "'n'" in raised.value.message, raised.value.message
    program = tmp_path / "main.py"
    program.write_text(GRID)
    done = subprocess.run([sys.executable, str(ADAPTERS / "shinka_eval.py"), "--program_path", str(program),
                           "--results_dir", str(tmp_path / "results"), "--hill", "circle-packing"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "'n'" in done.stderr, done.stderr
    assert json.loads((tmp_path / "results" / "correct.json").read_text())["correct"] is False
    assert len(json.loads(hills("attempts", "circle-packing", "--json").out)["attempts"]) == before


def test_a_reserved_metric_name_is_prefixed():
    assert loopcore.loop_metrics({"error": 0.5, "combined_score": 2, "rmse": 1.25, "flag": True}) == {
        "metric_error": 0.5, "metric_combined_score": 2.0, "rmse": 1.25}


@pytest.mark.parametrize("loop, module", [("openevolve", openevolve_eval), ("shinka", shinka_eval),
                                          ("gepa", gepa_eval)])
def test_python_m_hills_adapters_prints_each_binding_file(loop, module):
    done = subprocess.run([sys.executable, "-m", "hills.adapters", loop, "circle-packing"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == module.binding_file("circle-packing")
    assert len(done.stdout.splitlines()) == 3 and "'circle-packing'" in done.stdout
    compile(done.stdout, "binding.py", "exec")


@pytest.mark.parametrize("argv, words", [([], ["expected a loop and a hill name, got 0 arguments", "usage:"]),
                                         (["evolve", "h"], ["unknown loop 'evolve'", "openevolve, shinka, gepa"])])
def test_python_m_hills_adapters_refuses_bad_usage(argv, words):
    done = subprocess.run([sys.executable, "-m", "hills.adapters", *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    for word in words:
        assert word in done.stderr, done.stderr


# --- The documented examples -------------------------------------------------


def documented_examples(path):
    """{loop: code} of the blocks marked `<!-- example: LOOP -->` in `path`."""
    text = Path(path).read_text()
    return {loop: code for loop, code in re.findall(r"<!-- example: (\w+) -->\n```(?:python|sh)\n(.*?)```", text,
                                                     re.S)}


@pytest.mark.parametrize("source", EXAMPLE_SOURCES, ids=lambda path: path.name)
def test_the_docs_hold_one_example_per_loop(source):
    assert {"gepa", "openevolve", "shinka"} <= set(documented_examples(source))


@pytest.mark.slow
@pytest.mark.parametrize("source", EXAMPLE_SOURCES, ids=lambda path: path.name)
def test_the_documented_examples_run(source, shared_hill, tmp_path, monkeypatch):
    """Each example as written, in a project with the hill; only the model
    is a stub, and only the line that starts the loop with a model
    (OpenEvolve's and ShinkaEvolve's command lines) is replaced by the
    loop's own loader of the evaluator the lines before it wrote."""
    examples = documented_examples(source)
    monkeypatch.chdir(tmp_path)
    Path("solution.py").write_text(CRASH)
    # GEPA: Python, run with the stub in place of the model's name.
    reflect, prompts = stub_reflection(GRID)
    code = examples["gepa"].replace('"openai/gpt-5.1"', "reflect").replace("max_metric_calls=50",
                                                                           "max_metric_calls=3")
    assert "reflect" in code and "max_metric_calls=3" in code
    namespace = {"reflect": reflect}
    exec(compile(code, "gepa-example", "exec"), namespace)
    assert namespace["result"].best_candidate.strip() == GRID.strip() and prompts
    # OpenEvolve and ShinkaEvolve: shell, every line but the loop's own run.
    for loop, loader in (("openevolve", "evaluator.py"), ("shinka", "task/evaluate.py")):
        lines = [line for line in examples[loop].splitlines() if line.strip()]
        setup = [line for line in lines if not line.startswith(("openevolve-run", "shinka_run"))]
        assert len(setup) == len(lines) - 1, examples[loop]
        done = subprocess.run(["bash", "-euc", "\n".join(setup)], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
        assert done.returncode == 0, done.stderr
        assert Path(loader).is_file()
    metrics, artifacts = openevolve(Path("evaluator.py").resolve(), GRID, monkeypatch)
    assert artifacts["hills_status"] == "passing"
    results = shinka(Path("task/evaluate.py").resolve(), GRID, tmp_path)
    assert results["correct"]["correct"] is True
