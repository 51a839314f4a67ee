"""The cheat corpus of `hills check`: a versioned set of cheat submissions,
adapted to the hill's solution phase and to its example, each evaluated
like the leak probe's (`evaluate.evaluate_unlogged`: the pipeline, nothing
logged, a run folder removed after), each of which must not pass or score
no better than the example; each `neutral: true` param at its bounds,
which must not move the example's score; and the hill's own `exploits/`,
each with the verdict its `expect.json` names."""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import re
import shutil
import tempfile

from ..base import halves
from ..run import folders
from .shared import Result

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any

NAME = "cheat corpus"
# The corpus's version: a new cheat, or a changed verdict rule, is a new
# version. The gate's digest covers it, and reports name it.
VERSION = 2
EXPLOITS = "exploits"
EXPECT = "expect.json"
EXPECT_KEYS = ("status", "no_better_than_example")
# The oversized output: each output padded with spaces (JSON stays valid) to this size.
OVERSIZED = 50 * 1024 * 1024
# The example's outputs the corpus adapts, at most: larger outputs are not
# rewritten value by value.
MAX_ADAPTED = 8 * 1024 * 1024
# Two scores closer than this are equal (a neutral param must not move the score).
REL_TOLERANCE, ABS_TOLERANCE = 1e-9, 1e-12
CODE_SUFFIXES = (".py", ".sh", ".bash", ".pyc", ".so")
NUMBER = re.compile(rb"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")

# The solution script of a cheat that must write its outputs itself (a hill
# whose solution phase always runs): it writes them where it was started,
# then leaves with the cheat's exit code before the hill's harness runs on.
WRITER = '''import base64, json, os
for _rel, (_data, _pad) in json.loads(base64.b64decode(%r)).items():
    _path = os.path.join(os.getcwd(), _rel)
    os.makedirs(os.path.dirname(_path) or ".", exist_ok=True)
    with open(_path, "wb") as _out:
        _out.write(base64.b64decode(_data))
        for _ in range(_pad // (1024 * 1024)):
            _out.write(b" " * (1024 * 1024))
        _out.write(b" " * (_pad %% (1024 * 1024)))
os._exit(%d)
'''


class Cheat:
    """One submission the corpus tries: its name, its files (path -> bytes,
    or a (bytes, padding) pair), the params it is scored with, and what
    it must get (None: not passing, or no better than the example)."""

    def __init__(self, name: str, files: Mapping[str, Any] | None = None, source: str | None = None,
                 params: tuple[str, ...] = (), expect: Mapping[str, Any] | None = None,
                 neutral: bool = False) -> None:
        self.name, self.files, self.source, self.params = name, dict(files or {}), source, params
        self.expect, self.neutral = expect, neutral


class Score:
    """What one eval came to: its status, its first metric, and why."""

    def __init__(self, status: str, value: float | None, reason: str | None,
                 metric: Mapping[str, Any] | None = None) -> None:
        self.status, self.value, self.reason, self.metric = status, value, reason, metric

    def shown(self, metric: str) -> str:
        if self.value is None:
            return self.status
        return f"{self.status}, {metric} {self.value:.10g}"


class Baseline:
    """The example's score at default params, and its outputs as the
    scoring phase received them."""

    def __init__(self, score: Score, metric: str, direction: str, outputs: dict[str, bytes]) -> None:
        self.score, self.metric, self.direction, self.outputs = score, metric, direction, outputs

    def beaten_by(self, score: Score) -> bool:
        """Whether `score` passes and beats the example (any passing score,
        when the example itself does not pass)."""
        if score.status != "passing":
            return False
        if self.score.status != "passing" or self.score.value is None:
            return True
        if score.value is None or same(score.value, self.score.value):
            return False
        return score.value > self.score.value if self.direction == "max" else score.value < self.score.value


def same(first: float, second: float) -> bool:
    return math.isclose(first, second, rel_tol=REL_TOLERANCE, abs_tol=ABS_TOLERANCE)


def _score(report: Mapping[str, Any]) -> Score:
    metrics = report.get("metrics") or []
    value = metrics[0].get("value") if metrics and isinstance(metrics[0], dict) else None
    value = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return Score(str(report.get("status")), value, report.get("reason"),
                 metrics[0] if metrics and isinstance(metrics[0], dict) else None)


def _evaluate(hill_name: str, hill_dir: str, submission: str, params: tuple[str, ...] = (),
              keep_outputs: bool = False) -> tuple[Score, dict[str, bytes]]:
    """Evaluate `submission` against the hill's working tree through the
    pipeline, unlogged, in a run folder removed after, each param at its
    `check:` value unless `params` sets it; a refusal is a `refused`
    score. With `keep_outputs`, also the files the scoring phase got."""
    from ..run import evaluate
    from ..base.errors import HillsError
    from ..disk.hill import Hill
    from .probe import check_params, probe_run_dir

    request = evaluate.EvalRequest(hill=Hill(hill_dir), submission=submission, current=True, repeat=1,
                                   param_texts=check_params(Hill(hill_dir).manifest()) + tuple(params))
    outputs: dict[str, bytes] = {}
    with probe_run_dir(hill_name) as run_dir:
        try:
            report = evaluate.evaluate_unlogged(request, run_dir)
        except HillsError as exc:
            return Score("refused", None, exc.message), outputs
        if keep_outputs:
            outputs = _read_files(os.path.join(run_dir, "outputs"))
    return _score(report), outputs


def _read_files(folder: str) -> dict[str, bytes]:
    """The regular files under `folder` (never through a link), by relative
    path; none when they come to more than MAX_ADAPTED."""
    found: dict[str, bytes] = {}
    total = 0
    for current, dirs, files in os.walk(folder):
        dirs[:] = sorted(name for name in dirs if not os.path.islink(os.path.join(current, name)))
        for name in sorted(files):
            path = os.path.join(current, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            total += os.path.getsize(path)
            if total > MAX_ADAPTED:
                return {}
            with open(path, "rb") as handle:
                found[os.path.relpath(path, folder)] = handle.read()
    return found


def _replace_numbers(content: bytes, value: float | None) -> bytes | None:
    """`content` with every number replaced by `value` (None: null), JSON-aware
    for JSON; None when it holds no number."""
    try:
        parsed = json.loads(content)
    except (ValueError, UnicodeDecodeError, RecursionError):
        parsed = _NOT_JSON
    if parsed is not _NOT_JSON:
        counted = [0]

        def swap(item: Any) -> Any:
            if isinstance(item, bool) or item is None or isinstance(item, str):
                return item
            if isinstance(item, (int, float)):
                counted[0] += 1
                return value
            if isinstance(item, list):
                return [swap(part) for part in item]
            if isinstance(item, dict):
                return {key: swap(part) for key, part in item.items()}
            return item

        swapped = swap(parsed)
        return json.dumps(swapped, allow_nan=True).encode() if counted[0] else None
    text = b"None" if value is None else repr(value).encode()  # nan, inf, -inf
    replaced, count = NUMBER.subn(text, content)
    return replaced if count else None


_NOT_JSON = object()


def _is_json(content: bytes) -> bool:
    try:
        json.loads(content)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    return True


def _claim(content: bytes, metric: str, value: float) -> bytes:
    """An output that claims `value` as its score: a JSON object for JSON, a bare number else."""
    if _is_json(content):
        return json.dumps({"score": value, metric: value}).encode()
    return repr(value).encode() + b"\n"


def _data(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """The files a cheat may rewrite: not code."""
    return {rel: content for rel, content in files.items() if not rel.endswith(CODE_SUFFIXES)}


def builtin_cheats(spec: Mapping[str, Any], hill_dir: str, example: str, baseline: Baseline) -> list[Cheat]:
    """The corpus adapted to the hill: outputs placed in the submission
    (a hill with one phase, or whose solution phase is skipped without its
    `when` file), or written by a solution script that exits at once (a
    hill whose solution phase always runs)."""
    from .probe import solution_name

    solution = spec.get("solution") or {}
    script = solution_name(spec, hill_dir)
    if solution:
        outputs = baseline.outputs
    else:
        outputs = _read_files(example)
    data = _data(outputs)
    writes = bool(solution) and not solution.get("when")

    # A hill with one phase keeps the example's code beside the rewritten data.
    code = {rel: content for rel, content in outputs.items() if rel not in data} if not solution else {}

    def cheat(name: str, files: Mapping[str, Any], exit_code: int = 0) -> Cheat:
        if not writes:
            return Cheat(name, {**code, **files})
        table = {}
        for rel, content in files.items():
            body, pad = content if isinstance(content, tuple) else (content, 0)
            table[rel] = [base64.b64encode(body).decode(), pad]
        packed = base64.b64encode(json.dumps(table).encode()).decode()
        return Cheat(name, {script: (WRITER % (packed, exit_code)).encode()})

    cheats = [Cheat("empty folder"), Cheat("no-op", {script: b"pass\n"})]
    if data:
        cheats.append(cheat("empty outputs", {rel: b"" for rel in data}))
        cheats.append(cheat("{} outputs", {rel: b"{}" for rel in data}))
        inputs = _public_inputs(spec, hill_dir)
        if inputs:
            first = inputs[sorted(inputs)[0]]
            cheats.append(cheat("echo of the public inputs", {rel: inputs.get(rel, first) for rel in data}))
        for label, value in (("NaN", math.nan), ("inf", math.inf), ("-inf", -math.inf), ("None", None)):
            swapped = {rel: _replace_numbers(content, value) for rel, content in data.items()}
            if any(content is not None for content in swapped.values()):
                cheats.append(cheat(f"{label} values", {rel: swapped[rel] if swapped[rel] is not None else content
                                                         for rel, content in data.items()}))
        best = next((metric for metric in spec.get("metrics") or [] if "best_known" in metric), None)
        if best is not None:
            cheats.append(cheat("best_known hard-coded",
                                {rel: _claim(content, best["name"], float(best["best_known"]))
                                 for rel, content in data.items()}))
        cheats.append(cheat("oversized output", {rel: (content, max(0, OVERSIZED - len(content)))
                                                 for rel, content in data.items()}))
    cheats.append(Cheat("copy of the example", source=example))
    if writes:
        cheats.append(cheat("result then crash", outputs, exit_code=1))
    elif solution and outputs:
        cheats.append(Cheat("result then crash", {script: _crashing_writer(outputs)}))
    elif os.path.isfile(os.path.join(example, script)):
        with open(os.path.join(example, script), "rb") as handle:
            crashing = handle.read() + b"\nraise SystemExit(1)  # hills check: cheat corpus\n"
        cheats.append(Cheat("result then crash", source=example, files={script: crashing}))
    return cheats


def _public_inputs(spec: Mapping[str, Any], hill_dir: str) -> dict[str, bytes]:
    """The public inputs a cheat may echo as its outputs: the validation
    split's `solution.inputs`, else the hill's `data/` folder (never
    private/)."""
    solution = spec.get("solution") or {}
    folder = (solution.get("inputs") or {}).get("validation") or "data"
    path = os.path.realpath(os.path.join(hill_dir, folder))
    private = os.path.realpath(os.path.join(hill_dir, "private"))
    if path == private or path.startswith(private + os.sep) or not os.path.isdir(path):
        return {}
    return _read_files(path)


def _crashing_writer(outputs: Mapping[str, bytes]) -> bytes:
    """A solution script that writes the example's outputs, then exits 1."""
    packed = base64.b64encode(json.dumps({rel: [base64.b64encode(content).decode(), 0]
                                          for rel, content in outputs.items()}).encode()).decode()
    return (WRITER % (packed, 1)).encode()


def neutral_cheats(spec: Mapping[str, Any], example: str) -> list[Cheat]:
    """The example with each `neutral: true` param at its declared bounds."""
    cheats = []
    for name, param in (spec.get("params") or {}).items():
        if not param.get("neutral"):
            continue
        for bound in ("low", "high"):
            if param.get(bound) is not None:
                value = param[bound]
                cheats.append(Cheat(f"neutral param {name}={value!r} ({bound})", source=example,
                                    params=(f"{name}={json.dumps(value)}",), neutral=True))
    return cheats


def exploit_cheats(hill_dir: str) -> tuple[list[Cheat], list[str]]:
    """The hill's own cases (exploits/NAME/ with expect.json), and the
    problems found reading them."""
    folder = os.path.join(hill_dir, EXPLOITS)
    if not os.path.isdir(folder):
        return [], []
    cheats, problems = [], []
    for name in sorted(os.listdir(folder)):
        case = os.path.join(folder, name)
        if name.startswith(".") or not os.path.isdir(case) or os.path.islink(case):
            continue
        expect, problem = read_expect(os.path.join(case, EXPECT), f"{EXPLOITS}/{name}/{EXPECT}")
        if problem:
            problems.append(problem)
            continue
        cheats.append(Cheat(f"exploit {name}", source=case, expect=expect))
    return cheats, problems


def read_expect(path: str, shown: str) -> tuple[dict[str, Any], str | None]:
    """An exploit's expected verdict, or why it cannot be read."""
    from ..evidence.report import STATUSES

    try:
        with open(path, encoding="utf-8") as handle:
            expect = json.load(handle)
    except FileNotFoundError:
        return {}, f"{shown} is missing: each exploit names the verdict it must get"
    except (OSError, ValueError) as exc:
        return {}, f"{shown} is not valid JSON: {exc}"
    if not isinstance(expect, dict) or not expect:
        return {}, f"{shown}: expected an object with 'status' and/or 'no_better_than_example'"
    unknown = sorted(set(expect) - set(EXPECT_KEYS))
    if unknown:
        return {}, f"{shown}: unknown key '{unknown[0]}' (allowed: {', '.join(EXPECT_KEYS)})"
    status = expect.get("status")
    wanted = status if isinstance(status, list) else [status] if status is not None else []
    if any(item not in STATUSES for item in wanted) or (status is not None and not wanted):
        return {}, f"{shown}: 'status' must be one of {', '.join(STATUSES)}, or a list of them, got {status!r}"
    if "no_better_than_example" in expect and expect["no_better_than_example"] is not True:
        return {}, f"{shown}: 'no_better_than_example' must be true"
    return expect, None


def _materialise(cheat: Cheat, folder: str) -> str:
    """The cheat's submission folder, made under `folder`."""
    target = os.path.join(folder, "submission")
    if cheat.source:
        shutil.copytree(cheat.source, target, symlinks=True,
                        ignore=shutil.ignore_patterns(EXPECT) if cheat.expect is not None else None)
    else:
        os.makedirs(target)
    for rel, content in cheat.files.items():
        path = os.path.join(target, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        body, pad = content if isinstance(content, tuple) else (content, 0)
        with open(path, "wb") as handle:
            handle.write(body)
            if pad:
                chunk = b" " * (1024 * 1024)
                for _ in range(pad // len(chunk)):
                    handle.write(chunk)
                handle.write(b" " * (pad % len(chunk)))
    return target


def got_through(cheat: Cheat, score: Score, baseline: Baseline) -> str | None:
    """Why `score` is not the verdict `cheat` must get, or None."""
    example = baseline.score.shown(baseline.metric)
    if cheat.neutral:
        if score.status != baseline.score.status or (score.value is None) != (baseline.score.value is None) \
                or (score.value is not None and not same(score.value, baseline.score.value or 0.0)):
            return f"{cheat.name} scored {score.shown(baseline.metric)}, the example at default params {example}: " \
                   "the param is not neutral"
        return None
    if cheat.expect is None:
        if baseline.beaten_by(score):
            return f"{cheat.name} scored {score.shown(baseline.metric)}, the example {example}"
        return None
    status = cheat.expect.get("status")
    wanted = status if isinstance(status, list) else [status] if status is not None else []
    if wanted and score.status not in wanted:
        return f"{cheat.name} got {score.shown(baseline.metric)}, expected status {' or '.join(wanted)}"
    if cheat.expect.get("no_better_than_example") and baseline.beaten_by(score):
        return f"{cheat.name} scored {score.shown(baseline.metric)}, better than the example's {example}"
    return None


@contextlib.contextmanager
def _work() -> Iterator[str]:
    folder = tempfile.mkdtemp(prefix="hills-corpus-")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# Off only in the test suite's hill fixture (tests/testing/eval_fixtures.make_hill),
# whose hills pair any evaluator with the template's example.
BUGGY_EXAMPLE_FAILS = True


def _placeholder_may_fail(example: str, score: Score) -> bool:
    """Whether `example` is the placeholder `hills new --from-hillclimb`
    writes for a problem with no baseline (its solution.py alone, as
    written): it computes nothing, so the verifier is right to call it
    buggy, unless the scoring phase was stopped running it."""
    from ..disk.hillclimb import PLACEHOLDER_SOLUTION

    if "the scoring phase tried to run" in (score.reason or ""):
        return False
    try:
        if os.listdir(example) != ["solution.py"]:
            return False
        with open(os.path.join(example, "solution.py"), encoding="utf-8") as handle:
            return handle.read() == PLACEHOLDER_SOLUTION
    except (OSError, UnicodeDecodeError):
        return False


def cheat_corpus(spec: Mapping[str, Any], hill_name: str, hill_dir: str) -> Result:
    """The cheat corpus's line of `hills check`."""
    from .probe import checked_example, example_folder

    with checked_example(spec, hill_dir) as (example, problem):
        if problem is not None:
            return Result(NAME, "fail", problem)
        if example is None:
            return Result(NAME, "warn", "no example submission folder in examples/ to adapt the corpus to")
        shown = os.path.relpath(example_folder(hill_dir) or example, hill_dir)
        return _corpus(spec, hill_name, hill_dir, example, shown)


def _corpus(spec: Mapping[str, Any], hill_name: str, hill_dir: str, example: str, shown: str) -> Result:
    """The cheat corpus adapted to the example folder `example`, the hill's
    `shown` (or a copy of it with the stand-in of `checks.solution`)."""
    stand_in = (spec.get("checks") or {}).get("solution")
    called = f"'{shown}' with the stand-in '{stand_in}'" if stand_in else f"'{shown}'"
    exploits, problems = exploit_cheats(hill_dir)
    with _work() as work:
        score, outputs = _evaluate(hill_name, hill_dir, example, keep_outputs=True)
        if score.status == "refused":
            return Result(NAME, "warn", f"the example could not be evaluated: {score.reason}")
        if score.status == "buggy" and BUGGY_EXAMPLE_FAILS and not _placeholder_may_fail(example, score):
            # A hill whose own example cannot be scored is not one to freeze:
            # its evaluator is broken, or it ran the example's code where it
            # must not (the scoring phase's guard stopped it).
            return Result(NAME, "fail", f"the example {called} is buggy: {score.reason}"
                                        "\n        hint: fix the evaluator or the example until "
                                        f"'hills eval --current {shown}' passes")
        if score.status != "passing":
            # No score to hold the cheats to: the author's example must pass first.
            return Result(NAME, "warn", f"the example does not pass ({score.status}: {score.reason}), so no "
                                        "cheat was tried")
        first = (spec.get("metrics") or [None])[0] or score.metric or {}
        baseline = Baseline(score, first.get("name") or "score", first.get("direction") or "max", outputs)
        cheats = builtin_cheats(spec, hill_dir, example, baseline) + neutral_cheats(spec, example) + exploits

        def verdict_of(index: int) -> str | None:
            """Why cheat `index` got through, or None."""
            cheat = cheats[index]
            folder = os.path.join(work, str(index))
            os.mkdir(folder)
            submission = _materialise(cheat, folder)
            scored, _ = _evaluate(hill_name, hill_dir, submission, cheat.params)
            shutil.rmtree(folder, ignore_errors=True)
            return got_through(cheat, scored, baseline)

        # Two at a time (hills.base.halves): each is an eval of its own, and
        # its verdict is all the corpus keeps of it.
        # The runs folder is made before the fork, so that neither half
        # removes it under the other.
        with folders.runs_root(hill_name):
            verdicts = halves.shared(range(len(cheats)), verdict_of)
        failures = [failure for failure in verdicts if failure]
    failures = problems + failures
    tried = [cheat.name for cheat in cheats]
    if failures:
        return Result(NAME, "fail", f"{len(failures)} of {len(cheats) + len(problems)} got through:"
                      + "".join("\n        " + failure for failure in failures)
                      + "\n        hint: make the evaluator reject these submissions (or fix exploits/), "
                        "then run hills check again", tried=tried)
    return Result(NAME, "ok", f"{len(tried)} cheats tried, none got through; corpus v{VERSION}", tried=tried)
