"""Measured, not claimed: hills times the submitted code from outside it
(wall, CPU, peak memory) and holds a time the evaluator takes from the
submission against that; fresh and secret seeds; the hardware fingerprint.

The hill `clocked` runs solution.py through hills.sdk; solution.py prints
the time it says it took, which the evaluator reports as the metric
`seconds` (hill.yaml: `claimed: wall`). Attacks patch the clocks the
submission can reach; the measured figures do not move."""

import json
import os
import textwrap

import pytest

from testing.util import needs_bwrap
from testing.eval_fixtures import hills, last_report, make_hill, on_machine, submission, tree_of
from hills.run import measures

CLOCKED_EVAL = """\
    import json
    import os
    import sys

    def eval(submission, *, final=False, **params):
        from hills import sdk

        done = sdk.run_submission([sys.executable, "solution.py"], timeout=20, capture_output=True, text=True)
        lines = done.stdout.strip().splitlines()
        said = json.loads(lines[-1]) if lines else {}
        return {"passed": done.returncode == 0,
                "metrics": [{"name": "seconds", "value": float(said.get("seconds", -1)), "direction": "min"}],
                "details": {"stderr": done.stderr[-500:], "secret_seen": said.get("secret"),
                            "seeds": [os.environ.get("HILLS_REPLICATE_SEED"), os.environ.get("HILLS_SECRET_SEED")]}}
    """

CLAIMED = """\
    metrics:
      - name: seconds
        direction: min
        claimed: wall
        claim_tolerance: 0.5
        claim_slack: 0.15
    """

# An honest solution: it times its own work with perf_counter.
HONEST = """\
import json, os, time
began = time.perf_counter()
time.sleep(0.6)
print(json.dumps({"seconds": time.perf_counter() - began, "secret": os.environ.get("HILLS_SECRET_SEED")}))
"""

# The patched timer: every clock the submission can reach stands still,
# in Python and, through sitecustomize, in any interpreter it starts.
PATCHED = """\
import json, os, sys, time
for name in ("perf_counter", "time", "monotonic", "process_time", "thread_time"):
    setattr(time, name, lambda: 1000.0)
for name in ("perf_counter_ns", "time_ns", "monotonic_ns", "process_time_ns"):
    setattr(time, name, lambda: 1000)
os.environ["PYTHONPATH"] = os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")
os.environ["LD_PRELOAD"] = os.path.join(os.getcwd(), "libfaketime.so")
began = time.perf_counter()
t = time.monotonic()
deadline = 0
import subprocess
subprocess.run([sys.executable, "-c", "import time; time.sleep(0.6)"])
total = 0
for i in range(2_000_000):
    total += i
print(json.dumps({"seconds": time.perf_counter() - began}))
"""

SITECUSTOMIZE = """\
import time
time.perf_counter = time.monotonic = time.time = lambda: 1000.0
"""


@pytest.fixture(scope="module")
def clocked(module_machine):
    with on_machine(module_machine):
        hill_dir = make_hill("clocked", CLOCKED_EVAL, timeout=60, extra=CLAIMED)
        yield hill_dir, tree_of(hill_dir)


def _eval(folder, *args):
    return hills("eval", folder, "-H", "clocked", *args)


@needs_bwrap
def test_an_honest_claim_agrees_and_the_report_stays_official(clocked, tmp_path):
    _, tree = clocked
    result = _eval(submission(tmp_path, {"solution.py": HONEST}))
    assert result.code == 0, result.output
    report = last_report("clocked", tree)
    assert report["official"] is True, report["official_reason"]
    measured = report["measured"]
    assert measured["runs"] == 1 and measured["wall_s"] >= 0.6
    assert measured["peak_rss_bytes"] > 1024 * 1024
    assert measured["cpu_s"] < measured["wall_s"]
    [claim] = report["claimed"]
    assert claim["metric"] == "seconds" and claim["measure"] == "wall_s" and claim["agrees"] is True
    assert report["fingerprint"]["cores"] == os.cpu_count()
    assert report["timing_metrics"] == ["seconds"]


@needs_bwrap
def test_a_patched_timer_moves_the_claim_not_the_measure_and_loses_official(clocked, tmp_path):
    _, tree = clocked
    folder = submission(tmp_path, {"solution.py": PATCHED, "sitecustomize.py": SITECUSTOMIZE})
    result = _eval(folder)
    report = last_report("clocked", tree)
    assert report["metrics"][0]["value"] == 0.0  # the claim: no time at all
    assert report["measured"]["wall_s"] >= 0.6  # the sleep in the child and the loop are measured
    assert report["measured"]["cpu_s"] > 0.05
    assert report["claimed"][0]["agrees"] is False
    assert report["official"] is False
    assert "claimed seconds 0 s disagrees with the wall_s hills measured" in report["official_reason"]
    assert result.code == 0  # the score stands, unofficial: it never ranks


@needs_bwrap
def test_control_without_the_claim_check_the_patched_timer_is_official(module_machine, tmp_path):
    """The same attack on a hill that does not declare its metric claimed:
    official, ranked at 0 s. The check is what stops it."""
    with on_machine(module_machine):
        hill_dir = make_hill("unclocked", CLOCKED_EVAL, timeout=60,
                             extra="metrics:\n  - name: seconds\n    direction: min\n")
        folder = submission(tmp_path, {"solution.py": PATCHED, "sitecustomize.py": SITECUSTOMIZE})
        assert hills("eval", folder, "-H", "unclocked").code == 0
        report = last_report("unclocked", tree_of(hill_dir))
    assert report["metrics"][0]["value"] == 0.0 and report["official"] is True and "claimed" not in report


@needs_bwrap
def test_seeds_are_fresh_and_the_secret_never_reaches_submitted_code(clocked, tmp_path):
    _, tree = clocked
    folder = submission(tmp_path, {"solution.py": HONEST.replace("time.sleep(0.6)", "pass")})
    assert _eval(folder, "--repeat", "2").code in (0, 1)
    first = last_report("clocked", tree)
    assert _eval(folder, "--repeat", "2").code in (0, 1)
    second = last_report("clocked", tree)
    assert first["details"]["secret_seen"] is None
    for report in (first, second):
        seeds = report["seeds"]
        assert seeds["fixed"] is False and len(seeds["replicates"]) == len(seeds["secret"]) == 2
        pairs = [[str(seed), str(secret)] for seed, secret in zip(seeds["replicates"], seeds["secret"])]
        assert report["details"]["seeds"] in pairs  # the evaluator got them
    assert first["seeds"]["replicates"] != [0, 1]
    assert first["seeds"]["replicates"] != second["seeds"]["replicates"]
    assert first["seeds"]["secret"] != second["seeds"]["secret"]


def test_seeds_fixed_gives_0_to_n_minus_1():
    from hills.run import seeds

    assert seeds.record({"seeds": "fixed"}, "00" * 16, 3)["replicates"] == [0, 1, 2]
    drawn = seeds.record({"seeds": "fresh"}, "ab" * 16, 3)
    assert drawn["replicates"] != [0, 1, 2] and len(set(drawn["secret"])) == 3


@pytest.mark.parametrize(("value", "measured", "agrees"), [
    (0.6, 0.62, True), (0.0, 0.62, False), (0.2, 1.0, False), (3.0, 1.0, False), (0.55, 1.0, True),
])
def test_claims_agree_within_tolerance_and_slack(value, measured, agrees):
    declared = [{"name": "t", "direction": "min", "claimed": "wall", "claim_tolerance": 0.4, "claim_slack": 0.1}]
    [claim] = measures.claims([{"name": "t", "value": value}], declared,
                              {"replicate_wall_s": measured, "replicate_cpu_s": 0.0})
    assert claim["agrees"] is agrees
    assert (measures.disagreement([claim]) is None) is agrees


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("claimed", "gpu", "wall or cpu"),
    ("claim_tolerance", 2, "a number from 0 to 1"),
])
def test_bad_claim_keys_are_named(tmp_path, key, value, expected):
    from hills.disk import manifest
    from hills.base.errors import UsageError

    text = textwrap.dedent(f"""\
        spec: 1
        name: h
        version: "1"
        evaluator: {{shape: function}}
        metrics:
          - {{name: t, direction: min, {"" if key == "claimed" else "claimed: wall, "}{key}: {json.dumps(value)}}}
        """)
    with pytest.raises(UsageError) as caught:
        manifest.parse_text(text, "hill.yaml", "h")
    assert f"metrics[0].{key}" in caught.value.message and expected in caught.value.message


def test_claim_tolerance_without_claimed_is_refused():
    from hills.disk import manifest
    from hills.base.errors import UsageError

    text = 'spec: 1\nname: h\nversion: "1"\nevaluator: {shape: function}\n' \
           "metrics:\n  - {name: t, direction: min, claim_slack: 1}\n"
    with pytest.raises(UsageError) as caught:
        manifest.parse_text(text, "hill.yaml", "h")
    assert "claim_slack" in caught.value.message and "claimed beside it" in caught.value.message


def test_describe_tells_the_climber_their_timer_is_checked(clocked):
    shown = hills("describe", "clocked")
    assert shown.code == 0, shown.output
    assert "a claimed wall time, held against the one hills measures (tolerance 0.5, slack 0.15 s)" in shown.output


FAKETIME_C = r"""
#define _GNU_SOURCE
#include <time.h>
#include <sys/time.h>
int clock_gettime(clockid_t clock, struct timespec *spec) { spec->tv_sec = 1000; spec->tv_nsec = 0; return 0; }
int gettimeofday(struct timeval *value, void *zone) { value->tv_sec = 1000; value->tv_usec = 0; return 0; }
time_t time(time_t *out) { if (out) *out = 1000; return 1000; }
"""

# The submission starts its worker with a C library that stops every clock.
PRELOADED = """\
import json, os, subprocess, sys
env = dict(os.environ, LD_PRELOAD=os.path.join(os.getcwd(), "faketime.so"))
worker = ("import time\\nt = time.monotonic()\\nn = 0\\nfor i in range(20_000_000):\\n    n += i\\n"
              "print(time.monotonic() - t)")
done = subprocess.run([sys.executable, "-c", worker], env=env, capture_output=True, text=True)
print(json.dumps({"seconds": float(done.stdout.strip() or -1)}))
"""


@pytest.mark.slow
@needs_bwrap
def test_an_ld_preload_that_stops_the_clocks_moves_nothing_hills_measures(clocked, tmp_path):
    import shutil
    import subprocess

    if not shutil.which("cc"):
        pytest.skip("no C compiler here to build the LD_PRELOAD library")
    source = tmp_path / "faketime.c"
    source.write_text(FAKETIME_C)
    library = tmp_path / "faketime.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    _, tree = clocked
    folder = submission(tmp_path / "sub", {"solution.py": PRELOADED, "faketime.so": library.read_bytes()})
    _eval(folder)
    report = last_report("clocked", tree)
    assert report["metrics"][0]["value"] == 0.0, report["details"]  # the preloaded clock stood still
    # Long enough that a claim of 0 s lies outside the band (0.5 x measured - 0.15 s).
    assert report["measured"]["wall_s"] >= 0.4 and report["measured"]["cpu_s"] >= 0.4, report["measured"]
    assert report["claimed"][0]["agrees"] is False and report["official"] is False


def test_timing_hills_rank_per_fingerprint_and_other_hills_across_machines():
    from test_plausibility import KEYS, signed

    from hills.views import rank

    here = {"cpu": "CPU A", "cores": 8, "machine": "x86_64", "gpu": None}
    there = {"cpu": "CPU B", "cores": 64, "machine": "x86_64", "gpu": [{"model": "H200", "driver": "550.1"}]}
    params = {"tolerance": 1e-9, "seed": 0}
    timed = [("here", signed(1.0, params, fingerprint=here, timing_metrics=["score"])),
             ("there", signed(2.0, params, fingerprint=there, timing_metrics=["score"])),
             ("here again", signed(3.0, params, fingerprint=here, timing_metrics=["score"]))]
    groups = rank.rank(timed, KEYS)["groups"]
    assert sorted([e["source"] for e in g["entries"]] for g in groups) == [["here again", "here"], ["there"]]
    assert {g["fingerprint"]["cpu"] for g in groups} == {"CPU A", "CPU B"}
    untimed = [("here", signed(1.0, params, fingerprint=here)), ("there", signed(2.0, params, fingerprint=there))]
    [group] = rank.rank(untimed, KEYS)["groups"]
    assert [e["source"] for e in group["entries"]] == ["there", "here"] and group["fingerprint"] is None


def test_the_fingerprint_is_read_from_proc():
    machine = measures.fingerprint()
    assert machine["cores"] == os.cpu_count() and isinstance(machine["cpu"], (str, type(None)))
    assert machine["gpu"] is None or all("model" in gpu and "driver" in gpu for gpu in machine["gpu"])
