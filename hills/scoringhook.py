"""The scoring phase's guard: an audit hook (PEP 578) in every trusted
interpreter of the scoring phase (the shim of a function evaluator,
`$HILLS_SCORING_PYTHON`, the trusted branch of `$HILLCLIMB_PYTHON`) that
stops any attempt to execute a file of the submission there, and records
it in the run folder so that the eval is buggy even when the evaluator
catches the exception (docs/confinement.md, "The scoring phase runs no
submitted code").

hills copies this file into the sdk folder as `scoring/sitecustomize.py`
and puts that folder first on the evaluator's PYTHONPATH, with the run's
record and the submission's folders in HILLS_SCORING_GUARD. hills.sdk
removes both from the environment of the submitted code it starts, so
confined code is never held to it. Standard library only, and cheap: an
event not watched returns at the first test, and only compile events of
source text with no file of its own compare contents (by size first).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping
    from typing import Any

ENV = "HILLS_SCORING_GUARD"
_WATCHED = frozenset(("subprocess.Popen", "os.exec", "os.posix_spawn", "os.system", "compile", "exec",
                      "cpython.run_file", "ctypes.dlopen"))
# Programs whose first operand is a file they run as code, by family: how
# each is told to run a program text (not a file) and which options take a
# value. Anything else is judged by its program alone.
_PYTHON, _SHELL, _NODE, _PERL, _OTHER = "python", "shell", "node", "perl", "other"
_INLINE = {_PYTHON: ("-c",), _SHELL: ("-c",), _NODE: ("-e", "--eval", "-p", "--print"), _PERL: ("-e", "-E"),
           _OTHER: ("-e", "-r", "--eval")}
_VALUED = {_PYTHON: ("-X", "-W", "--check-hash-based-pycs"),
           _SHELL: ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"),
           _NODE: ("--input-type", "--loader", "--import", "--conditions", "-C"), _PERL: ("-I", "-M", "-m", "-x"),
           _OTHER: ("-I", "--project", "-L")}
# Code files given by option: node's --require, ruby's -r, php's -f, awk's -f.
_FILE_OPTIONS = ("-r", "--require", "-f", "--file", "--import")
_SHELLS = ("sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox", "fish", "csh", "tcsh")
_OTHERS = ("ruby", "php", "Rscript", "R", "julia", "lua", "luajit", "tclsh", "wish", "awk", "gawk", "mawk",
           "nawk", "java", "deno", "bun", "pwsh", "osascript", "guile", "racket", "ocaml", "ghc", "runghc", "swift")
# Programs that run the rest of their arguments as a command.
_LAUNCHERS = ("env", "timeout", "nice", "nohup", "stdbuf", "setsid", "time", "exec", "command", "xargs",
              "taskset", "ionice", "chrt", "unbuffer", "flock", "sudo", "doas", "builtin", "uv", "uvx", "pipx",
              "conda", "poetry", "pdm", "hatch", "npx", "strace", "ltrace", "valgrind", "gdb")
_SEPARATORS = frozenset((";", "&&", "||", "|", "&", "(", ")", "\n", "|&", ";;", "{", "}", "!"))


def family(program: str) -> str | None:
    name = os.path.basename(program)
    if name.startswith(("python", "pypy")) or name in ("hillclimb-python",):
        return _PYTHON
    if name in _SHELLS:
        return _SHELL
    if name in ("node", "nodejs"):
        return _NODE
    if name == "perl" or name.startswith("perl5"):
        return _PERL
    if name in _OTHERS or name.startswith(("lua", "ruby", "php", "julia")):
        return _OTHER
    return None


def _peel(argv: list[str]) -> list[str]:
    """`argv` without the launchers in front of the command they start
    (`env A=1 timeout 5 nice python run.py` -> `python run.py`)."""
    for _ in range(8):
        if not argv or os.path.basename(argv[0]) not in _LAUNCHERS:
            return argv
        name, rest = os.path.basename(argv[0]), argv[1:]
        if name in ("uv", "pipx", "conda", "poetry", "pdm", "hatch") and rest[:1] == ["run"]:
            rest = rest[1:]
        elif name == "uv" and rest[:2] == ["tool", "run"]:
            rest = rest[2:]
        while rest and (rest[0].startswith("-") or (name == "env" and "=" in rest[0])):
            option = rest.pop(0)
            if name == "env" and option in ("-S", "--split-string") and rest:
                rest = split_words(rest.pop(0)) + rest
            elif option in ("-u", "-C", "-s", "-k", "-n", "-i", "-o", "-e", "-c", "-p", "--with", "--python", "-w"
                            ) and rest and name not in ("nohup", "setsid"):
                rest.pop(0)
        if name == "timeout" and rest:
            rest = rest[1:]  # the duration
        elif name in ("taskset", "chrt") and rest:
            rest = rest[1:]  # the mask, the priority
        argv = rest
    return argv


def split_words(text: str) -> list[str]:
    import shlex

    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        return list(lexer)
    except ValueError:  # an unbalanced quote: the words as they stand
        return text.split()


def shell_commands(text: str) -> Iterator[tuple[list[str], list[str]]]:
    """Each simple command of a shell text: (its words, the files its
    standard input is redirected from)."""
    words: list[str] = []
    inputs: list[str] = []
    tokens = split_words(text.replace("$(", "( ").replace("`", " ; "))
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token in _SEPARATORS or set(token) <= set(";&|()"):
            if words:
                yield words, inputs
            words, inputs = [], []
        elif token in ("<", "<>") and index + 1 < len(tokens):
            inputs.append(tokens[index + 1])
            index += 1
        elif token.startswith((">", "<")) or token in (">>", ">|", "2>", "&>"):
            index += 1
        elif not words and "=" in token and not token.startswith("="):
            pass  # an assignment before the command
        else:
            words.append(token)
        index += 1
    if words:
        yield words, inputs


def code_of(argv: list[str], inputs: Iterable[str] = (), depth: int = 0) -> Iterator[tuple[str, str]]:
    """The operands of a command that would run as code: (what, how), where
    `what` is a path or, prefixed '\\0', a program text."""
    argv = _peel(list(argv))
    if not argv or depth > 4:
        return
    program = argv[0]
    yield program, "as the program"
    if program in ("source", "."):
        for operand in argv[1:2]:
            yield operand, f"by '{program}'"
        return
    kind = family(program)
    if kind is None:
        return
    shown = os.path.basename(program)
    rest = argv[1:]
    index = 0
    while index < len(rest):
        word = rest[index]
        if word in _INLINE[kind] or (kind == _PYTHON and word.startswith("-c") and len(word) > 2):
            text = rest[index + 1] if word in _INLINE[kind] and index + 1 < len(rest) else word[2:]
            yield "\0" + text, f"as the program text of '{shown} {word}'"
            if kind == _SHELL:
                yield "\2" + text, "as a command of '" + shown + " -c'"
            return
        if kind == _PYTHON and word == "-m" and index + 1 < len(rest):
            module = rest[index + 1].replace(".", "/")
            for candidate in (module + ".py", os.path.join(module, "__main__.py"), module + "/__init__.py"):
                yield "\1" + candidate, f"as the module of '{shown} -m {rest[index + 1]}'"
            return
        if word in _FILE_OPTIONS and kind in (_NODE, _OTHER) and index + 1 < len(rest):
            yield rest[index + 1], f"by '{shown} {word}'"
            index += 2
            continue
        if word in _VALUED[kind]:
            index += 2
            continue
        if word == "--":
            index += 1
            if index < len(rest):
                yield rest[index], f"as the script of '{shown}'"
            return
        if word == "-" or not word.startswith(("-", "+")) or word == "+":
            if word != "-":
                yield rest[index], f"as the script of '{shown}'"
            else:
                for redirected in inputs:
                    yield redirected, f"as the standard input of '{shown}'"
            return
        index += 1
    for redirected in inputs:  # `python3 < run.py`
        yield redirected, f"as the standard input of '{shown}'"


class Guard:
    """The hook: the submission's folders (real paths), the record to
    write a stop into, and the sizes of the submission's files (made on
    the first compare of contents)."""

    def __init__(self, record: str, roots: list[str], wrappers: str = "") -> None:
        self.record = record
        self.roots = tuple(os.path.realpath(root) for root in roots if root)
        # The forms a path of the submission may take before links are
        # resolved: a cheap first test for the events every import raises.
        self.forms = tuple({form + "/" for root in roots if root for form in (os.path.abspath(root),
                                                                              os.path.realpath(root))})
        self.wrappers = os.path.realpath(wrappers) if wrappers else ""
        self.sizes: list[tuple[int, str]] | None = None
        self.texts: dict[str, int] = {}
        self.stamp: list[int] = []
        self.busy = False

    def under(self, path: str) -> bool:
        for root in self.roots:
            if path == root or path.startswith(root + "/"):
                return True
        return False

    def code_file(self, name: str) -> str | None:
        """The real path of a file of code (an import's, a compile's)
        when it lies in the submission."""
        if not name.startswith("/"):
            name = os.path.join(os.getcwd(), name)
        if not name.startswith(self.forms):
            return None
        path = os.path.realpath(name)
        return path if self.under(path) and os.path.exists(path) else None

    def decides_itself(self, program: str, cwd: str, search: str) -> bool:
        """Whether `program` is one of hills' interpreter wrappers (the
        confined python, $HILLCLIMB_PYTHON, the shells of a command
        verifier's PATH), which judge their own operands."""
        if not self.wrappers or family(program) != _PYTHON:
            return False  # a shell wrapper judges its script, not a -c text: that is judged here
        if "/" not in program:
            for folder in search.split(os.pathsep):
                candidate = os.path.join(folder or ".", program)
                if os.path.isfile(candidate):
                    program = candidate
                    break
            else:
                return False
        return os.path.dirname(os.path.realpath(os.path.join(cwd, program))) == self.wrappers

    def submission_file(self, raw: Any, cwd: str | None = None, search: str | None = None) -> str | None:
        """The real path of `raw` when it names a file of the submission:
        relative to `cwd`, or found on `search` (a PATH) when it is a bare
        program name."""
        if raw is None or isinstance(raw, int):
            return None
        name = os.fsdecode(raw)
        if not name:
            return None
        if search is not None and "/" not in name:
            for folder in search.split(os.pathsep):
                found = self.submission_file(os.path.join(folder or ".", name), cwd)
                if found or os.path.exists(os.path.join(folder or ".", name)):
                    return found
            return None
        path = os.path.realpath(os.path.join(cwd or os.getcwd(), name))
        # A folder too: `python run.py` runs run.py/__main__.py when run.py is one.
        return path if self.under(path) and os.path.exists(path) else None

    def stop(self, path: str, how: str) -> None:
        rel = path
        for root in self.roots:
            if path.startswith(root + "/"):
                rel = path[len(root) + 1:]
        message = (f"the scoring phase tried to run the submission's file '{rel}' {how}; "
                   "submitted code runs only confined (hills.sdk.run_submission, $HILLS_PYTHON, or the solution phase)")
        import json

        line = (json.dumps({"event": "stopped", "path": rel, "how": how, "reason": message}, sort_keys=True) + "\n")
        try:
            fd = os.open(self.record, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, line.encode("utf-8", "replace"))
            finally:
                os.close(fd)
        except OSError:
            pass
        raise PermissionError("hills: " + message)

    def started(self, argv: Any, cwd: Any, env: Any, how: str) -> None:
        if isinstance(argv, (str, bytes)):
            argv = [argv]
        words = [os.fsdecode(word) for word in argv or () if isinstance(word, (str, bytes, os.PathLike))]
        folder = os.fsdecode(cwd) if isinstance(cwd, (str, bytes, os.PathLike)) else os.getcwd()
        search = (env or {}).get("PATH") if isinstance(env, dict) else None
        search = search if isinstance(search, str) else os.environ.get("PATH", os.defpath)
        self.commands([(words, [])], folder, search, how)

    def commands(self, commands: Iterable[tuple[list[str], list[str]]], cwd: str, search: str, how: str) -> None:
        for words, inputs in commands:
            if words[0] in ("cd", "pushd") and len(words) > 1:  # `cd sub && python3 run.py`
                cwd = os.path.join(cwd, words[1])
                continue
            peeled = _peel(list(words))
            if peeled and self.decides_itself(peeled[0], cwd, search):
                continue
            for what, where in code_of(words, inputs):
                if what.startswith("\0"):
                    found = self.same_content(what[1:].encode("utf-8", "surrogateescape"))
                elif what.startswith("\1"):
                    found = self.submission_file(what[1:], cwd)
                elif what.startswith("\2"):  # a shell's -c text: each of its commands, in order
                    self.commands(shell_commands(what[1:]), cwd, search, how)
                    continue
                else:
                    found = self.submission_file(what, cwd, search if where == "as the program" else None)
                if found:
                    self.stop(found, f"{where} ({how}: {' '.join(words)[:200]})")

    def same_content(self, source: bytes) -> str | None:
        """The submission's file whose content `source` is, as read in
        binary mode (the same size) or in text mode (a file with carriage
        returns, up to twice the size, read once and its text size kept):
        a compile of a short text reads only short files."""
        import bisect

        stamp = []
        for root in self.roots:
            try:
                stamp.append(os.stat(root).st_mtime_ns)
            except OSError:
                stamp.append(0)
        if self.sizes is None or stamp != self.stamp:  # made again once a folder changed (the intake fills it)
            self.sizes, self.stamp, self.texts = self.index(), stamp, {}
        files = self.sizes
        size = len(source)
        low = bisect.bisect_left(files, (size, ""))
        high = bisect.bisect_right(files, (2 * size + 1, ""))
        for file_size, path in files[low:high]:
            if file_size != size:
                known = self.texts.get(path)
                if known is None:
                    known = self.texts[path] = self.text_size(path)
                if known != size:
                    continue
            try:
                with open(path, "rb") as handle:
                    data = handle.read(2 * size + 2)
            except OSError:
                continue
            if data == source or data.replace(b"\r\n", b"\n").replace(b"\r", b"\n") == source:
                return path
        return None

    @staticmethod
    def text_size(path: str) -> int:
        """The size of a file as text mode reads it (-1 when it cannot be read)."""
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            return -1
        return len(data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")) if b"\r" in data else len(data)

    def index(self) -> list[tuple[int, str]]:
        """(size, path) of every regular file of the submission, sorted."""
        files: list[tuple[int, str]] = []
        for root in self.roots:
            for current, dirs, names in os.walk(root):
                dirs[:] = [name for name in dirs if name != "__pycache__"]
                for name in names:
                    path = os.path.join(current, name)
                    try:
                        info = os.lstat(path)
                    except OSError:
                        continue
                    if info.st_mode & 0o170000 == 0o100000:
                        files.append((info.st_size, path))
        files.sort()
        return files

    def compiled(self, source: Any, filename: Any) -> None:
        name = os.fsdecode(filename) if isinstance(filename, (str, bytes)) else ""
        if name and not name.startswith("<"):
            path = self.code_file(name)
            if path:
                self.stop(path, "compiled as code (compile, exec or runpy)")
            if os.path.isfile(name):
                return  # source read from a file of its own outside the submission: an import, the hill's code
        if isinstance(source, str):
            source = source.encode("utf-8", "surrogateescape")
        elif isinstance(source, (bytearray, memoryview)):
            source = bytes(source)
        if isinstance(source, bytes):
            found = self.same_content(source)
            if found:
                self.stop(found, "as program text read from it (exec or compile of its content)")

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if event not in _WATCHED or self.busy:
            return
        self.busy = True
        try:
            if event == "subprocess.Popen":
                executable, argv, cwd, env = args
                words = list(argv) if isinstance(argv, (list, tuple)) else [argv]
                if executable is not None and words and os.fsdecode(executable) != os.fsdecode(words[0]):
                    words[0] = executable
                self.started(words, cwd, env, "subprocess")
            elif event in ("os.exec", "os.posix_spawn"):
                self.started(args[1] if args[1] else [args[0]], None, args[2] if len(args) > 2 else None, event)
                self.started([args[0]], None, None, event)
            elif event == "os.system":
                self.commands(shell_commands(os.fsdecode(args[0])), os.getcwd(),
                              os.environ.get("PATH", os.defpath), "os.system")
            elif event == "compile":
                self.compiled(args[0], args[1])
            elif event == "exec":
                code = args[0]
                filename = getattr(code, "co_filename", None)
                if isinstance(filename, str) and filename and not filename.startswith("<"):
                    path = self.code_file(filename)
                    if path:
                        self.stop(path, "executed as code (import, exec or runpy)")
            elif event == "ctypes.dlopen":
                found = self.submission_file(args[0]) if isinstance(args[0], (str, bytes)) and \
                    ("/" in os.fsdecode(args[0])) else None
                if found:
                    self.stop(found, "loaded as a library (ctypes)")
            elif event == "cpython.run_file":
                found = self.submission_file(args[0])
                if found:
                    self.stop(found, "as the script of a trusted interpreter")
        finally:
            self.busy = False


def read_stops(path: str) -> list[str]:
    """The reasons of the stops recorded in the run's record `path` (the
    record hills.sdk writes its events into), first first."""
    import json

    reasons: list[str] = []
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return reasons
    with open(fd, "rb") as handle:
        raw = handle.read(4 * 1024 * 1024)
    for line in raw.splitlines():
        if b'"stopped"' not in line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == "stopped":
            reasons.append(str(event.get("reason") or "the scoring phase tried to run a file of the submission")[:500])
    return reasons


class _ImportGuard:
    """First on sys.meta_path: a module found in the submission (a source
    file, bytecode without source, an extension) is not imported."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is None:
                continue
            places = [spec.origin] if isinstance(spec.origin, str) and spec.has_location else []
            places += list(spec.submodule_search_locations or [])
            for place in places:
                real = self.guard.code_file(place)
                if real:
                    self.guard.stop(real, f"imported as module '{name}'")
            return spec
        return None


def parse(text: str) -> tuple[str, list[str], str]:
    """HILLS_SCORING_GUARD: three lines, the record's path, the
    submission's folders joined with os.pathsep (as PATH is), and the
    folder of hills' interpreter wrappers. Not JSON: json would cost every
    trusted start its import."""
    record, roots, wrappers = (text.split("\n") + ["", ""])[:3]
    return record, [root for root in roots.split(os.pathsep) if root], wrappers


def value(record: str, roots: Iterable[str], wrappers: str) -> str:
    """The HILLS_SCORING_GUARD value `parse` reads."""
    return "\n".join([record, os.pathsep.join(roots), wrappers])


def install(environ: Mapping[str, str] = os.environ) -> Guard | None:
    """Install the guard when the eval asked for it; never fail the start."""
    text = environ.get(ENV)
    if not text or getattr(sys, "_hills_scoring_guard", None) is not None:
        return getattr(sys, "_hills_scoring_guard", None)
    record, roots, wrappers = parse(text)
    if not record or not roots:
        return None
    guard = Guard(record, roots, wrappers)
    sys.addaudithook(guard)
    sys.meta_path.insert(0, _ImportGuard(guard))
    sys._hills_scoring_guard = guard  # type: ignore[attr-defined]  # one guard however often this runs
    return guard


def chain() -> None:
    """Run the sitecustomize this file shadows, as it would have run
    without the guard (audithook.chain does the same for the audit)."""
    try:  # the import system's own, loaded with every interpreter: importlib.machinery costs 0.4 ms more
        from _frozen_importlib_external import PathFinder
    except ImportError:
        from importlib.machinery import PathFinder

    here = os.path.dirname(os.path.abspath(__file__))
    path = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    spec = PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = type(sys)("sitecustomize")
    module.__file__ = spec.origin
    module.__spec__ = spec
    spec.loader.exec_module(module)


if __name__ == "sitecustomize":
    install()
    try:
        chain()
    except Exception:  # noqa: BLE001 - as site.py does for a failing sitecustomize
        import traceback

        traceback.print_exc()
