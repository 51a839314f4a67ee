"""An eval through the evaluation service against the same eval in
same-user mode, as the same climber, in turns: against a cold same-user
eval (`HILLS_WARM=off`), and against a warm one, served by a spare with
its standby (target: at most 1.2x, issue 26; docs/service-warm.md). Both
sides wait 0.3 s before each call, untimed, as an agent does between
calls, so that the standby each side makes between calls never overlaps
a timed one. Needs root, to make the service's users; says why it skips
without."""

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..testing.service_fixtures import Service, home_of, make_hill, make_user, remove_user, skip_reason, submission
from .common import REPO, compared, interleaved


def main():
    reason = skip_reason()
    if reason:
        print(f"eval through the service: skipped ({reason})")
        return
    # Measured as installed: the package's bytecode compiled, which the
    # callers here (PYTHONDONTWRITEBYTECODE=1, another user) would not write.
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(REPO, "hills")], check=True,
                   capture_output=True)
    base = Path(tempfile.mkdtemp(prefix="hills-bench-service-", dir="/tmp"))
    os.chmod(base, 0o755)
    svc = Service(base)
    for user in (svc.admin, svc.climber):
        make_user(user)
    try:
        done = subprocess.run(["env", f"HILLS_SERVICE_CONFIG={svc.client_config}",
                               f"HILLS_SYSTEMD_RUNNING={base / 'no-systemd'}", *svc.python, "-m", "hills", "setup",
                               "service", "--user", svc.user, "--state", str(svc.state), "--socket", str(svc.socket),
                               "--admin", svc.admin, "--climber", svc.climber],
                              capture_output=True, text=True, env={**os.environ, **svc.python_env})
        assert done.returncode == 0, done.stderr
        svc.start()
        assert make_hill(svc, svc.admin, "timed").code == 0
        off = {"HILLS_SERVICE": "off"}
        assert make_hill(svc, svc.climber, "timed", extra_env=off).code == 0
        folder = submission(svc, svc.climber, "sub")
        project = str(Path(home_of(svc.climber)) / "project")

        def same_user():
            assert svc.hills(svc.climber, "eval", folder, "-H", "timed", cwd=project, **off).code == 0

        def same_user_warm():
            assert svc.hills(svc.climber, "eval", folder, "-H", "timed", cwd=project, HILLS_WARM="on",
                             **off).code == 0

        def through_service():
            assert svc.hills(svc.climber, "eval", folder, "-H", "timed", cwd=project).code == 0

        compared("hills eval through the service vs same-user cold",
                 interleaved(same_user, through_service, rounds=11, pause=0.3))
        log = svc.base / "serve.log"
        before = log.read_text().count("took the standby")
        warm_log = Path(f"/tmp/hills-warm-{pwd.getpwnam(svc.climber).pw_uid}/warm.log")
        warm_before = warm_log.read_text().count("with its standby") if warm_log.exists() else 0
        compared("hills eval through the service vs same-user warm",
                 interleaved(same_user_warm, through_service, rounds=11, warmup=2, pause=0.3), 1.2)
        # What the service's warm path did, said by its own log (docs/service-warm.md).
        print(f"{'  evals through the service that took its standby':<58} "
              f"{log.read_text().count('took the standby') - before} of 13 (2 untimed first)")
        served = (warm_log.read_text().count("with its standby") if warm_log.exists() else 0) - warm_before
        print(f"{'  same-user evals a spare served with its standby':<58} {served} of 13 (2 untimed first)")
        # The warm same-user server and its spare are the climber's: gone with it.
        svc.hills(svc.climber, "warm", "stop", "--all", **off)
    finally:
        svc.stop()
        for user in (svc.admin, svc.climber, svc.user):
            remove_user(user)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
