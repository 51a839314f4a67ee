"""The warm server's wire format (docs/warm.md), one request per connection:
a 4-byte big-endian length and a payload of NUL-separated fields (the
fields never hold a NUL), the caller's standard streams passed alongside as
SCM_RIGHTS. The worker answers in lines, each a reply word and a value.

Imported by the client, so it imports nothing."""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

PROTOCOL = "hills-warm 1"
MAX_REQUEST = 1 << 20
REPORTED = 60 * 1024  # the largest request a worker sends back for a spare: less than a pipe holds

# The worker's replies, each on its own line: `RUNS PID` (the worker runs the
# eval), `EXIT CODE` (its exit code), `DECLINE REASON` (the caller runs the
# eval itself), `RETRY` (a spare made for another request: send it again,
# docs/standby.md).
RUNS = "P"
EXIT = "X"
DECLINE = "D"
RETRY = "R"

# What a spare tells its server on its pipe (docs/standby.md): it waits with
# a standby (the server leaves the socket to it), it took the connection it
# was made for (it is a worker now), or it gave way to another request.
SPARE_WAITS = b"W"
SPARE_TOOK = b"T"
SPARE_GAVE_WAY = b"G"

# What a worker must share with its caller, or decline.
NAMESPACES = ("mnt", "pid", "net", "user", "ipc", "uts", "cgroup")
LIMITS = ("RLIMIT_AS", "RLIMIT_CORE", "RLIMIT_CPU", "RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_MEMLOCK",
          "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_RSS", "RLIMIT_STACK")

# The parts of a request, in their order on the wire: the fixed head, the
# arguments and the environment (each a count, then that many fields), and
# the fixed tail. `Request` has one attribute per name.
HEAD = ("protocol", "program", "cwd", "umask", "passed")
COUNTED = ("args", "env")
TAIL = ("limits", "groups", "priority", "cgroup", "namespaces")
# The parts a spare names when a request differs from its own (never a
# value: an environment variable may hold a secret); "env" is said apart.
COMPARED = ("program", "args", "cwd", "umask", "passed", "limits", "groups", "priority", "cgroup", "namespaces")


class Request:
    """A request: what the caller is and what it asks, each part by name."""

    def __init__(self, *, program: str, cwd: str, umask: int, passed: list[int], args: list[str],
                 env: "Mapping[str, str]", limits: list[list[str]], groups: list[int], priority: int, cgroup: str,
                 namespaces: str, protocol: str = PROTOCOL) -> None:
        self.protocol, self.program, self.cwd, self.umask, self.passed = protocol, program, cwd, umask, passed
        self.args, self.env = args, env
        self.limits, self.groups, self.priority, self.cgroup, self.namespaces = (
            limits, groups, priority, cgroup, namespaces)

    def encode(self) -> bytes:
        """The payload, without its length."""
        env = [f"{name}={value}" for name, value in self.env.items()]
        fields = [self.protocol, self.program, self.cwd, str(self.umask), ",".join(str(fd) for fd in self.passed),
                  str(len(self.args)), *self.args, str(len(env)), *env,
                  ",".join(":".join(entry) for entry in self.limits), ",".join(str(group) for group in self.groups),
                  str(self.priority), self.cgroup, self.namespaces]
        return "\0".join(fields).encode("utf-8", "surrogateescape")

    @classmethod
    def decode(cls, payload: bytes) -> "Request":
        """The request a payload holds; ValueError when it holds none of this
        protocol (a short one, a number that is none, another version)."""
        it = iter(payload.decode("utf-8", "surrogateescape").split("\0"))
        try:
            protocol = next(it)
            if protocol != PROTOCOL:
                raise ValueError(f"protocol {protocol!r}, expected {PROTOCOL!r}")
            program, cwd, umask, passed = next(it), next(it), next(it), next(it)
            args = [next(it) for _ in range(int(next(it)))]
            env = dict(item.partition("=")[::2] for item in (next(it) for _ in range(int(next(it)))))
            limits = [entry.split(":") for entry in next(it).split(",") if entry]
            groups = [int(group) for group in next(it).split(",") if group]
            priority, cgroup, namespaces = int(next(it)), next(it), next(it)
        except StopIteration:
            raise ValueError("the request ends before its last part") from None
        return cls(program=program, cwd=cwd, umask=int(umask), passed=[int(fd) for fd in passed.split(",") if fd],
                   args=args, env=env, limits=limits, groups=groups, priority=priority, cgroup=cgroup,
                   namespaces=namespaces)


def reply(word: str, value: object = "") -> bytes:
    """One reply line."""
    return f"{word} {value}\n".encode("utf-8", "replace") if value != "" else f"{word}\n".encode()
