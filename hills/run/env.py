"""The evaluator's environment: the variables it may inherit, and the sdk
folder every evaluator and submission imports from (spaces, sdk and the
shim, the audit and scoring hooks, the confined `python` and the shell
wrappers), made once per hills version and sealed; and the bytecode of the
folders an evaluator reads."""

from __future__ import annotations

import os

from .. import spaces
from ..base import state
from ..evidence import report as report_module

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from .records import EvalContext, Say


# What the evaluator's environment may inherit from the caller; nothing else
# (no tokens, no cloud credentials) reaches it.
ENV_ALLOW = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TERM", "USER", "LOGNAME",
             "SYSTEMROOT", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "CUDA_VISIBLE_DEVICES",
             "NVIDIA_VISIBLE_DEVICES")


SHIM = os.path.join(os.path.dirname(os.path.dirname(__file__)), "shim.py")


def evaluator_env(ctx: EvalContext, extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of an evaluator: `$HILLS_PYTHON` and the `python`
    and `python3` first on its PATH are the confined interpreter,
    `$HILLS_SCORING_PYTHON` the trusted one."""
    env = {key: os.environ[key] for key in ENV_ALLOW if key in os.environ}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env["PATH"] = os.pathsep.join([os.path.join(ctx.sdk_dir, "bin"), env.get("PATH", os.defpath)])
    env["HILLS_PYTHON"] = ctx.wrapper
    env["HILLS_SCORING_PYTHON"] = ctx.python
    env["HILLS_REAL_PYTHON"] = ctx.python
    env.update(extra)
    return env


PYTHON_WRAPPER = """#!/bin/sh
# The confined interpreter: $HILLS_PYTHON, and python and python3 first on
# an evaluator's PATH. Whatever it is given (a script, -c, -m) runs as
# submitted code, confined by hills.sdk. The trusted interpreter of scoring
# steps is $HILLS_SCORING_PYTHON.
if [ -z "$HILLS_REAL_PYTHON" ]; then
    echo "hills: the confined python runs only inside a hills eval (HILLS_REAL_PYTHON is not set)" >&2
    exit 127
fi
# The sdk runs as a file, isolated (-I): from the folder the verifier runs
# in, `-m hills.sdk` would import whatever hills/ the submission holds.
sdk="$(dirname "$0")/../hills/sdk.py"
if [ "$1" = "-m" ] && [ "$2" = "hills.sdk" ]; then
    shift 2
    exec "$HILLS_REAL_PYTHON" -I "$sdk" "$@"
fi
exec "$HILLS_REAL_PYTHON" -I "$sdk" "$HILLS_REAL_PYTHON" "$@"
"""


# $HILLCLIMB_PYTHON: where the code comes from decides. The verifier's own
# code (`-c`, `-m` of the hill's environment, a program on standard input,
# a script of the hill such as `exec "$HILLCLIMB_PYTHON" problem/verify.py`)
# runs trusted, under the scoring guard of its PYTHONPATH (hills/scoringhook.py),
# so it may read private/ and write $HILLCLIMB_RESULT; any other script (the
# candidate's solution.py) runs confined, as under $HILLS_PYTHON.
HILLCLIMB_WRAPPER = """#!/bin/sh
skip= script= inline=
for arg do
    if [ -n "$skip" ]; then skip=; continue; fi
    case "$arg" in
        -X|-W|--check-hash-based-pycs) skip=1 ;;
        -c*|-m*|-) inline=1; break ;;
        -*) ;;
        *) script=$arg; break ;;
    esac
done
if [ -z "$script" ] || [ -n "$inline" ]; then
    exec "$HILLS_REAL_PYTHON" "$@"
fi
real=$(realpath -e -- "$script" 2>/dev/null) && hill=$(realpath -e -- "$HILLS_HILL" 2>/dev/null) &&
case "$real" in
    "$hill"/*) exec "$HILLS_REAL_PYTHON" "$@" ;;
esac
exec "$(dirname "$0")/python" "$@"
"""


# The shells first on a command verifier's PATH: a script that is a file
# of the submission is not run in the scoring phase (the guard of
# hills/scoringhook.py cannot see into a shell); anything else runs on the
# shell found after this folder on PATH. Without the guard's variable
# (submitted code, confined, never has it) they only pass through.
SHELL_WRAPPED = ("bash", "sh", "dash", "zsh")


SHELL_WRAPPER = """#!/bin/sh
self=${0%/*} name=${0##*/}
here=$(cd "$self" && pwd -P)
real= rest=$PATH
while [ -n "$rest" ]; do
    folder=${rest%%:*}
    case "$rest" in *:*) rest=${rest#*:} ;; *) rest= ;; esac
    { [ -n "$folder" ] && [ "$folder" != "$self" ] && [ -x "$folder/$name" ]; } || continue
    [ "$(cd "$folder" && pwd -P)" = "$here" ] && continue
    real=$folder/$name
    break
done
if [ -z "$real" ]; then echo "$name: command not found" >&2; exit 127; fi
if [ -n "$HILLS_SCORING_GUARD" ]; then
    skip= script=
    for arg do
        if [ -n "$skip" ]; then skip=; continue; fi
        case "$arg" in
            -c|-s|-i) break ;;
            -o|+o|-O|+O|--rcfile|--init-file) skip=1 ;;
            -*|+*) ;;
            *) script=$arg; break ;;
        esac
    done
    if [ -n "$script" ] && found=$(realpath -e -- "$script" 2>/dev/null); then
        nl='
'
        record=${HILLS_SCORING_GUARD%%"$nl"*}
        roots=${HILLS_SCORING_GUARD#*"$nl"}
        roots=${roots%%"$nl"*}
        while [ -n "$roots" ]; do
            root=${roots%%:*}
            case "$roots" in *:*) roots=${roots#*:} ;; *) roots= ;; esac
            root=$(realpath -e -- "$root" 2>/dev/null) || continue
            case "$found" in
                "$root"/*)
                    rel=${found#"$root"/}
                    why="the scoring phase tried to run the submission's file '$rel' as the script of '$name'; submitted code runs only confined (hills.sdk.run_submission, \\$HILLS_PYTHON, or the solution phase)"
                    printf '{"event": "stopped", "how": "as the script of %s", "path": "%s", "reason": "%s"}\\n' \\
                        "$name" "$(printf %s "$rel" | tr '\\\\"' '__')" "$(printf %s "$why" | tr '\\\\"' '__')" >> "$record"
                    echo "hills: $why" >&2
                    exit 126 ;;
            esac
        done
    fi
fi
exec "$real" "$@"
"""  # noqa: E501 (a shell script: its long lines are its text)


def sdk_path(say: Say | None = None) -> str:
    """A folder holding a tiny `hills` package (spaces, sdk and the shim)
    for the PYTHONPATH of evaluators and submissions, whose environments do
    not install hills, with its bytecode, and the `bin/python` wrapper of
    command verifiers. Made once per hills version and sealed with the
    machine key like a hill environment: every evaluator imports from it,
    so a file added or edited there (a `sitecustomize.py`, a `.pth`) would
    run in every eval. A folder that differs from its seal is made again."""
    identity = report_module.tool_identity()["sha256"][:16]
    root = os.path.join(state.home(), "sdk", identity)
    if _sdk_intact(root):
        return root
    state.ensure_home()
    with state.file_lock(root + ".lock"):
        if _sdk_intact(root):
            return root
        if say and os.path.lexists(root):
            say(f"hills: the sdk folder '{root}' changed since it was made; making it again")
        _make_sdk(root)
    return root


def _sdk_intact(root: str) -> bool:
    sealed = state.sealed_read(root + ".seal.json")
    return bool(sealed) and not os.path.islink(root) and sealed == state.folder_signature(root)


def _make_sdk(root: str) -> None:
    """Build the sdk folder aside, swap it in, then seal it (the caller
    holds its lock)."""
    import shutil

    from .. import sdk

    staging = root + f".tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(os.path.join(staging, "hills"))
    os.makedirs(os.path.join(staging, "bin"))
    with open(os.path.join(staging, "hills", "__init__.py"), "w", encoding="utf-8") as handle:
        handle.write('"""The part of hills that evaluators and submitted code may import."""\n')
    for source in (str(spaces.__file__), str(sdk.__file__), SHIM):
        shutil.copy2(source, os.path.join(staging, "hills", os.path.basename(source)))
    compile_bytecode(os.path.join(staging, "hills"))
    # The access audit's hook, first on the path of the code hills.sdk starts (docs/audit.md).
    os.makedirs(os.path.join(staging, "audit"))
    shutil.copy2(os.path.join(os.path.dirname(os.path.dirname(__file__)), "audithook.py"),
                 os.path.join(staging, "audit", "sitecustomize.py"))
    compile_bytecode(os.path.join(staging, "audit"))
    # The scoring phase's guard, first on the path of its trusted interpreters.
    os.makedirs(os.path.join(staging, "scoring"))
    shutil.copy2(os.path.join(os.path.dirname(os.path.dirname(__file__)), "scoringhook.py"),
                 os.path.join(staging, "scoring", "sitecustomize.py"))
    compile_bytecode(os.path.join(staging, "scoring"))
    for name, text in (("python", PYTHON_WRAPPER), ("python3", PYTHON_WRAPPER), ("hillclimb-python", HILLCLIMB_WRAPPER),
                       *((shell, SHELL_WRAPPER) for shell in SHELL_WRAPPED)):
        wrapper = os.path.join(staging, "bin", name)
        with open(wrapper, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(wrapper, 0o755)
    aside = root + f".old-{os.getpid()}"
    if os.path.islink(root) or os.path.isfile(root):
        os.unlink(root)
    elif os.path.lexists(root):
        shutil.rmtree(aside, ignore_errors=True)
        os.rename(root, aside)
    os.rename(staging, root)
    shutil.rmtree(aside, ignore_errors=True)
    state.sealed_write(root + ".seal.json", state.folder_signature(root))


def compile_bytecode(folder: str) -> None:
    """Bytecode for every Python file under `folder`, for this interpreter,
    beside it in `__pycache__`: an evaluator runs with bytecode writing off
    and its folders read-only, so it would compile them on every start.

    The files are hash-checked (PEP 552): an interpreter uses one only while
    its source hashes to what the file records, whatever the timestamps say,
    and else compiles the source. An interpreter of another version looks
    for its own file name and compiles the source. A file that does not
    compile is left to fail where the evaluator imports it."""
    import py_compile

    for current, dirs, files in os.walk(folder):
        dirs[:] = [name for name in dirs if name != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                try:
                    py_compile.compile(os.path.join(current, name), doraise=True,
                                       invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
                except (py_compile.PyCompileError, OSError, ValueError):
                    continue
