"""Who may sign: the machine's own Ed25519 key (`Keys`), the old HMAC
secret of a machine from before it, and the keys `hills trust` added to
the allowed-signers file in machine state."""

from __future__ import annotations

import os
import re

from ..base import ed25519, state
from ..base.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from collections.abc import Callable
    from typing import Any

NAMESPACE = "hills-report"
# The role of a key trusted as an evaluation service's: listed among its
# namespaces, where OpenSSH keeps it as one more pattern (a signature is
# still made and checked in `hills-report`), so the file stays OpenSSH's.
SERVICE_NAMESPACE = "hills-service"
# A principal of allowed_signers is a list of patterns; a name here is one
# plain principal, so it can hold none of the characters patterns use.
_NAME = r"[A-Za-z0-9][A-Za-z0-9._@+-]*\Z"  # compiled on first use: the eval imports this module
class _Backend:
    """`cryptography`'s Ed25519, once loaded: `private(seed)` and
    `public(key_bytes)` build its key objects."""

    loaded: _Backend | None = None

    def __init__(self) -> None:
        try:
            # The Rust binding the public module wraps: importing it alone
            # costs about half (no typing, no serialization modules), and
            # the eval path pays the import in CPU time on a busy machine.
            from cryptography.hazmat.bindings._rust import openssl as rust_openssl

            module: Any = rust_openssl.ed25519
            self.private, self.public = module.from_private_bytes, module.from_public_bytes
        except (ImportError, AttributeError):
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

            self.private, self.public = Ed25519PrivateKey.from_private_bytes, Ed25519PublicKey.from_public_bytes
        from cryptography.exceptions import InvalidSignature

        self.invalid = InvalidSignature


def _load_backend() -> _Backend:
    if _Backend.loaded is None:
        _Backend.loaded = _Backend()
    return _Backend.loaded


def _preload() -> None:
    try:
        _load_backend()
    except ImportError:
        pass  # said by the signing that needs it, as a missing dependency


def load_library() -> None:
    """Load `cryptography`'s Ed25519 now, in this thread (the warm server,
    before it forks its workers); no key is read."""
    _preload()


class Keys:
    """The machine's keys as one command sees them: `public` (None when the
    machine has no Ed25519 key), `legacy` (the old HMAC secret or None) and,
    for a command that signs, the private key."""

    __slots__ = ("legacy", "_public", "_seed", "_can_sign", "_loading", "_private")

    def __init__(self, public: bytes | None, legacy: bytes | None, seed: bytes | None = None,
                 can_sign: bool = False) -> None:
        self.legacy = legacy
        self._public = public
        self._seed = seed
        self._can_sign = can_sign and seed is not None
        self._loading: threading.Thread | None = None
        self._private: Any = None

    @property
    def public(self) -> bytes | None:
        """The machine's public key, derived from its private key when first
        asked for (by `cryptography` once loaded, else in plain Python)."""
        if self._public is None and self._seed is not None:
            self.wait()  # a preload under way is nearly always done by now
            backend = _Backend.loaded
            if backend is not None:
                self._public = backend.private(self._seed).public_key().public_bytes_raw()
            else:
                self._public = ed25519.public_from_seed(self._seed)
        return self._public

    @property
    def fingerprint(self) -> str | None:
        return ed25519.fingerprint(self.public) if self.public is not None else None

    def preload(self) -> None:
        """Import `cryptography` in a background thread, so that a command
        that signs at its end does not wait for it there: call it where the
        command starts to wait (for the evaluator), since the import holds
        the interpreter lock most of the time it runs."""
        if not self._can_sign or _Backend.loaded is not None or self._loading is not None:
            return
        import threading

        self._loading = threading.Thread(target=_preload, name="hills-crypto", daemon=True)
        self._loading.start()

    def sign(self, data: bytes) -> bytes:
        """The Ed25519 signature of `data` by the machine's key."""
        if not self._can_sign or self._seed is None:
            raise UsageError("this command was not given the machine's private key")
        if self._private is None:
            self.wait()
            self._private = _load_backend().private(self._seed)
        signature: bytes = self._private.sign(data)
        return signature

    @property
    def loaded(self) -> bool:
        """Whether a signature needs no wait for `cryptography` to load (a
        warm worker's case: the server loaded it)."""
        return _Backend.loaded is not None and (self._loading is None or not self._loading.is_alive())

    def wait(self) -> None:
        """Let `cryptography` finish loading, when `preload` started it."""
        if self._loading is not None:
            self._loading.join()
            self._loading = None

    def verify_local(self, data: bytes, signature: bytes) -> bool:
        """Whether `signature` is the machine key's signature of `data`."""
        return self.public is not None and check(self.public, data, signature)


def check(public: bytes, data: bytes, signature: bytes) -> bool:
    """Ed25519 check: through `cryptography` when a command already loaded
    it (the eval path), else in plain Python (a few ms, no import)."""
    backend = _Backend.loaded
    if backend is None:
        return ed25519.verify(public, data, signature)
    if len(signature) != 64 or len(public) != 32:
        return False
    try:
        backend.public(public).verify(signature, data)
    except (backend.invalid, ValueError):
        return False
    return True


def check_many() -> Callable[[bytes, bytes, bytes], bool]:
    """`check`, loading `cryptography` first when it can: for a caller
    about to check many signatures (a damaged log), where its speed pays
    for its import."""
    try:
        _load_backend()
    except ImportError:
        pass
    return check


def machine_keys(for_signing: bool = False) -> Keys:
    """The machine's keys. `for_signing` creates the key when missing (and
    keeps an old HMAC secret as key.hmac); without it nothing is created.
    A command that signs at its end calls `preload` where it starts to wait."""
    if for_signing:
        state.load_key()
    return Keys(None, state.legacy_secret(), state.signing_seed(), can_sign=for_signing)


def comment() -> str:
    """The comment of the machine's key line: `hills@HOST`."""
    import socket

    return f"hills@{socket.gethostname()}"


# --- the allowed-signers file -------------------------------------------

class Signer:
    """One trusted key: the name it was added under, its 32 key bytes, and
    whether it is trusted as an evaluation service's key (`service`), the
    only role that may sign a report claiming `trust: "service"`."""

    __slots__ = ("name", "public", "service")

    def __init__(self, name: str, public: bytes, service: bool = False) -> None:
        self.name = name
        self.public = public
        self.service = service

    @property
    def role(self) -> str:
        return "service" if self.service else "machine"

    @property
    def fingerprint(self) -> str:
        return ed25519.fingerprint(self.public)

    def line(self) -> str:
        """Its allowed_signers line, as `ssh-keygen -Y verify` reads it."""
        namespaces = f"{NAMESPACE},{SERVICE_NAMESPACE}" if self.service else NAMESPACE
        return f'{self.name} namespaces="{namespaces}" {ed25519.public_line(self.public)}'


def parse_line(line: str) -> Signer | None:
    """The signer of one allowed_signers line (None for a blank line, a
    comment, or a key hills does not use); ValueError when malformed."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    name, _, rest = text.partition(" ")
    rest = rest.strip()
    service = False
    # Options come before the key type; hills writes only namespaces="...".
    while rest and not rest.startswith(ed25519.KEY_TYPE + " "):
        if rest.split()[0].startswith(("ssh-", "ecdsa-", "sk-")):
            return None  # another key type: OpenSSH may use it, hills cannot
        match = re.match(r'([A-Za-z-]+)(="[^"]*")?\s+', rest)
        if match is None:
            raise ValueError("expected options and then 'ssh-ed25519 AAAA...'")
        option, value = match.group(1).lower(), (match.group(2) or "=").strip('="')
        if option == "namespaces":
            if NAMESPACE not in value.split(","):
                return None  # a key trusted for other namespaces only
            service = SERVICE_NAMESPACE in value.split(",")
        if option == "cert-authority":
            return None  # a CA signs certificates, which hills does not read
        rest = rest[match.end():]
    return Signer(name, ed25519.parse_public(rest), service)


def trusted() -> list[Signer]:
    """The signers of the allowed-signers file, in file order; a malformed
    line is skipped (`hills trust list` names it)."""
    return [signer for signer, _ in _read()[0] if signer is not None]


def _read() -> tuple[list[tuple[Signer | None, str]], list[str]]:
    """([(signer or None, line)], [problems]) of the allowed-signers file."""
    path = state.allowed_signers_path()
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        return [], []
    except (OSError, UnicodeDecodeError) as exc:
        return [], [f"cannot read '{path}': {exc}"]
    entries: list[tuple[Signer | None, str]] = []
    problems = []
    for number, line in enumerate(lines, 1):
        try:
            entries.append((parse_line(line), line))
        except ValueError as exc:
            problems.append(f"'{path}' line {number}: {exc}")
            entries.append((None, line))
    return entries, problems


def problems() -> list[str]:
    """What is wrong in the allowed-signers file, one text per bad line."""
    return _read()[1]


def check_name(name: str) -> None:
    if not re.match(_NAME, name):
        raise UsageError(f"trusted name '{name}' is not a plain name",
                         hint="expected letters, digits and . _ @ + - (no spaces, commas, quotes or patterns), "
                              "e.g. alice or hills@lab-2")


def add(name: str, key_text: str, service: bool = False) -> Signer:
    """Trust `key_text` (an `ssh-ed25519 AAAA...` line) under `name`, as an
    evaluation service's key when `service`, replacing a key trusted under
    that name before."""
    check_name(name)
    try:
        public = ed25519.parse_public(key_text)
    except ValueError as exc:
        raise UsageError(f"key for '{name}' is not an OpenSSH public key line: {exc}",
                         hint="pass the line 'hills key' prints on the signing machine, in quotes") from None
    signer = Signer(name, public, service)
    _rewrite(lambda entry: entry is None or entry.name != name, extra=signer.line())
    return signer


def remove(name: str) -> Signer:
    """Stop trusting the key added as `name`; UsageError when there is none."""
    found = [signer for signer in trusted() if signer.name == name]
    if not found:
        names = ", ".join(f"'{signer.name}'" for signer in trusted()) or "none"
        raise UsageError(f"no trusted key is named '{name}'",
                         hint=f"expected one of the names 'hills trust list' shows (trusted now: {names})")
    _rewrite(lambda entry: entry is None or entry.name != name)
    return found[0]


def _rewrite(keep: Callable[[Signer | None], bool], extra: str | None = None) -> None:
    path = state.allowed_signers_path()
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    with state.file_lock(path + ".lock"):
        lines = [line for signer, line in _read()[0] if keep(signer)]
        if extra is not None:
            lines.append(extra)
        state.atomic_write(path, "".join(line + "\n" for line in lines))
