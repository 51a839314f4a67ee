"""Runs a hill's function-shape evaluator inside the hill's own environment.

This file is executed as a script by the hill environment's interpreter, so
it uses the standard library only and never imports the hills package.

    python shim.py bind REQUEST_JSON     print how eval() binds, as JSON
    python shim.py eval REQUEST_JSON     call eval() and write its result
                                         as JSON to the inherited fd named
                                         in the request (never a file),
                                         sealed with the key on stdin
"""

from __future__ import annotations

import json
import os
import sys
import types

# inspect and traceback are imported only where they are needed: together
# they cost an evaluator's start more than the rest of the shim.

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from importlib.util import module_from_spec, spec_from_file_location
    from typing import Any
else:
    try:
        # What importlib.util gives, from the import system's own modules,
        # loaded with every interpreter: importlib.util costs a few ms more.
        from _frozen_importlib import module_from_spec
        from _frozen_importlib_external import spec_from_file_location
    except ImportError:
        from importlib.util import module_from_spec, spec_from_file_location


def _load(hill_dir: str, entry: str) -> Callable[..., Any]:
    sys.path.insert(0, hill_dir)
    spec = spec_from_file_location("hill_evaluator", os.path.join(hill_dir, entry))
    if spec is None or spec.loader is None:
        raise ImportError(f"{entry} cannot be loaded as a Python module")
    module = module_from_spec(spec)
    sys.modules["hill_evaluator"] = module
    spec.loader.exec_module(module)
    function = getattr(module, "eval", None)
    if not callable(function):
        raise LookupError(f"{entry} defines no function named 'eval'")
    return function


def _binds_plainly(function: Callable[..., Any], params: dict[str, Any]) -> bool:
    """Whether a plain Python function takes (submission, final=..., **params),
    read from its code object; False for anything else (a wrapped function,
    a callable object) and for a call that would not bind, which `_bind`
    then decides and words."""
    if not isinstance(function, types.FunctionType) or "final" in params \
            or hasattr(function, "__wrapped__") or hasattr(function, "__signature__"):
        return False
    code = function.__code__
    positional = code.co_varnames[:code.co_argcount]
    keyword_only = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
    takes_any_keyword = bool(code.co_flags & 0x08)  # CO_VARKEYWORDS
    if not positional:
        return False
    given = set()
    for name in ("final", *params):
        if name in positional[max(1, code.co_posonlyargcount):] or name in keyword_only:
            given.add(name)
        elif name == positional[0] or not takes_any_keyword:
            return False
    required = positional[1:len(positional) - len(function.__defaults__ or ())]
    required += tuple(name for name in keyword_only if name not in (function.__kwdefaults__ or {}))
    return all(name in given for name in required)


def _bind(function: Callable[..., Any], params: dict[str, Any]) -> str:
    """Check eval(submission, *, final=False, **params) accepts these params."""
    import inspect

    signature = inspect.signature(function)
    names = list(signature.parameters)
    kinds = {p.kind for p in signature.parameters.values()}
    if not names or signature.parameters[names[0]].kind not in (
            inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
        raise TypeError("eval() must take the submission folder as its first positional argument")
    signature.bind("submission", final=False, **params)
    shown = ["submission"] + [n for n in names[1:] if signature.parameters[n].kind not in (
        inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)]
    if inspect.Parameter.VAR_KEYWORD in kinds:
        shown.append("**params")
    return "eval(" + ", ".join(shown) + ")"


def _jsonable(value: object) -> Any:
    item = getattr(value, "item", None)
    if callable(item):
        return item()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (set, tuple)):
        return list(value)
    raise TypeError(f"eval() returned a {type(value).__name__}, which is not JSON")


SEAL_KEY_SIZE = 32  # hills.run.runner.SEAL_KEY_SIZE
_PR_SET_DUMPABLE = 4


def _take_channel(result_fd: int) -> tuple[int, bytes]:
    """The result channel on a private close-on-exec fd, and the seal key
    read from stdin (then replaced by /dev/null), both before the evaluator
    is imported: nothing it starts inherits them, and a process that opens
    the pipe through /proc can write bytes but cannot seal them."""
    private_fd = os.dup(result_fd)  # non-inheritable
    os.close(result_fd)
    seal_key = b""
    while len(seal_key) < SEAL_KEY_SIZE:
        chunk = os.read(0, SEAL_KEY_SIZE - len(seal_key))
        if not chunk:
            break
        seal_key += chunk
    # After the key, up to the pipe's end: NUL-led NAME=VALUE variables kept
    # out of this process's environment at its start (runner.WITHHELD, the
    # secret seed), which /proc/PID/environ would show while it waits.
    tail = b""
    while len(seal_key) == SEAL_KEY_SIZE:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        tail += chunk
    for item in tail.split(b"\0"):
        name, _, value = item.decode("utf-8", "surrogateescape").partition("=")
        if name:
            os.environ[name] = value
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    _undumpable()
    return private_fd, seal_key


def _undumpable() -> None:
    """Closes /proc/<pid>/fd and /proc/<pid>/mem of this process to other
    processes of the same user (root keeps them: see docs/decisions.md
    D-079, "The result channel")."""
    try:
        _prctl(_PR_SET_DUMPABLE, 0)
    except (OSError, AttributeError, ImportError, TypeError):
        pass


def _prctl(option: int, value: int) -> int:
    """prctl(2), called through _ctypes, the C part of ctypes: the ctypes
    package around it costs an evaluator's start about 2 ms more. (A copy
    of hills.run.runner's: this file imports nothing of hills.)"""
    import _ctypes

    class _Int(_ctypes._SimpleCData):  # ctypes.c_int
        _type_ = "i"

    class _Function(_ctypes.CFuncPtr):  # what ctypes.CDLL(None).prctl is
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
        _restype_ = _Int

    libc = _ctypes.dlopen(None)  # type: ignore[arg-type]  # None: the program and its libraries, as ctypes.CDLL(None)
    return int(_Function(_ctypes.dlsym(libc, "prctl"))(option, value, 0, 0, 0))


def _sealed(text: str, seal_key: bytes) -> bytes:
    try:  # the builtin module: hashlib would load OpenSSL first, a few ms for nothing
        from _blake2 import blake2b
    except ImportError:
        from hashlib import blake2b

    payload = text.encode("utf-8")
    return blake2b(payload, key=seal_key, digest_size=32).hexdigest().encode() + b"\n" + payload


def main(argv: list[str]) -> int:
    mode, request = argv[1], json.loads(argv[2])
    hill_dir, entry, params = request["hill_dir"], request["entry"], request.get("params", {})
    if mode == "bind":
        try:
            function = _load(hill_dir, entry)
            shown = _bind(function, params)
        except BaseException as exc:
            import traceback

            print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}",
                              "traceback": traceback.format_exc(limit=-3)}))
            return 0
        print(json.dumps({"ok": True, "signature": shown}))
        return 0
    result_fd, seal_key = _take_channel(request["result_fd"])
    if len(seal_key) != SEAL_KEY_SIZE:
        # No key came (the eval was refused, or its standby ended, before
        # the started entry): nothing of the hill may run.
        return 3
    with os.fdopen(result_fd, "wb") as result:
        try:
            function = _load(hill_dir, entry)
            if not _binds_plainly(function, params):
                _bind(function, params)
            from pathlib import Path

            value = function(Path(request["submission"]), final=request.get("final", False), **params)
            text = json.dumps({"ok": True, "value": value}, default=_jsonable)
        except BaseException as exc:
            import traceback

            traceback.print_exc()
            text = json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
            result.write(_sealed(text, seal_key))
            return 1
        result.write(_sealed(text, seal_key))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
