"""`hills tune`: spend evaluator runs on a submission's declared knobs.

Every trial is a real `hills eval` (a signed, logged report carrying its
knob values), run as its own process so parallel trials cannot reach each
other's evaluators. The candidate's score is its best passing trial."""

from __future__ import annotations

import concurrent.futures
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from .. import spaces
from ..base import state
from ..evidence import signing
from ..views import rank
from ..base.errors import EXIT_NOT_SCORED, EnvironmentProblem, NotScored, UsageError

if TYPE_CHECKING:
    from ..evidence.trust import Keys, Signer
    from ..disk.hill import Hill


def load_declaration(submission: str) -> dict[str, dict[str, Any]]:
    declaration, warning = spaces.load(submission)
    if declaration is None:
        raise UsageError(warning or f"submission '{submission}' has no params.json declaring knobs",
                         hint="declare knobs in params.json: {\"name\": {\"type\": \"int\", \"low\": 1, "
                              "\"high\": 8, \"default\": 2}}")
    return declaration


class RandomTuner:
    """The first trial is the declared defaults, then uniform random points
    (log-uniform where `log` is set)."""

    def __init__(self, declaration: dict[str, dict[str, Any]], direction: str, seed: int | None = None) -> None:
        self.declaration = declaration
        self.rng = random.Random(seed)
        self.asked = 0

    def ask(self) -> tuple[None, dict[str, Any]]:
        self.asked += 1
        values = spaces.defaults(self.declaration) if self.asked == 1 else spaces.sample(self.declaration, self.rng)
        return None, values

    def tell(self, handle: object, value: float | None) -> None:
        pass


class OptunaTuner:
    def __init__(self, declaration: dict[str, dict[str, Any]], direction: str, seed: int | None = None) -> None:
        try:
            import optuna
        except ImportError:
            raise EnvironmentProblem("the optuna tuner needs optuna, which is not installed",
                                     hint="pip install 'hills[optuna]', or use --tuner random")
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna = optuna
        self.declaration = declaration
        self.study = optuna.create_study(direction="maximize" if direction == "max" else "minimize",
                                         sampler=optuna.samplers.TPESampler(seed=seed))
        self.study.enqueue_trial(spaces.defaults(declaration))
        distributions = optuna.distributions
        self.space: dict[str, Any] = {}
        for name, spec in declaration.items():
            if spec["type"] == "categorical":
                self.space[name] = distributions.CategoricalDistribution(spec["choices"])
            elif spec["type"] == "int":
                self.space[name] = distributions.IntDistribution(spec["low"], spec["high"], log=spec["log"],
                                                                 step=spec.get("step", 1))
            else:
                self.space[name] = distributions.FloatDistribution(spec["low"], spec["high"], log=spec["log"],
                                                                   step=spec.get("step"))

    def ask(self) -> tuple[Any, dict[str, Any]]:
        trial = self.study.ask(self.space)
        return trial, dict(trial.params)

    def tell(self, handle: Any, value: float | None) -> None:
        if value is None:
            self.study.tell(handle, state=self.optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(handle, value)


TUNERS: dict[str, type[RandomTuner] | type[OptunaTuner]] = {"random": RandomTuner, "optuna": OptunaTuner}


class TrialEval(NamedTuple):
    """One trial's `hills eval`, as its process ended: the report it printed
    (None when it printed none), else why not; `refused` when the hill
    allowed no score (exit 5), with the error and hint it gave."""

    report: dict[str, Any] | None
    error: str | None = None
    hint: str | None = None
    refused: bool = False


def run_trial(hill_path: str, submission: str, values: Mapping[str, Any], params: Iterable[str], final: bool,
              env: Mapping[str, str]) -> TrialEval:
    argv = [sys.executable, "-m", "hills", "eval", submission, "-H", hill_path, "--json"]
    for text in params:
        argv += ["-p", text]
    for name, value in values.items():
        argv += ["-k", f"{name}={json.dumps(value)}"]
    if final:
        argv.append("--final")
    done = subprocess.run(argv, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    try:
        report = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        report = None
    if done.returncode == EXIT_NOT_SCORED:
        lines = done.stderr.splitlines()
        message = next((line[7:] for line in lines if line.startswith("error: ")), "the eval was refused")
        hint = next((line[6:] for line in lines if line.startswith("hint: ")), None)
        return TrialEval(report, message, hint, refused=True)
    if report is None:
        return TrialEval(None, (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[0])
    return TrialEval(report)


TrialRunner = Callable[[Mapping[str, Any]], TrialEval]


def tune(hill: Hill, submission: str, budget: int, tuner_name: str = "random", parallel: int = 1,
         params: Iterable[str] = (), final: bool = False, seed: int | None = None,
         progress: Callable[[str], object] = lambda line: None, runner: TrialRunner | None = None) -> dict[str, Any]:
    """Run `budget` trials, `parallel` at a time, each through `runner`
    (knob values in, the trial's eval out): by default a `hills eval`
    process on this machine; `cluster.Session` runs them on a Ray cluster."""
    if budget < 1:
        raise UsageError(f"--budget expects at least 1 trial, got {budget}")
    if parallel < 1:
        raise UsageError(f"--parallel expects at least 1, got {parallel}")
    if not os.path.isdir(submission):
        raise UsageError(f"submission '{submission}' is not a folder")
    declaration = load_declaration(submission)
    if tuner_name not in TUNERS:
        raise UsageError(f"unknown tuner '{tuner_name}'", hint="use random or optuna")
    if tuner_name == "optuna":
        try:
            import optuna  # noqa: F401  (checked before any trial is spent)
        except ImportError:
            raise EnvironmentProblem("the optuna tuner needs optuna, which is not installed",
                                     hint="pip install 'hills[optuna]', or use --tuner random")
    # The direction of the first metric is only known from a report; the
    # first trial (the defaults) tells it, the tuner starts from there.
    env = dict(os.environ)
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    trials = []
    best_so_far: list[float | None] = [None]  # the best passing trial's first metric, for the progress line
    params = tuple(params)
    if runner is None:
        def runner(values: Mapping[str, Any]) -> TrialEval:
            return run_trial(hill.path, submission, values, params, final, env)

    def record(index: int, values: dict[str, Any], report: dict[str, Any] | None,
               error: str | None) -> dict[str, Any]:
        entry = {"trial": index, "knobs": values, "status": report["status"] if report else "error",
                 "metrics": report["metrics"] if report else [], "reason": (report or {}).get("reason") or error,
                 "run_id": report["run_id"] if report else None, "report": report}
        trials.append(entry)
        shown = "  ".join(f"{m['name']}={m['value']:.6g}" for m in entry["metrics"]) or entry["reason"] or ""
        score, first = _score(report), (entry["metrics"] or [{}])[0]
        if entry["status"] == "passing" and score is not None and (
                best_so_far[0] is None or (score < best_so_far[0] if first.get("direction") == "min"
                                           else score > best_so_far[0])):
            best_so_far[0] = score
        best_text = f"best so far {best_so_far[0]:.6g}" if best_so_far[0] is not None else "none passing yet"
        progress(f"trial {index:>3}/{budget}  {entry['status']:<8} {shown}  "
                 + "  ".join(f"{k}={v}" for k, v in values.items()))
        if len(trials) < budget:
            # On a terminal, the live line says how far the tuner is.
            from ..base.progress import phase

            phase(progress, f"trial {len(trials)} of {budget} running (0 to {budget - 1}); {best_text}")
        return entry

    first_values = spaces.defaults(declaration)
    first = runner(first_values)
    if first.refused:
        # The hill allows no score (uncommitted changes, lock drift...): no
        # other trial would get one either.
        raise NotScored(first.error or "the eval was refused", hint=first.hint)
    report = first.report
    record(0, first_values, report, first.error)
    direction = _direction(hill, report)
    tuner = TUNERS[tuner_name](declaration, direction, seed)
    if tuner_name == "random":
        tuner.ask()  # the defaults were trial 0
    else:
        handle, _ = tuner.ask()
        tuner.tell(handle, _score(report))

    def one(asked: tuple[int, Any, dict[str, Any]]) -> tuple[int, Any, dict[str, Any], TrialEval]:
        index, handle, values = asked
        # Refused when the hill changed under the tuner: this trial has no score.
        return index, handle, values, runner(values)

    remaining = list(range(1, budget))
    with concurrent.futures.ThreadPoolExecutor(max_workers=parallel) as pool:
        while remaining:
            batch, remaining = remaining[:parallel], remaining[parallel:]
            # Asked here, in trial order, so --seed gives the same trials whatever the threads do.
            asked = [(index, *tuner.ask()) for index in batch]
            for index, handle, values, trial in pool.map(one, asked):
                record(index, values, trial.report, trial.error)
                tuner.tell(handle, _score(trial.report))

    from ..evidence.trust import machine_keys, trusted

    best = _best(trials, machine_keys(), trusted())
    result = {"hill": hill.name, "submission": os.path.abspath(submission), "tuner": tuner_name,
              "budget": budget, "trials": [{k: v for k, v in t.items() if k != "report"} for t in trials],
              "best": None, "best_params_file": None}
    if best:
        path = os.path.abspath(submission).rstrip(os.sep) + ".best-params.json"
        state.atomic_write(path, json.dumps(best["knobs"], indent=2, sort_keys=True) + "\n")
        result["best"] = {"trial": best["trial"], "knobs": best["knobs"], "metrics": best["metrics"],
                          "run_id": best["run_id"], "official": best["report"].get("official", False),
                          "official_reason": best["report"].get("official_reason"), "report": best["report"]}
        result["best_params_file"] = path
    return result


def _direction(hill: Hill, first_report: dict[str, Any] | None) -> str:
    """The first metric's direction: from trial 0's report, else from the
    hill's declared metrics, else max."""
    if first_report and first_report.get("metrics"):
        return first_report["metrics"][0]["direction"]
    try:
        declared = hill.manifest()["metrics"]
    except Exception:  # an unreadable manifest was already reported by the trial
        declared = []
    return declared[0]["direction"] if declared else "max"


def _best(trials: list[dict[str, Any]], keys: Keys, allowed: list[Signer] | None = None) -> dict[str, Any] | None:
    """The best passing trial whose signature holds, by this machine's key
    or a trusted one (a cluster node's), official or not (an
    approval of another version makes every trial unofficial, but the
    candidate still has a best trial), ranked like `hills rank`."""
    candidates = []
    for trial in trials:
        report = trial["report"]
        if not report or report.get("status") != "passing" or not signing.verify(report, keys, allowed).ok:
            continue
        candidates.append(trial)
    if not candidates:
        return None
    order = [(m["name"], m["direction"]) for m in candidates[0]["report"].get("metrics", [])]
    return min(candidates, key=lambda t: (rank.sort_key(t["report"], order), t["trial"]))


def _score(report: dict[str, Any] | None) -> float | None:
    if not report or report.get("status") != "passing" or not report.get("metrics"):
        return None
    return report["metrics"][0]["value"]
