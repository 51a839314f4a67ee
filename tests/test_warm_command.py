"""`hills warm status|stop` (docs/warm.md, "What the user sees"): what runs
in the background for this user, and a stop that stops the server it names
(or its HILLS_HOME's), never every server of the user unless asked with
--all. Also the warm client's own costs: it imports nothing but `_socket`,
and its key covers every folder of the package."""

import json
import os
import subprocess
import sys
import time

import pytest

from testing.util import REPO_ROOT, run_bin
from testing.warm_fixtures import log_of

IDLE_S = "300"


class Servers:
    """Warm servers started by hand in the test's socket folder, each for a
    HILLS_HOME of its own: no eval is needed for status and stop."""

    def __init__(self, folder, root):
        self.folder, self.root = folder, root
        self.processes = {}
        folder.mkdir(mode=0o700, exist_ok=True)

    def start(self, sock_id, home_name):
        home = self.root / home_name
        home.mkdir(exist_ok=True)
        env = dict(os.environ, HILLS_HOME=str(home), HILLS_WARM="off", HILLS_WARM_IDLE_S=IDLE_S)
        process = subprocess.Popen([sys.executable, "-m", "hills.warm", "serve", str(self.folder / f"{sock_id}.sock")],
                                   env=env, cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
        self.processes[sock_id] = process
        deadline = time.monotonic() + 30
        while not (self.folder / f"{sock_id}.sock.json").exists() and time.monotonic() < deadline:
            assert process.poll() is None, log_of(self.folder)
            time.sleep(0.05)
        assert (self.folder / f"{sock_id}.sock.json").exists(), log_of(self.folder)
        return home

    def running(self, sock_id):
        return self.processes[sock_id].poll() is None

    def ended(self, sock_id, timeout=30):
        try:
            self.processes[sock_id].wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def close(self):
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=30)


@pytest.fixture
def servers(warm, tmp_path):
    made = Servers(warm, tmp_path)
    yield made
    made.close()


A = "aaaa1111" + "0" * 12
B = "bbbb2222" + "0" * 12


def hills_warm(*args, home):
    return run_bin("hills", "warm", *args, env=dict(os.environ, HILLS_HOME=str(home)), timeout=60)


def test_status_shows_each_server_its_home_pid_age_idle_time_and_no_spare(servers):
    home_a = servers.start(A, "home-a")
    home_b = servers.start(B, "home-b")
    shown = hills_warm("status", home=home_a)
    assert shown.code == 0, shown.output
    for sock_id, home in ((A, home_a), (B, home_b)):
        pid = servers.processes[sock_id].pid
        assert f"warm server {sock_id[:12]} (pid {pid}) for HILLS_HOME '{home}'" in shown.out
    assert shown.out.count("  idle left    ") == 2 and shown.out.count(" of 5m 00s") == 2, shown.out
    assert shown.out.count("  spare        none waiting") == 2 and shown.out.count("  age          ") == 2
    listed = hills_warm("status", "--json", home=home_a)
    assert listed.code == 0, listed.output
    rows = {row["id"]: row for row in json.loads(listed.out)}
    assert set(rows) == {A, B}
    assert rows[A]["pid"] == servers.processes[A].pid and rows[A]["hills_home"] == str(home_a)
    assert rows[A]["idle_s"] == 300 and 240 < rows[A]["idle_left_s"] <= 300 and 0 <= rows[A]["age_s"] < 60
    assert rows[A]["spare"] is None and rows[A]["socket"] == str(servers.folder / f"{A}.sock")


def test_status_with_no_server_says_so(warm, tmp_path):
    shown = hills_warm("status", home=tmp_path)
    assert (shown.code, shown.out, shown.err) == (0, "", "no warm server runs for this user\n")
    listed = hills_warm("status", "--json", home=tmp_path)
    assert (listed.code, json.loads(listed.out)) == (0, [])


def test_stop_stops_its_homes_server_and_leaves_another_homes_running(servers):
    home_a = servers.start(A, "home-a")
    home_b = servers.start(B, "home-b")
    stopped = hills_warm("stop", home=home_a)
    assert stopped.code == 0, stopped.output
    assert f"stopped warm server {A[:12]} (pid {servers.processes[A].pid}) for HILLS_HOME '{home_a}'" in stopped.err
    assert servers.ended(A) and " stopped: stopped" in log_of(servers.folder)
    assert servers.running(B) and (servers.folder / f"{B}.sock").exists()
    shown = hills_warm("status", "--json", home=home_a)
    assert [row["id"] for row in json.loads(shown.out)] == [B]
    # Nothing left for that home: said, and the other home's server still runs.
    again = hills_warm("stop", home=home_a)
    assert (again.code, again.err) == (0, f"no warm server runs for HILLS_HOME '{home_a}'\n")
    assert servers.running(B)
    # Named (by pid), from any home, it stops.
    named = hills_warm("stop", str(servers.processes[B].pid), home=home_a)
    assert named.code == 0 and f"stopped warm server {B[:12]}" in named.err, named.output
    assert servers.ended(B)
    del home_b


def test_stop_by_id_stops_that_server_only(servers):
    home_a = servers.start(A, "home-a")
    servers.start(B, "home-b")
    stopped = hills_warm("stop", A[:12], home=home_a)
    assert stopped.code == 0, stopped.output
    assert servers.ended(A) and servers.running(B)


def test_the_module_stop_stops_its_homes_server_only_unless_asked_for_all(servers):
    home_a = servers.start(A, "home-a")
    servers.start(B, "home-b")
    env = dict(os.environ, HILLS_HOME=str(home_a))
    one = subprocess.run([sys.executable, "-m", "hills.warm", "stop"], env=env, capture_output=True, text=True)
    assert one.stdout == "stopped 1 warm server\n", one.stdout + one.stderr
    assert servers.ended(A) and servers.running(B)
    servers.start(A, "home-a")
    # The control: the old behaviour, every server of the user, now only with --all.
    both = subprocess.run([sys.executable, "-m", "hills.warm", "stop", "--all"], env=env, capture_output=True,
                          text=True)
    assert both.stdout == "stopped 2 warm servers\n", both.stdout + both.stderr
    assert servers.ended(A) and servers.ended(B)


def test_stop_all_stops_every_server_of_the_user(servers):
    home_a = servers.start(A, "home-a")
    servers.start(B, "home-b")
    stopped = hills_warm("stop", "--all", home=home_a)
    assert stopped.code == 0, stopped.output
    assert stopped.err.count("stopped warm server ") == 2
    assert servers.ended(A) and servers.ended(B)


def test_stop_refuses_what_names_no_server_and_stops_nothing(servers):
    home_a = servers.start(A, "home-a")
    servers.start("aaaa9999" + "0" * 12, "home-c")
    cases = {
        ("nosuch",): ("error: no warm server 'nosuch' is running for this user",
                      "hint: see 'hills warm status' for the servers' ids and pids"),
        ("aaa",): ("error: no warm server 'aaa' is running for this user", None),  # under 4 characters: no prefix
        ("99999999",): ("error: no warm server '99999999' is running for this user", None),
        ("aaaa",): ("error: 'aaaa' names 2 warm servers",
                    "hint: give more of the id, as 'hills warm status' shows it"),
        ("--all", A[:12]): ("error: --all stops every warm server of this user: it takes no SERVER", None),
    }
    for args, (message, hint) in cases.items():
        refused = hills_warm("stop", *args, home=home_a)
        assert refused.code == 2, (args, refused.output)
        assert refused.err.splitlines()[0] == message, (args, refused.err)
        if hint is not None:
            assert hint in refused.err, (args, refused.err)
        assert refused.out == ""
    # A good name after a bad one: nothing is stopped, as the whole call is refused.
    mixed = hills_warm("stop", A[:12], "nosuch", home=home_a)
    assert mixed.code == 2 and "no warm server 'nosuch'" in mixed.err
    assert all(servers.running(sock_id) for sock_id in servers.processes)
    module = subprocess.run([sys.executable, "-m", "hills.warm", "stop", "nosuch"], capture_output=True, text=True,
                            env=dict(os.environ, HILLS_HOME=str(home_a)))
    assert module.returncode == 2 and "error: no warm server 'nosuch' is running" in module.stderr
    assert all(servers.running(sock_id) for sock_id in servers.processes)


def test_the_client_imports_nothing_the_interpreter_lacks_but_socket(warm, tmp_path):
    """The start of every `hills eval`: importing the client, computing its
    key and finding no server loads hills' own client modules, the one
    SHA-256 module of the key where it is not built in, and `_socket` where
    there is a socket to try: nothing else the interpreter did not hold."""
    code = ("import json, sys\n"
            f"sys.path.insert(0, {str(REPO_ROOT)!r})\n"
            "before = set(sys.modules)\n"
            "from hills.warm import client\n"
            "assert client.enabled() and client.key()\n"
            "answer = client.call('hills', ['eval', 'x', '-H', 'y'])\n"
            "assert answer.code is None and answer.start, vars(answer)\n"
            "print(json.dumps(sorted(set(sys.modules) - before - set(sys.builtin_module_names))))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout))
    hashing = loaded & {"_sha2", "_sha256"}  # _sha2 from Python 3.12 on
    assert len(hashing) <= 1, loaded
    client = {"hills", "hills.warm", "hills.warm.client", "hills.warm.protocol"}
    # `_socket` only where a socket file is there to connect to.
    assert client <= loaded - hashing <= client | {"_socket"}, sorted(loaded)


def test_the_key_covers_every_sub_package_and_nothing_else(tmp_path):
    from hills.warm import client

    package = tmp_path / "hills"
    for folder in ("deep/deeper", "__pycache__", "examples/template"):
        (package / folder).mkdir(parents=True)
    for name in ("__init__.py", "deep/__init__.py", "deep/deeper/__init__.py", "deep/deeper/mod.py",
                 "__pycache__/cached.py", "examples/template/eval.py", "notes.txt"):
        (package / name).write_text("")
    listed = client.sources(str(package))
    assert [line.split(":")[0] for line in listed] == [
        "__init__.py", os.path.join("deep", "__init__.py"), os.path.join("deep", "deeper", "__init__.py"),
        os.path.join("deep", "deeper", "mod.py")]
    (package / "deep" / "deeper" / "mod.py").write_text("x = 22\n")  # another size: another key
    assert client.sources(str(package)) != listed
    # The installed package: its sub-packages' modules are in the key.
    names = [line.split(":")[0] for line in client.sources(client.PACKAGE)]
    assert "entry.py" in names and os.path.join("warm", "server.py") in names
    assert os.path.join("commands", "eval.py") in names


def test_the_module_stop_stops_eight_servers_on_its_first_call(servers):
    """Eight servers at once: one call stops them all, and has waited for
    them, so none is left for a second call to find."""
    names = [f"{index:04d}cccc" + "0" * 12 for index in range(8)]
    home = None
    for name in names:
        home = servers.start(name, f"home-{name[:4]}")
    assert all(servers.running(name) for name in names)
    stopped = subprocess.run([sys.executable, "-m", "hills.warm", "stop", "--all"],
                             env=dict(os.environ, HILLS_HOME=str(home)), capture_output=True, text=True)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert stopped.stdout == "stopped 8 warm servers\n"
    assert not list(servers.folder.glob("*.sock.json")), log_of(servers.folder)
    assert all(servers.ended(name, timeout=5) for name in names)
    again = subprocess.run([sys.executable, "-m", "hills.warm", "stop", "--all"],
                           env=dict(os.environ, HILLS_HOME=str(home)), capture_output=True, text=True)
    assert again.stdout == "stopped 0 warm servers\n", again.stdout + again.stderr
