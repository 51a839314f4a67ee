"""`hills setup service`'s core: check every input first, then create the
service user, its state folder, the socket's folder, the configs and the
systemd unit, undoing all of it when a step fails (docs/service.md)."""

from __future__ import annotations

import functools
import json
import os
import pwd
import re
import shutil
import subprocess
import sys

from ..base.errors import EnvironmentProblem, UsageError
from ..base.records import frozen
from .server import CONFIG_NAME

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

SYSTEMD_RUNNING = "/run/systemd/system"
UNIT_DIR = "/etc/systemd/system"
UNIT_NAME = "hills.service"
SOCKET_PATH_MAX = 107  # sun_path holds 108 bytes, the last a NUL
_USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


@frozen
class ServiceSetup:
    """What `hills setup service` was asked to set up."""

    user: str
    state_dir: str
    socket: str
    admins: tuple[str, ...]
    climbers: tuple[str, ...]
    ray_address: str | None = None


@frozen
class SetupResult:
    """What was set up: the config files, the unit (None without systemd),
    whether the user was created, and how to start the service."""

    setup: ServiceSetup
    created_user: bool
    config: str
    client_config: str
    unit: str | None
    start: str


def systemd_running() -> bool:
    """Whether systemd runs this machine (`HILLS_SYSTEMD_RUNNING` names the
    folder whose presence says so, for tests)."""
    return os.path.isdir(os.environ.get("HILLS_SYSTEMD_RUNNING") or SYSTEMD_RUNNING)


def unit_dir() -> str:
    return os.environ.get("HILLS_SYSTEMD_UNIT_DIR") or UNIT_DIR


def check(setup: ServiceSetup) -> None:
    """Refuse the set-up before anything is written: not root, a user that
    does not exist or cannot be the service's, a path that is not absolute,
    a socket path too long or already taken, a state folder in the way."""
    if os.geteuid() != 0:
        raise EnvironmentProblem("hills setup service must run as root: it creates a user and folders it owns",
                                 hint="run it with sudo, once")
    if not _USER_NAME.match(setup.user) or setup.user == "root":
        raise UsageError(f"--user '{setup.user}': expected a plain user name (lowercase letters, digits, _ and -), "
                         "not root")
    if not setup.admins:
        raise UsageError("no admin given: expected at least one --admin USER, the person who commits and pins")
    if not setup.climbers:
        raise UsageError("no climber given: expected at least one --climber USER, the user the agent runs as")
    for option, users in (("--admin", setup.admins), ("--climber", setup.climbers)):
        for user in users:
            try:
                pwd.getpwnam(user)
            except KeyError:
                raise UsageError(f"{option} '{user}': unknown user, expected an existing user of this machine",
                                 hint=f"create it first (useradd {user}), or check the spelling") from None
            if user == setup.user:
                raise UsageError(f"{option} '{user}' is the service user itself: the service user must be no "
                                 "caller's")
    if setup.ray_address is not None:
        from .server import check_config

        try:
            check_config({"admins": [], "climbers": [], "user": setup.user, "socket": setup.socket,
                          "ray_address": setup.ray_address})
        except ValueError:
            raise UsageError(f"--ray '{setup.ray_address}': expected 'ray://HOST:PORT', the head's address "
                             "(the service never looks for a cluster itself)") from None
    both = sorted(set(setup.admins) & set(setup.climbers))
    if both:
        raise UsageError(f"user '{both[0]}' is given as both --admin and --climber: expected each user in one role")
    _check_paths(setup)


def _check_paths(setup: ServiceSetup) -> None:
    for option, path in (("--state", setup.state_dir), ("--socket", setup.socket)):
        if not os.path.isabs(path):
            raise UsageError(f"{option} '{path}': expected an absolute path")
    if len(os.fsencode(setup.socket)) > SOCKET_PATH_MAX:
        raise UsageError(f"--socket '{setup.socket}': {len(os.fsencode(setup.socket))} bytes, expected at most "
                         f"{SOCKET_PATH_MAX} (the limit of a unix socket's name)")
    if os.path.lexists(setup.socket) and not _is_socket(setup.socket):
        raise UsageError(f"--socket '{setup.socket}': something that is not a socket is there, expected a free name")
    socket_folder = os.path.dirname(setup.socket)
    if os.path.lexists(socket_folder) and not os.path.isdir(socket_folder):
        raise UsageError(f"--socket '{setup.socket}': '{socket_folder}' is not a folder")
    state = os.path.normpath(setup.state_dir)
    if os.path.normpath(socket_folder) == state or os.path.normpath(socket_folder).startswith(state + os.sep):
        raise UsageError(f"--socket '{setup.socket}' is inside the state folder '{state}', which no caller may enter: "
                         "expected a folder of its own, such as /run/hills")
    if os.path.lexists(state) and (os.path.islink(state) or not os.path.isdir(state)):
        raise UsageError(f"--state '{state}': expected a folder (or nothing), found a link or a file")
    if os.path.isdir(state) and os.listdir(state) and not os.path.isfile(os.path.join(state, CONFIG_NAME)):
        raise UsageError(f"--state '{state}' is a folder with files that are not a hills service's",
                         hint="pass --state DIR, an empty or new folder")


def _is_socket(path: str) -> bool:
    import stat

    return stat.S_ISSOCK(os.lstat(path).st_mode)


class _Undo:
    """What a failed set-up takes back, last first."""

    def __init__(self) -> None:
        self.steps: list[Callable[[], object]] = []

    def add(self, step: Callable[[], object]) -> None:
        self.steps.append(step)

    def run(self) -> None:
        for step in reversed(self.steps):
            try:
                step()
            except (OSError, subprocess.SubprocessError):
                pass


def set_up(setup: ServiceSetup) -> SetupResult:
    """Check, then set the service up; on a failure nothing is left."""
    check(setup)
    undo = _Undo()
    try:
        return _set_up(setup, undo)
    except BaseException:
        undo.run()
        raise


def _set_up(setup: ServiceSetup, undo: _Undo) -> SetupResult:
    from .client import client_config_path

    created = _ensure_user(setup, undo)
    entry = pwd.getpwnam(setup.user)
    _make_folder(setup.state_dir, 0o700, entry, undo)
    _make_folder(os.path.dirname(setup.socket), 0o755, entry, undo)
    config = os.path.join(setup.state_dir, CONFIG_NAME)
    _write(config, json.dumps(config_values(setup, _kept_keys(config)), indent=2) + "\n", 0o644, undo)
    client_config = client_config_path()
    _make_parents(client_config, undo)
    _write(client_config, json.dumps({"version": 1, "socket": setup.socket}, indent=2) + "\n", 0o644, undo)
    argv = serve_argv(setup)
    unit = None
    if systemd_running():
        unit = os.path.join(unit_dir(), UNIT_NAME)
        _write(unit, unit_text(setup, argv), 0o644, undo)
        start = f"systemctl daemon-reload && systemctl enable --now {UNIT_NAME}"
    else:
        import shlex

        start = f"runuser -u {setup.user} -- {shlex.join(argv)}"
    return SetupResult(setup, created, config, client_config, unit, start)


def config_values(setup: ServiceSetup, kept: dict[str, object]) -> dict[str, object]:
    """The service's config: what this set-up says, over the bounds (and
    the cluster) an admin set in the config before, which a re-run keeps."""
    values: dict[str, object] = {**kept, "version": 1, "user": setup.user, "socket": setup.socket,
                                 "admins": sorted(setup.admins), "climbers": sorted(setup.climbers)}
    if setup.ray_address is not None:
        values["ray_address"] = setup.ray_address
    return values


def _kept_keys(config: str) -> dict[str, object]:
    """The bounds and the cluster of an existing config, checked: a re-run
    refuses a config whose keys the service would refuse."""
    from .server import LIMITS, check_config

    try:
        with open(config, encoding="utf-8") as handle:
            values = json.load(handle)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise EnvironmentProblem(f"service config '{config}' cannot be read: {exc}",
                                 hint="fix it or remove it, then run this again") from None
    try:
        check_config(values)
    except ValueError as exc:
        raise UsageError(f"service config '{config}': {exc}", hint="see hills-service(5), CONFIG") from None
    return {key: values[key] for key in (*LIMITS, "ray_address") if key in values}


def system_tool(name: str) -> str | None:
    """A system administration program (useradd, userdel): on PATH, or in
    the sbin folders a PATH without them leaves out."""
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", os.defpath), "/usr/sbin", "/sbin"]))


def _ensure_user(setup: ServiceSetup, undo: _Undo) -> bool:
    try:
        pwd.getpwnam(setup.user)
        return False
    except KeyError:
        pass
    tool = system_tool("useradd")
    if tool is None:
        raise EnvironmentProblem(f"cannot create the service user '{setup.user}': useradd is not installed",
                                 hint=f"create the user yourself, then run this again with --user {setup.user}")
    nologin = next((shell for shell in ("/usr/sbin/nologin", "/sbin/nologin") if os.path.exists(shell)), "/bin/false")
    done = subprocess.run([tool, "--system", "--user-group", "--home-dir", setup.state_dir, "--no-create-home",
                           "--shell", nologin, setup.user], capture_output=True, text=True)
    if done.returncode != 0:
        raise EnvironmentProblem(f"useradd could not create the service user '{setup.user}' "
                                 f"(exit {done.returncode}): {done.stderr.strip()}")
    undo.add(lambda: subprocess.run([system_tool("userdel") or "userdel", setup.user], capture_output=True))
    return True


def _make_parents(path: str, undo: _Undo) -> None:
    """Make the folders above `path` that are missing, each taken back on a failure."""
    missing = []
    folder = os.path.dirname(path)
    while not os.path.isdir(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    for made in reversed(missing):
        os.mkdir(made, 0o755)
        undo.add(functools.partial(os.rmdir, made))


def _make_folder(path: str, mode: int, owner: pwd.struct_passwd, undo: _Undo) -> None:
    if not os.path.isdir(path):
        _make_parents(path, undo)
        os.mkdir(path, mode)
        undo.add(lambda: shutil.rmtree(path, ignore_errors=True))
    os.chown(path, owner.pw_uid, owner.pw_gid)
    os.chmod(path, mode)


def _write(path: str, text: str, mode: int, undo: _Undo) -> None:
    existed = os.path.exists(path)
    previous = open(path, "rb").read() if existed else None
    from ..base import state

    state.atomic_write(path, text, mode=mode)
    undo.add(lambda: state.atomic_write(path, previous, mode=mode) if previous is not None else os.unlink(path))


def serve_argv(setup: ServiceSetup) -> list[str]:
    """The command that runs the service."""
    return [sys.executable, "-m", "hills", "serve", "--state", setup.state_dir, "--socket", setup.socket]


def unit_text(setup: ServiceSetup, argv: list[str]) -> str:
    """The systemd unit of the service."""
    import shlex

    lines = ["[Unit]", "Description=hills evaluation service", "After=local-fs.target", "",
             "[Service]", "Type=simple", f"User={setup.user}", f"Group={setup.user}",
             f"Environment=HOME={setup.state_dir}", "UMask=0077", f"ExecStart={shlex.join(argv)}",
             "Restart=on-failure", "KillMode=mixed"]
    socket_folder = os.path.dirname(setup.socket)
    if os.path.dirname(socket_folder) == "/run":
        # /run is emptied at boot: systemd makes the socket's folder again.
        lines += [f"RuntimeDirectory={os.path.basename(socket_folder)}", "RuntimeDirectoryMode=0755",
                  "RuntimeDirectoryPreserve=yes"]
    lines += ["", "[Install]", "WantedBy=multi-user.target", ""]
    return "\n".join(lines)
