"""`hills setup service` and `hills serve`: what they refuse, named, with
the exit code of DESIGN section 9 and nothing half-written; what they
write, with systemd running and without. The protocol's framing and its
refusals, without a service. Tests that need root skip, saying why."""

from __future__ import annotations

import json
import os
import socket
import stat
import struct
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from testing.util import run_cli
from hills.base import errors
from hills.service import protocol, server as service, requests as service_requests
from testing.service_fixtures import Service, make_user, needs_root, remove_user


@pytest.fixture
def where(tmp_path, monkeypatch):
    """A place for a service's folders, the client config and systemd's marks."""
    base = Path(tempfile.mkdtemp(prefix="hills-setup-", dir="/tmp"))
    os.chmod(base, 0o755)
    monkeypatch.setenv("HILLS_SERVICE_CONFIG", str(base / "etc" / "service.json"))
    monkeypatch.setenv("HILLS_SYSTEMD_RUNNING", str(base / "systemd-running"))
    monkeypatch.setenv("HILLS_SYSTEMD_UNIT_DIR", str(base / "units"))
    (base / "units").mkdir()
    yield base
    import shutil

    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def people():
    """A new service user name (not yet created), an admin and a climber."""
    tag = uuid.uuid4().hex[:5]
    admin, climber, user = make_user(f"hta{tag}"), make_user(f"htc{tag}"), f"hts{tag}"
    yield user, admin, climber
    for name in (admin, climber, user):
        remove_user(name)


def _setup(where: Path, user: str, admin: str, climber: str, *extra: str):
    return run_cli("setup", "service", "--user", user, "--state", str(where / "state"),
                   "--socket", str(where / "run" / "hills.sock"), "--admin", admin, "--climber", climber, *extra)


def _nothing_written(where: Path, user: str) -> None:
    assert not (where / "state").exists() and not (where / "run").exists()
    assert not (where / "etc").exists() and not list((where / "units").iterdir())
    import pwd

    with pytest.raises(KeyError):
        pwd.getpwnam(user)


@needs_root
def test_setup_without_systemd_prints_how_to_start_the_service(where, people):
    user, admin, climber = people
    result = _setup(where, user, admin, climber)
    assert result.code == 0, result.err
    assert result.out.strip() == str(where / "run" / "hills.sock")
    state = where / "state"
    info = state.stat()
    import pwd

    assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == pwd.getpwnam(user).pw_uid
    config = json.loads((state / "service.json").read_text())
    assert config["admins"] == [admin] and config["climbers"] == [climber] and config["user"] == user
    assert json.loads((where / "etc" / "service.json").read_text())["socket"] == str(where / "run" / "hills.sock")
    assert (where / "run").stat().st_uid == pwd.getpwnam(user).pw_uid
    assert "systemd is not running here" in result.err
    assert f"runuser -u {user} -- " in result.err and "serve --state" in result.err
    assert not list((where / "units").iterdir())


@needs_root
def test_setup_with_systemd_writes_the_unit(where, people):
    user, admin, climber = people
    (where / "systemd-running").mkdir()
    result = _setup(where, user, admin, climber)
    assert result.code == 0, result.err
    unit = (where / "units" / "hills.service").read_text()
    assert f"User={user}" in unit and "ExecStart=" in unit and " serve --state " in unit
    assert "WantedBy=multi-user.target" in unit
    assert "systemctl daemon-reload && systemctl enable --now hills.service" in result.err


@needs_root
@pytest.mark.parametrize("option, value, words", [
    ("--admin", "nosuchuser-h", "--admin 'nosuchuser-h': unknown user, expected an existing user"),
    ("--climber", "nosuchuser-h", "--climber 'nosuchuser-h': unknown user, expected an existing user"),
])
def test_setup_refuses_an_unknown_user_and_writes_nothing(where, people, option, value, words):
    user, admin, climber = people
    args = {"--admin": admin, "--climber": climber}
    args[option] = value
    result = _setup(where, user, args["--admin"], args["--climber"])
    assert result.code == errors.EXIT_USAGE and words in result.err
    _nothing_written(where, user)


@needs_root
def test_setup_refuses_bad_socket_paths_and_writes_nothing(where, people):
    user, admin, climber = people
    for socket_path, words in (("relative.sock", "expected an absolute path"),
                               ("/" + "s" * 120 + ".sock", "expected at most 107"),
                               (str(where / "state" / "inside.sock"), "inside the state folder")):
        result = run_cli("setup", "service", "--user", user, "--state", str(where / "state"), "--socket",
                         socket_path, "--admin", admin, "--climber", climber)
        assert result.code == errors.EXIT_USAGE, result.err
        assert f"--socket '{socket_path}'" in result.err or "--socket" in result.err
        assert words in result.err
        _nothing_written(where, user)
    (where / "taken").write_text("a file")
    result = run_cli("setup", "service", "--user", user, "--state", str(where / "state"), "--socket",
                     str(where / "taken"), "--admin", admin, "--climber", climber)
    assert result.code == errors.EXIT_USAGE and "is not a socket" in result.err


@needs_root
def test_setup_refuses_a_state_folder_holding_other_files(where, people):
    user, admin, climber = people
    (where / "state").mkdir()
    (where / "state" / "thesis.tex").write_text("mine")
    result = _setup(where, user, admin, climber)
    assert result.code == errors.EXIT_USAGE and "with files that are not a hills service's" in result.err
    assert (where / "state" / "thesis.tex").read_text() == "mine" and not (where / "etc").exists()


@needs_root
def test_a_failed_step_takes_back_what_was_made(where, people, monkeypatch):
    user, admin, climber = people
    from hills.service import setup as service_setup

    def broken(setup, argv):
        raise OSError(28, "No space left on device")

    (where / "systemd-running").mkdir()
    monkeypatch.setattr(service_setup, "unit_text", broken)
    result = _setup(where, user, admin, climber)
    assert result.code != 0 and "No space left on device" in result.err
    _nothing_written(where, user)


@needs_root
def test_setup_refuses_to_run_without_root(where, people):
    user, admin, climber = people
    svc = Service(where)
    done = subprocess.run(svc.argv(climber, [*svc.python, "-m", "hills", "setup", "service", "--user", user,
                                            "--state", str(where / "state"), "--socket",
                                            str(where / "run" / "s.sock"), "--admin", admin, "--climber", climber],
                                   HILLS_SERVICE_CONFIG=str(where / "etc" / "service.json")),
                          capture_output=True, text=True)
    assert done.returncode == errors.EXIT_ENVIRONMENT
    assert "hills setup service must run as root" in done.stderr
    _nothing_written(where, user)


@needs_root
def test_serve_refuses_root(where):
    (where / "state").mkdir(mode=0o700)
    result = run_cli("serve", "--state", str(where / "state"))
    assert result.code == errors.EXIT_ENVIRONMENT and "refuses to run as root" in result.err


@needs_root
def test_serve_refuses_a_state_folder_others_can_read(where, people):
    user, admin, climber = people
    assert _setup(where, user, admin, climber).code == 0
    os.chmod(where / "state", 0o755)
    svc = Service(where)
    done = subprocess.run(svc.argv(user, [*svc.python, "-m", "hills", "serve", "--state", str(where / "state")]),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == errors.EXIT_ENVIRONMENT
    assert f"state folder '{where / 'state'}' is open to other users (mode 0755); expected 0700" in done.stderr
    assert not (where / "run" / "hills.sock").exists()


# ------------------------------------------------------------ the protocol, without a service

def _pair():
    left, right = socket.socketpair()
    return protocol.Connection(left), protocol.Connection(right)


def test_a_folder_streams_and_is_rebuilt_byte_for_byte(tmp_path):
    source = tmp_path / "source"
    (source / "deep").mkdir(parents=True)
    (source / "a.txt").write_bytes(b"x" * (protocol.DATA_CAP + 17))
    (source / "deep" / "b.bin").write_bytes(bytes(range(256)))
    os.symlink("a.txt", source / "link")
    sender, receiver = _pair()
    import threading

    thread = threading.Thread(target=protocol.send_folder, args=(sender, str(source)))
    thread.start()
    protocol.receive_into(receiver, str(tmp_path / "copy"), protocol.Upload())
    thread.join()
    assert (tmp_path / "copy" / "a.txt").read_bytes() == (source / "a.txt").read_bytes()
    assert (tmp_path / "copy" / "deep" / "b.bin").read_bytes() == bytes(range(256))
    assert os.readlink(tmp_path / "copy" / "link") == "a.txt"


@pytest.mark.parametrize("entry, words", [
    ({"type": "entry", "path": "../escape", "kind": "file", "size": 1, "mode": 0o644}, "not a plain relative path"),
    ({"type": "entry", "path": "/etc/passwd", "kind": "file", "size": 1, "mode": 0o644}, "not a plain relative path"),
    ({"type": "entry", "path": "out", "kind": "link", "target": "../../key"}, "leaves the folder"),
    ({"type": "entry", "path": "out", "kind": "link", "target": "/srv/hills/key"}, "leaves the folder"),
    ({"type": "entry", "path": "out", "kind": "link", "target": "./x"}, "leaves the folder"),
    ({"type": "entry", "path": "fifo", "kind": "fifo"}, "unknown kind"),
    ({"type": "entry", "path": "big", "kind": "file", "size": protocol.UPLOAD_CAP + 1, "mode": 0o644},
     "over the protocol's"),
])
def test_an_upload_that_would_leave_its_folder_or_its_bounds_is_refused(tmp_path, entry, words):
    sender, receiver = _pair()
    sender.record(entry)
    with pytest.raises(protocol.ProtocolError, match=words.replace("'", ".")):
        protocol.receive_into(receiver, str(tmp_path / "in"), protocol.Upload())
    assert not any((tmp_path / "in").iterdir())


def test_links_cannot_carry_an_upload_out_of_its_folder(tmp_path):
    # A link to the folder itself, then a link through it one level up, then
    # a file through both: each step looks harmless on its own.
    sender, receiver = _pair()
    sender.record({"type": "entry", "path": "down", "kind": "link", "target": "deep"})
    sender.record({"type": "entry", "path": "down/up", "kind": "link", "target": "x"})
    with pytest.raises(protocol.ProtocolError, match="beneath a link"):
        protocol.receive_into(receiver, str(tmp_path / "in"), protocol.Upload())
    for target in ("..", "a/../..", "."):
        sender, receiver = _pair()
        sender.record({"type": "entry", "path": "out", "kind": "link", "target": target})
        with pytest.raises(protocol.ProtocolError, match="leaves the folder"):
            protocol.receive_into(receiver, str(tmp_path / f"in-{len(target)}"), protocol.Upload())
    assert not (tmp_path / "x").exists()


def test_a_frame_past_its_bound_is_refused_before_it_is_read():
    sender, receiver = _pair()
    sender.sock.sendall(struct.pack(">cI", b"R", protocol.RECORD_CAP + 1))
    with pytest.raises(protocol.ProtocolError, match="over the protocol's"):
        receiver.receive()


def _typed(verb: str, role: str = "climber", **fields: object) -> object:
    return service_requests.check({"type": "request", "version": protocol.VERSION, "verb": verb,
                                   "fields": fields}, role, "agent")


@pytest.mark.parametrize("request_record, kind, words", [
    ({"type": "request", "version": 1, "verb": "eval", "argv": []}, protocol.ProtocolError,
     "version 1 is not spoken here.*the client is older"),
    ({"type": "request", "version": 3, "verb": "eval", "fields": {}}, protocol.ProtocolError,
     "version 3 is not spoken here.*the service is older"),
    ({"type": "hello", "version": 2}, protocol.ProtocolError, "expected a request record"),
])
def test_records_of_another_version_or_kind_are_refused(request_record, kind, words):
    with pytest.raises(kind, match=words):
        service.check_version(request_record)


@pytest.mark.parametrize("verb, fields, kind, words", [
    ("new", {}, errors.UsageError, "'new' is not a verb the hills service answers"),
    # The submission is a stream's number, never a path of the service's.
    ("eval", {"submissions": [".hills"], "hill": "x"}, errors.UsageError, "the service opens no path"),
    ("show", {"report": "/srv/hills/home/key"}, errors.UsageError, "the service opens no path"),
    ("eval", {"submissions": [0], "hill": "../../state"}, errors.UsageError, "invalid hill name"),
    ("eval", {"submissions": [0], "hill": "x", "into": "f"}, errors.UsageError,
     "'--into' is not taken through the hills service"),
    ("eval", {"submissions": [0], "hill": "x", "argv": ["-o", "f"]}, errors.UsageError,
     "'--argv' is not taken through the hills service"),
    ("show", {"report": 0, "picture": "/srv/hills/x.svg"}, errors.UsageError, "'--picture': expected true or false"),
    ("eval", {"submissions": [0], "hill": "x", "force": True}, errors.Refused,
     "'--force' of 'hills eval' is for the service's admins"),
    ("pin", {"name": "x"}, errors.Refused, "'hills pin' is for the service's admins"),
    ("eval", {"submissions": [0, 0], "hill": "x"}, errors.UsageError, "each once"),
    ("eval", {"submissions": [1], "hill": "x"}, errors.UsageError, "numbered 0, 1, 2"),
    ("eval", {"submissions": [0], "hill": "x", "param": ["--on=ray"]}, errors.UsageError, "expected NAME=VALUE"),
    ("eval", {"submissions": [0], "hill": "x", "repeat": 0}, errors.UsageError, "at least 1"),
    ("eval", {"hill": "x"}, errors.UsageError, "needs 'SUBMISSIONS'"),
    ("attempts", {"name": "x", "tree": "--all"}, errors.UsageError, "expected a tree hash"),
    ("tune", {"submission": 0, "hill": "x", "budget": 2, "tuner": "grid"}, errors.UsageError, "one of random"),
])
def test_requests_the_service_does_not_model_are_refused_by_name(verb, fields, kind, words):
    with pytest.raises(kind, match=words) as refused:
        _typed(verb, **fields)
    assert refused.value.exit_code == kind.exit_code


def test_the_service_builds_the_command_line_from_checked_values():
    typed = _typed("eval", submissions=[0], hill="demo", param=["data=a/b", "n=-1"], final=True, output=True,
                   against=1, repeat=4, json=True)
    assert typed.streams == ("dir", "dir") and typed.evaluators() == 1
    paths = {"@0": "/s/r/0", "@1": "/s/r/1", "@output": "/s/r/out/output"}
    argv = service_requests.argv_for(typed, paths, None)
    assert argv == ["--hill=demo", "--param=data=a/b", "--param=n=-1", "--final", "--output=/s/r/out/output",
                    "--repeat=4", "--against=/s/r/1", "--json", "/s/r/0"]
    from hills.commands import eval as eval_command

    parsed = eval_command.DECLARED.parse(argv)
    assert parsed is not None and parsed["params"] == ("data=a/b", "n=-1") and parsed["against"] == "/s/r/1"
    tuned = _typed("tune", submission=0, hill="demo", budget=3, parallel=4, seed=-5)
    assert tuned.evaluators() == 4
    assert "--seed=-5" in service_requests.argv_for(tuned, {"@0": "/s/r/0"}, None)


def test_on_ray_goes_only_to_the_configured_cluster():
    typed = _typed("eval", submissions=[0], hill="demo", on="ray")
    with pytest.raises(errors.UsageError, match="'--on' is not taken through this hills service: its admin "
                                                "configured no Ray cluster"):
        service_requests.argv_for(typed, {"@0": "/s/0"}, None)
    assert "--on=ray://10.0.0.1:6379" in service_requests.argv_for(typed, {"@0": "/s/0"}, "ray://10.0.0.1:6379")
    other = _typed("eval", submissions=[0], hill="demo", on="ray://127.0.0.1:6379")
    with pytest.raises(errors.UsageError, match="names a cluster this hills service does not use"):
        service_requests.argv_for(other, {"@0": "/s/0"}, "ray://10.0.0.1:6379")
    assert other.evaluators() == 1


def test_the_client_builds_typed_records_and_keeps_its_files(tmp_path, monkeypatch):
    from hills.service import client

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "ref").mkdir()
    (tmp_path / "r.json").write_text("{}")
    request = client.Request("eval", ["sub", "-H", "demo", "-o", "out.json", "--final", "--against", "ref",
                                      "--repeat", "2"])
    assert request.fields == {"submissions": [0], "hill": "demo", "final": True, "output": True, "against": 1,
                              "repeat": 2}
    assert request.files == [("dir", "sub"), ("dir", "ref")] and request.outputs == {"output": "out.json"}
    shown = client.Request("show", ["r.json", "--picture", "p.svg"])
    assert shown.fields == {"report": 0, "picture": True} and shown.files == [("file", "r.json")]
    assert shown.outputs == {"picture": "p.svg"}
    tuned = client.Request("tune", ["sub", "-H", "demo", "--budget", "2"])
    assert tuned.outputs == {"best-params": str(tmp_path / "sub.best-params.json")}
    assert set(client.ADMIN_VERBS) == set(service_requests.VERBS)
    assert client.CLIMBER_VERBS == {name for name, verb in service_requests.VERBS.items() if not verb.admin_only}


def test_the_service_config_refuses_unknown_and_malformed_keys(tmp_path):
    base = {"version": 1, "user": "hills", "socket": "/run/hills/hills.sock", "admins": ["a"], "climbers": ["c"]}
    for extra, words in (({"max_conections": 3}, "unknown key 'max_conections'"),
                         ({"user_connections": 0}, "'user_connections' must be an integer of at least 1"),
                         ({"min_free_bytes": "1G"}, "'min_free_bytes' must be an integer"),
                         ({"ray_address": "ray"}, "'ray_address' must be 'ray://HOST:PORT'")):
        (tmp_path / "service.json").write_text(json.dumps({**base, **extra}))
        with pytest.raises(errors.EnvironmentProblem, match=words):
            service.Config.load(str(tmp_path))
    (tmp_path / "service.json").write_text(json.dumps({**base, "user_evaluators": 2,
                                                       "ray_address": "ray://10.0.0.1:6379"}))
    loaded = service.Config.load(str(tmp_path))
    assert loaded.limits["user_evaluators"] == 2 and loaded.limits["max_connections"] == 64
    assert loaded.ray_address == "ray://10.0.0.1:6379"


def test_which_calls_go_to_the_service(monkeypatch, tmp_path):
    from hills.service import client

    assert client.remote_verb("hills", ["eval", "d", "-H", "x"]) == "eval"
    assert client.remote_verb("hills-eval", ["d", "-H", "x"]) == "eval"
    assert client.remote_verb("hills", ["eval", "--help"]) is None
    assert client.remote_verb("hills", ["new", "x"]) is None
    assert client.remote_verb("hills", ["verify", "--export", "d", "r"]) is None
    monkeypatch.setenv("HILLS_SERVICE", "off")
    assert client.service_socket() is None
    monkeypatch.delenv("HILLS_SERVICE")
    config = tmp_path / "service.json"
    monkeypatch.setenv("HILLS_SERVICE_CONFIG", str(config))
    config.write_text(json.dumps({"socket": str(tmp_path / "absent.sock")}))
    assert client.service_socket() is None  # configured, but no service listens: same-user mode
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(tmp_path / "s.sock"))
    config.write_text(json.dumps({"socket": str(tmp_path / "s.sock")}))
    assert client.service_socket() == str(tmp_path / "s.sock")
    listening.close()


def test_the_floor_is_checked_as_bytes_arrive_not_only_per_file(tmp_path, monkeypatch):
    # Another upload fills the disk while this one's file is coming: the
    # next data frame is refused, though the file was admitted.
    layout = service.Layout(str(tmp_path))
    os.makedirs(layout.slots)
    values = {"user": "hills", "socket": "/s", "admins": [], "climbers": ["agent"], "min_free_bytes": 100 << 20}
    caller = service.Caller(os.getuid(), "agent", "climber", service.Config(values, str(tmp_path / "c.json")))
    free = [1 << 30]

    class Fake:
        f_frsize = 1

        @property
        def f_bavail(self) -> int:
            return free[0]

    monkeypatch.setattr(service.os, "statvfs", lambda path: Fake())
    upload = service.ServiceUpload(layout, caller)
    upload.admit(50 << 20)
    upload.landed(1 << 20)
    free[0] = 90 << 20
    with pytest.raises(errors.EnvironmentProblem, match="less than 100.0 MiB free") as refused:
        upload.landed(1 << 20)
    assert refused.value.exit_code == 4 and "min_free_bytes" in refused.value.hint
    # The share of uploads in flight is the caller's: a ledger under the slots folder.
    assert (tmp_path / "slots" / str(os.getuid()) / f"upload-{os.getpid()}").read_text() == str(64 << 20)


def test_a_note_goes_through_the_service_as_one_option_and_is_checked_by_the_eval():
    typed = _typed("eval", submissions=[0], hill="demo", note="--final; rm -rf /")
    argv = service_requests.argv_for(typed, {"@0": "/s/r/0"}, None)
    assert argv == ["--hill=demo", "--note=--final; rm -rf /", "/s/r/0"]
    from hills.commands import eval as eval_command

    parsed = eval_command.DECLARED.parse(argv)
    assert parsed is not None and parsed["note"] == "--final; rm -rf /" and parsed["final"] is False
    with pytest.raises(errors.UsageError, match="expected a text of 1 to 4096 characters"):
        _typed("eval", submissions=[0], hill="demo", note=7)
