"""Fail closed (DESIGN 6.9, docs/decisions.md "Fail closed on the sandbox
and on the caller's environment"): no official score unless submitted code
ran confined, by a bubblewrap only root could have put there, or the hill's
author declared `sandbox: none`; an unconfined report never ranks beside a
confined one; and the caller's PYTHON* and LD_* variables never reach the
process that signs. Each attack has its control: the same attack with the
boundary switched off, succeeding."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testing.util import needs_bwrap
from testing.eval_fixtures import attempts_log, hills, make_hill, on_machine, real, submission, tree_of
from hills.base import startup
from hills.evidence import signing, trust
from hills.run import sandbox
from hills.views import rank
from testing.warm_fixtures import log_of, served, wait_for_server

LABELS = [3, 1, 4, 1, 5, 9, 2, 6]
# Accuracy of the guesses solution.py prints against private/labels.json;
# submitted code is started the one way hills confines it.
ACC_EVAL = """\
    import json
    import sys
    from pathlib import Path

    from hills import sdk

    def eval(submission, *, final=False, **params):
        labels = json.loads((Path(__file__).parent / "private" / "labels.json").read_text())
        done = sdk.run_submission([sys.executable, "solution.py"], capture_output=True, text=True)
        lines = done.stdout.strip().splitlines()
        guess = json.loads(lines[-1]) if lines else []
        right = sum(1 for a, b in zip(guess, labels) if a == b)
        return {"passed": True, "metrics": [{"name": "accuracy", "value": right / len(labels), "direction": "max"}],
                "details": {"stderr": done.stderr[-1000:]}}
    """
# The thief: walks up from its folder, globbing for private/labels.json.
THIEF = """\
import glob, json, os
found, folder = None, os.getcwd()
while found is None:
    for pattern in ("*/private/labels.json", "*/*/private/labels.json"):
        hits = glob.glob(os.path.join(folder, pattern))
        if hits:
            found = hits[0]
            break
    if os.path.dirname(folder) == folder:
        break
    folder = os.path.dirname(folder)
print(json.dumps(json.load(open(found)) if found else [0] * 8))
"""
HONEST = "print([3, 1, 4, 1, 0, 0, 0, 0])\n"  # half right: 0.5
# Runs its command unconfined (what follows `--`, else its last argument):
# it passes the probe `bwrap --ro-bind / / --unshare-pid true` all the same.
FAKE_BWRAP = f"""\
#!{sys.executable}
import os, sys
args = sys.argv[1:]
command = args[args.index("--") + 1:] if "--" in args else args[-1:]
os.execvp(command[0], command)
"""
# A sitecustomize that rewrites any report's accuracy to 0.999 as it is
# serialised (so signed), and notes each process it loads in.
EVIL_SITE = """\
import json, os
with open({marker!r}, "a") as handle:
    handle.write(str(os.getpid()) + "\\n")
_dumps = json.dumps
def dumps(obj, *args, **kwargs):
    if isinstance(obj, dict) and isinstance(obj.get("metrics"), list):
        for metric in obj["metrics"]:
            if isinstance(metric, dict) and metric.get("name") == "accuracy":
                metric["value"] = 0.999
    return _dumps(obj, *args, **kwargs)
json.dumps = dumps
"""
# hills' own entry point with the restart switched off: the control.
UNGUARDED = ("import sys; from hills import entry; from hills.base import startup; startup.start_clean = lambda: None; "
             "sys.argv = ['hills'] + sys.argv[1:]; entry.main()")


@pytest.fixture(scope="module")
def hills_made(module_machine):
    """`acc` under the default `sandbox: auto`, and `acc-open`, whose author
    declared `sandbox: none`; both keep the labels in private/."""
    if not sandbox.bwrap_works():
        pytest.skip("bubblewrap is not usable here: a 'sandbox: auto' hill cannot be committed")
    private = {"labels.json": json.dumps(LABELS)}
    with on_machine(module_machine):
        return {"acc": make_hill("acc", ACC_EVAL, timeout=60, private=private),
                "acc-open": make_hill("acc-open", ACC_EVAL, timeout=60, private=private,
                                      extra="sandbox: none\n")}


def logged(hills_made, name):
    log = attempts_log(name, tree_of(hills_made[name]))
    return log.read_text() if log.exists() else None


def accuracy(report):
    return next(metric["value"] for metric in report["metrics"] if metric["name"] == "accuracy")


def thief(tmp_path):
    return submission(tmp_path / "thief", {"solution.py": THIEF})


def honest(tmp_path):
    return submission(tmp_path / "honest", {"solution.py": HONEST})


def fake_bwrap(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    fake = folder / "bwrap"
    fake.write_text(FAKE_BWRAP)
    fake.chmod(0o755)
    # The precondition of the attack: today's probe takes it for bubblewrap.
    assert sandbox.probe(str(fake))
    return fake


# -- (a) no bubblewrap: refused, unless the author said `sandbox: none` -------------

@needs_bwrap
def test_a_confined_thief_finds_nothing(hills_made, tmp_path):
    result = hills("eval", thief(tmp_path), "-H", "acc")
    assert result.code == 0, result.output
    assert accuracy(result.report) == 0.0 and result.report["official"] is True
    assert result.report["isolation"]["evaluator"] == "bwrap"
    assert result.report["isolation"]["bwrap"] == sandbox.bwrap_binary()


@needs_bwrap
def test_a_missing_bubblewrap_refuses_the_thief_and_logs_nothing(hills_made, tmp_path, monkeypatch):
    before = logged(hills_made, "acc")
    monkeypatch.setenv("HILLS_BWRAP", "/nonexistent")
    result = hills("eval", thief(tmp_path), "-H", "acc")
    assert result.code == 4, result.output
    assert "error: bubblewrap '/nonexistent' (HILLS_BWRAP) does not exist: hills never runs submitted code " \
           "unconfined (hill.yaml 'sandbox: auto')" in result.err
    assert "hint: install bubblewrap" in result.err and "declare 'sandbox: none' in its hill.yaml" in result.err
    assert result.out == ""
    assert logged(hills_made, "acc") == before
    # The dev path follows the same rule.
    current = hills("eval", thief(tmp_path / "current"), "-H", "acc", "--current")
    assert current.code == 4 and "(HILLS_BWRAP) does not exist" in current.err, current.output


@needs_bwrap
def test_the_control_sandbox_none_runs_the_thief_unconfined_and_says_so(hills_made, tmp_path, monkeypatch):
    """The attack is real: where the author declared `sandbox: none`, even
    without bubblewrap, the thief reads the labels; the report says so."""
    monkeypatch.setenv("HILLS_BWRAP", "/nonexistent")
    result = hills("eval", thief(tmp_path), "-H", "acc-open")
    assert result.code == 0, result.output
    report = result.report
    assert accuracy(report) == 1.0 and report["official"] is True
    assert {"name": "isolation", "value": "none", "primary": True} in report["config"]
    assert report["isolation"]["evaluator"] == "none" and report["isolation"]["submitted_code"] == "unconfined"
    assert "bwrap" not in report["isolation"]
    described = hills("describe", "acc-open")
    assert "- sandbox: none (declared by the hill's author" in described.out, described.output
    assert json.loads(hills("describe", "acc-open", "--json").out)["sandbox"] == "none"
    assert json.loads(hills("describe", "acc", "--json").out)["sandbox"] == "auto"


# -- (b) a bubblewrap the climber wrote ------------------------------------------------

@needs_bwrap
def test_a_fake_bwrap_in_hills_bwrap_is_refused(hills_made, tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # a folder others may write, not sticky: the file in it could be anyone's
    fake = fake_bwrap(shared)
    before = logged(hills_made, "acc")
    monkeypatch.setenv("HILLS_BWRAP", str(fake))
    result = hills("eval", thief(tmp_path), "-H", "acc")
    assert result.code == 4, result.output
    assert f"error: bubblewrap '{fake}' (HILLS_BWRAP) is not trusted: its folder '{shared}' is writable by its " \
           "group or others" in result.err, result.err
    assert logged(hills_made, "acc") == before


@needs_bwrap
def test_a_fake_bwrap_owned_by_the_climber_is_refused(hills_made, tmp_path, monkeypatch):
    fake = fake_bwrap(tmp_path / "owned")
    if os.geteuid() == 0:
        os.chown(fake, 65534, 65534)  # as a climber's own file would be
    owner = fake.stat().st_uid
    assert owner != 0
    monkeypatch.setenv("HILLS_BWRAP", str(fake))
    result = hills("eval", thief(tmp_path), "-H", "acc")
    assert result.code == 4, result.output
    assert f"is not trusted: '{fake}' is owned by uid {owner}, not by root" in result.err


@needs_bwrap
def test_a_fake_bwrap_first_on_path_is_refused(hills_made, tmp_path, monkeypatch):
    fake = fake_bwrap(tmp_path / "bin")
    if os.geteuid() == 0:
        os.chown(fake, 65534, 65534)  # as a climber's own file would be
    monkeypatch.delenv("HILLS_BWRAP", raising=False)
    monkeypatch.setenv("PATH", os.pathsep.join([str(fake.parent), os.environ["PATH"]]))
    assert sandbox.which("bwrap") == str(fake)
    result = hills("eval", thief(tmp_path), "-H", "acc")
    assert result.code == 4, result.output
    assert f"error: bubblewrap '{fake}' (the first 'bwrap' on PATH) is not trusted" in result.err


@needs_bwrap
def test_the_control_a_fake_bwrap_taken_on_trust_gives_the_thief_an_official_score(hills_made, tmp_path,
                                                                                    monkeypatch):
    """With the trust rule switched off, the fake passes for bubblewrap and
    the thief gets an official 1.0 that claims it ran confined."""
    fake = fake_bwrap(tmp_path / "trusted")
    monkeypatch.setattr(sandbox, "trust_problem", lambda path: None)
    monkeypatch.setattr(sandbox, "_found", {})
    monkeypatch.setenv("HILLS_BWRAP", str(fake))
    result = hills("eval", thief(tmp_path), "-H", "acc")
    assert result.code == 0, result.output
    assert accuracy(result.report) == 1.0 and result.report["official"] is True
    assert result.report["isolation"]["evaluator"] == "bwrap"


@needs_bwrap
def test_hills_bwrap_naming_a_root_owned_bwrap_is_honoured_and_named(hills_made, tmp_path, monkeypatch):
    system = sandbox.bwrap_binary()
    assert system and sandbox.trust_problem(system) is None
    link = tmp_path / "bwrap-link"
    link.symlink_to(system)  # a link in a folder the climber may write: its target is what runs
    monkeypatch.setenv("HILLS_BWRAP", str(link))
    result = hills("eval", thief(tmp_path), "-H", "acc")
    assert result.code == 0, result.output
    assert accuracy(result.report) == 0.0
    assert result.report["isolation"]["bwrap"] == os.path.realpath(system)
    assert result.report["isolation"]["overrides"] == {"HILLS_BWRAP": str(link)}
    assert f"HILLS_BWRAP={link}" in result.err


def test_the_trust_rule_itself(tmp_path):
    assert sandbox.trust_problem("/nonexistent/bwrap").startswith("'/nonexistent/bwrap' cannot be read")
    assert sandbox.trust_problem(str(tmp_path)) == f"'{tmp_path}' is not a regular file"
    if os.path.exists("/bin/sh") and os.stat(os.path.realpath("/bin/sh")).st_uid == 0:
        assert sandbox.trust_problem(os.path.realpath("/bin/sh")) is None
    writable = tmp_path / "open"
    writable.write_text("")
    writable.chmod(0o777)
    if os.geteuid() == 0:
        assert sandbox.trust_problem(str(writable)) == f"'{writable}' is writable by its group or others"
        # Root's file under a sticky folder (the machine's /tmp) is root's
        # to change alone; under a folder others may write, it is anyone's.
        writable.chmod(0o755)
        sticky, shared = tmp_path / "sticky", tmp_path / "shared"
        for folder, mode in ((sticky, 0o1777), (shared, 0o777)):
            folder.mkdir()
            folder.chmod(mode)
            (folder / "bwrap").write_text("")
            (folder / "bwrap").chmod(0o755)
        assert sandbox.trust_problem(str(sticky / "bwrap")) is None
        assert sandbox.trust_problem(str(shared / "bwrap")) == (f"its folder '{shared}' is writable by its group "
                                                                "or others")


# -- (d) isolation decides comparability --------------------------------------------

@needs_bwrap
def test_an_unconfined_report_never_ranks_beside_a_confined_one(hills_made, tmp_path, monkeypatch):
    """A report of the same version made unconfined (as hills made them under
    `sandbox: auto` without bubblewrap before this rule, with `isolation`
    not primary) ranks in a group of its own; the control: with isolation
    not part of comparability, it ranks beside, and above, the confined one."""
    files = {}
    for label in ("confined", "twin"):
        files[label] = tmp_path / f"{label}.json"
        result = hills("eval", honest(tmp_path / label), "-H", "acc", "-o", files[label])
        assert result.code == 0 and accuracy(result.report) == 0.5, result.output
    old = json.loads(files["confined"].read_text())
    old["config"] = [dict(entry, value="none", primary=False) if entry["name"] == "isolation" else entry
                     for entry in old["config"]]
    old["isolation"] = dict(old["isolation"], evaluator="none", submitted_code="unconfined")
    for metric in old["metrics"]:
        metric["value"] = 1.0
    signing.seal(old, trust.machine_keys(for_signing=True))  # as this machine signed such reports
    files["unconfined"] = tmp_path / "unconfined.json"
    files["unconfined"].write_text(json.dumps(old))
    assert hills("verify", files["unconfined"]).code == 0

    def groups():
        ranked = hills("rank", "--json", *files.values())
        assert ranked.code == 0, ranked.output
        data = json.loads(ranked.out)
        assert data["apart"] == []
        return {json.dumps(group["primary"]): [entry["source"] for entry in group["entries"]]
                for group in data["groups"]}

    assert groups() == {json.dumps([{"name": "isolation", "value": "bwrap"}]): [str(files["confined"]),
                                                                               str(files["twin"])],
                        json.dumps([{"name": "isolation", "value": "none"}]): [str(files["unconfined"])]}
    text = hills("rank", *files.values())
    assert "[isolation=none]" in text.out and "[isolation=bwrap]" in text.out, text.output
    monkeypatch.setattr(rank, "primary_tuple", lambda report: ())
    assert list(groups().values()) == [[str(files["unconfined"]), str(files["confined"]), str(files["twin"])]]


# -- (c) the caller's environment never reaches the signer ---------------------------

def evil_site(tmp_path: Path) -> tuple[Path, Path]:
    folder, marker = tmp_path / "evil", tmp_path / "loaded.txt"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(EVIL_SITE.format(marker=str(marker)))
    return folder, marker


def forges(env: dict[str, str]) -> bool:
    """Whether a plain interpreter started with `env` forges a report."""
    done = subprocess.run([sys.executable, "-c", "import json; print(json.dumps({'metrics': "
                           "[{'name': 'accuracy', 'value': 0.5}]}))"], env=env, capture_output=True, text=True)
    return '"value": 0.999' in done.stdout


def unguarded(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", UNGUARDED, *argv], env=env, capture_output=True, text=True,
                          timeout=180)


def verified(text: str) -> bool:
    done = real("hills", "verify", "-", input=text)
    return done.code == 0 and "signature valid" in done.out


@needs_bwrap
def test_pythonpath_cannot_steer_the_signer(hills_made, tmp_path):
    folder, marker = evil_site(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(folder), HILLS_WARM="off")
    assert forges(env) and marker.exists()  # the precondition: it runs, and patches
    marker.unlink()
    result = real("hills", "eval", honest(tmp_path), "-H", "acc", env=env)
    assert result.code == 0, result.output
    report = json.loads(result.out)
    assert accuracy(report) == 0.5 and report["official"] is True and verified(result.out)
    # It loaded in the process the caller started, which then started again without it.
    assert len(marker.read_text().split()) == 1
    assert "PYTHONPATH" not in report["isolation"]["overrides"]
    # The control: the same eval, the restart switched off, is forged and validly signed.
    marker.unlink()
    done = unguarded(["eval", str(honest(tmp_path / "control")), "-H", "acc"], env)
    assert done.returncode == 0, done.stderr
    assert accuracy(json.loads(done.stdout)) == 0.999 and verified(done.stdout)


@needs_bwrap
def test_pythonpath_cannot_steer_a_warm_eval(hills_made, tmp_path, warm):
    folder, marker = evil_site(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(folder))
    env.pop("HILLS_WARM", None)
    sub = honest(tmp_path)
    first = real("hills", "eval", sub, "-H", "acc", env=env)
    assert first.code == 0, first.output
    wait_for_server(warm)
    second = real("hills", "eval", sub, "-H", "acc", env=env)
    assert second.code == 0, second.output
    assert served(warm) == 1, log_of(warm)  # the second was a warm one
    for done in (first, second):
        assert accuracy(json.loads(done.out)) == 0.5 and verified(done.out)
    assert len(marker.read_text().split()) == 2  # the two callers', before each started again
    # The control: callers that do not start again start and use a server of
    # their own, with the caller's PYTHONPATH, and its worker signs the forgery.
    unguarded(["eval", str(sub), "-H", "acc"], env)
    wait_for_server(warm, count=2)
    control = unguarded(["eval", str(sub), "-H", "acc"], env)
    assert control.returncode == 0, control.stderr
    assert served(warm) == 2, log_of(warm)
    assert accuracy(json.loads(control.stdout)) == 0.999 and verified(control.stdout)


# Notes the command line of each program it loads into.
PRELOAD_SOURCE = """\
#include <stdio.h>
__attribute__((constructor)) static void loaded(void) {
    char line[4096];
    FILE *self = fopen("/proc/self/cmdline", "r");
    size_t size = self ? fread(line, 1, sizeof line - 1, self) : 0;
    if (self) fclose(self);
    for (size_t i = 0; i < size; i++) if (line[i] == 0) line[i] = ' ';
    line[size] = 0;
    FILE *handle = fopen(MARKER, "a");
    if (handle) { fprintf(handle, "%s\\n", line); fclose(handle); }
}
"""


@needs_bwrap
@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to build a preload library")
def test_ld_preload_reaches_neither_the_signer_nor_what_it_starts(hills_made, tmp_path):
    marker = tmp_path / "preloaded.txt"
    source = tmp_path / "preload.c"
    source.write_text(PRELOAD_SOURCE)
    library = tmp_path / "preload.so"
    built = subprocess.run(["cc", "-shared", "-fPIC", f'-DMARKER="{marker}"', "-o", str(library), str(source)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    env = dict(os.environ, LD_PRELOAD=str(library), HILLS_WARM="off")
    subprocess.run(["true"], env=env)
    assert marker.read_text() == "true \n"  # the precondition: it loads in what it is given to
    marker.unlink()
    result = real("hills", "eval", honest(tmp_path), "-H", "acc", env=env)
    assert result.code == 0, result.output
    assert accuracy(json.loads(result.out)) == 0.5
    # It loaded only into the programs on the way to the interpreter the
    # caller started (/usr/bin/env of bin/hills, the suite's python3 stub,
    # that interpreter): never into hills restarted (`-I`), which signs,
    # nor into git, bubblewrap, the evaluator or the submitted code.
    loaded = marker.read_text().splitlines()
    assert loaded and any(" eval " in line for line in loaded), loaded
    assert not [line for line in loaded if " -I " in line], loaded
    # The control: without the restart, the interpreter that signs loads it.
    marker.unlink()
    done = unguarded(["eval", str(honest(tmp_path / "control")), "-H", "acc"], env)
    assert done.returncode == 0, done.stderr
    assert [line for line in marker.read_text().splitlines() if "startup.start_clean = lambda" in line]


def test_which_variables_start_hills_again():
    names = ["PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONWARNINGS", "PYTHONUSERBASE", "PYTHONPYCACHEPREFIX",
             "PYTHONSAFEPATH", "PYTHONANYTHINGNEW", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GCONV_PATH",
             "GLIBC_TUNABLES", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONUTF8",
             "HILLS_HOME", "HILLS_BWRAP", "PATH", "HOME", "LANG"]
    assert startup.steering(names) == names[:13]  # deny by default: an unknown PYTHON* too
    assert startup.internal(["HILLS_REAL_PYTHON", "HILLS_AUDIT_FD", "HILLS_SECRET_SEED", "HILLCLIMB_RESULT",
                             "HILLS_HOME", "HILLS_BWRAP", "HILLS_WARM"]) == [
        "HILLS_REAL_PYTHON", "HILLS_AUDIT_FD", "HILLS_SECRET_SEED", "HILLCLIMB_RESULT"]


def test_a_callers_internal_variables_are_dropped_and_overrides_kept(tmp_path):
    env = dict(os.environ, HILLS_REAL_PYTHON="/tmp/evil-python", HILLS_AUDIT_FD="9:1", HILLCLIMB_RESULT="/x",
               HILLS_BWRAP="/usr/bin/bwrap")
    code = ("import os; from hills.base import startup; startup.start_clean(); "
            "print(sorted(k for k in os.environ if k.startswith(('HILLS_', 'HILLCLIMB_'))))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    kept = json.loads(done.stdout.replace("'", '"'))
    assert "HILLS_BWRAP" in kept and "HILLS_HOME" in kept
    assert not {"HILLS_REAL_PYTHON", "HILLS_AUDIT_FD", "HILLCLIMB_RESULT"} & set(kept)
