"""hills.api (docs/api.md): what importing it costs against a bare
`python3 -c pass` and against a cold `hills eval` (the issue's bound: no
more than the cold eval), and an eval from a loop's process through
`api.evaluate` against the same `hills eval` run from a shell, both served
warm, timed in turns."""

import subprocess
import sys

from .bench_eval import wait_for_warm_server
from .common import Sandbox, compared, interleaved, plain_hill

LOOP = """\
import sys, time
from hills import api
submission, rounds = sys.argv[1], int(sys.argv[2])
for _ in range(rounds):
    input()
    started = time.perf_counter()
    report = api.evaluate(submission, "plain")
    assert report.passed, report.reason
    print(time.perf_counter() - started, flush=True)
"""


def main():
    with Sandbox() as box:
        submission = plain_hill(box)

        def bare():
            subprocess.run([sys.executable, "-c", "pass"], check=True, env=box.env)

        def imported():
            subprocess.run([sys.executable, "-c", "import hills.api"], check=True, env=box.env)

        cold_env = dict(box.env, HILLS_WARM="off")

        def cold():
            subprocess.run(["hills", "eval", submission, "-H", "plain"], cwd=box.project, env=cold_env,
                           check=True, capture_output=True)

        compared("python3 -c 'import hills.api' vs python3 -c pass", interleaved(bare, imported, rounds=11))
        compared("python3 -c 'import hills.api' vs a cold hills eval", interleaved(cold, imported, rounds=11), 1.0)

        wait_for_warm_server(box)
        rounds = 11
        loop = subprocess.Popen([sys.executable, "-c", LOOP, submission, str(rounds + 1)], cwd=box.project,
                                env=box.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

        def from_loop():
            loop.stdin.write("\n")
            loop.stdin.flush()
            float(loop.stdout.readline())

        def from_shell():
            box.run("hills", "eval", submission, "-H", "plain")

        try:
            compared("api.evaluate in a loop's process vs hills eval from a shell (warm)",
                     interleaved(from_shell, from_loop, rounds=rounds, pause=0.3))
        finally:
            loop.stdin.close()
            loop.wait(30)
        box.run("hills", "warm", "stop")


if __name__ == "__main__":
    main()
