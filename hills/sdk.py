"""What a hill's evaluator may call: run submitted code confined.

    from hills import sdk
    done = sdk.run_submission([sys.executable, "solution.py"], timeout=60)

The submitted code runs with the submission snapshot as its folder (the
only place it can write, besides a scratch folder in TMPDIR), without the
hill, private/ or the machine state in sight, and under a time and a
memory limit. Outside a hills eval it runs the command plainly, with the
same limits, so an evaluator can be tried by hand.

Standard library only: hills puts a copy on the evaluator's PYTHONPATH.
`python -m hills.sdk ARGV...` runs ARGV the same way (the wrapper behind
`$HILLS_PYTHON $HILLS_SOLUTION` in command verifiers).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

ENV_CONFIG = "HILLS_SUBMISSION_SANDBOX"
DEFAULT_MEMORY_MB = 4096

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path
    from typing import IO, Any


def _config() -> dict[str, Any]:
    raw = os.environ.get(ENV_CONFIG)
    return json.loads(raw) if raw else {}


def _limit(memory_bytes: int) -> Callable[[], None]:
    def apply() -> None:
        import resource

        if memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    return apply


def run_submission(argv: Sequence[str], *, timeout: float | None = None, memory_mb: int | None = None,
                   capture_output: bool = False, input: str | bytes | None = None, text: bool | None = None,
                   cwd: Path | str | None = None, stdout: int | IO[Any] | None = None,
                   stderr: int | IO[Any] | None = None) -> subprocess.CompletedProcess[Any]:
    """Run `argv` as submitted code; return a subprocess.CompletedProcess.

    In an eval it runs in the submission snapshot whatever `cwd` says; by
    hand, in `cwd` (default: the current folder). `stdout` and `stderr` may
    be files to write to instead of capturing. Raises
    subprocess.TimeoutExpired (after killing everything it started) when it
    runs past `timeout` seconds (default: the hill's limit).
    """
    config = _config()
    prefix = config.get("prefix", [])
    cwd = config.get("cwd") or (os.fspath(cwd) if cwd is not None else os.getcwd())
    timeout = timeout if timeout is not None else config.get("timeout")
    memory = (memory_mb if memory_mb is not None else config.get("memory_mb", DEFAULT_MEMORY_MB)) * 1024 * 1024
    env = {k: v for k, v in os.environ.items() if k not in (ENV_CONFIG, "HILLS_RESULT_FD")}
    if config.get("scratch"):
        env["TMPDIR"] = config["scratch"]
    process = subprocess.Popen(prefix + list(argv), cwd=cwd, env=env, start_new_session=True,
                               preexec_fn=_limit(memory),
                               stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                               stdout=subprocess.PIPE if capture_output else stdout,
                               stderr=subprocess.PIPE if capture_output else stderr, text=text)
    try:
        try:
            out, err = process.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            _kill(process)
            out, err = process.communicate()
            raise subprocess.TimeoutExpired(argv, exc.timeout, out, err)
        except BaseException:
            _kill(process)
            raise
        _kill(process)  # anything it left behind in its group
    finally:
        _tidy(config)
    return subprocess.CompletedProcess(argv, process.returncode, out, err)


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as handle:
                    children = [int(p) for p in handle.read().split()]
                found += children
                frontier += children
        except OSError:
            continue
    return found


def _dead(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def _kill(process: subprocess.Popen[Any]) -> None:
    # Its descendants first (a sandbox's own processes are not in this
    # group), and only once they are gone does the caller tidy its folder.
    descendants = _descendants(process.pid) if process.poll() is None else []
    for pid in descendants:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    deadline = time.monotonic() + 2
    while descendants and time.monotonic() < deadline:
        descendants = [pid for pid in descendants if not _dead(pid)]
        if descendants:
            time.sleep(0.001)


def _tidy(config: dict[str, Any]) -> None:
    """After submitted code ran, in a hills eval: put back the links to the
    hill that later verifier steps go through (./problem, ./data), and
    remove every symlink it left in its folder that leads outside what it
    may read. The evaluator can read private/; a link left for it to follow
    would make it read held-out data on the submission's behalf."""
    folder = config.get("cwd")
    if not folder or not os.path.isdir(folder):
        return
    links = config.get("links", {})
    roots = [os.path.realpath(p) for p in [folder] + list(config.get("public", []))]
    for name, target in links.items():
        path = os.path.join(folder, name)
        try:
            if os.readlink(path) == target:
                continue
        except OSError:
            pass
        _remove(path)
        os.symlink(target, path)
        sys.stderr.write(f"hills: submitted code replaced '{name}'; the link to the hill was put back\n")
    for current, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(current, name)
            if not os.path.islink(path) or (current == folder and name in links):
                continue
            real = os.path.realpath(path)
            if not any(real == root or real.startswith(root + os.sep) for root in roots):
                os.unlink(path)
                rel = os.path.relpath(path, folder)
                sys.stderr.write(f"hills: removed the link '{rel}' left by submitted code: it leads outside "
                                 "what submitted code may read\n")


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        import shutil

        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.unlink(path)


def main(argv: Sequence[str]) -> int:
    try:
        done = run_submission(argv)
    except subprocess.TimeoutExpired as exc:
        sys.stderr.write(f"hills: submitted code ran past its {exc.timeout}s limit and was killed\n")
        return 124
    return done.returncode if done.returncode >= 0 else 128 - done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
