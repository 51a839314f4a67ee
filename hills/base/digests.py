"""SHA-256, SHA-512, HMAC-SHA256 and BLAKE2b from the interpreter's builtin hash
modules, for the digests of a command's own path: importing hashlib or
hmac loads OpenSSL first, which costs every eval several milliseconds."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hashlib import blake2b, sha256, sha512
    from hmac import compare_digest
else:
    try:
        from _sha2 import sha256, sha512  # Python 3.12 and later
    except ImportError:
        try:
            from _sha256 import sha256
            from _sha512 import sha512
        except ImportError:  # an interpreter built without them
            from hashlib import sha256, sha512
    try:
        from _blake2 import blake2b
    except ImportError:
        from hashlib import blake2b
    try:
        # What hmac.compare_digest is when OpenSSL does not provide it.
        from _operator import _compare_digest as compare_digest
    except ImportError:
        from hmac import compare_digest

__all__ = ["blake2b", "compare_digest", "hmac_sha256", "sha256", "sha512"]

_BLOCK = 64  # SHA-256's block size
_INNER = bytes(byte ^ 0x36 for byte in range(256))
_OUTER = bytes(byte ^ 0x5C for byte in range(256))


def hmac_sha256(key: bytes, message: bytes) -> str:
    """HMAC-SHA256 (RFC 2104) of `message` in lowercase hex: the same as
    `hmac.new(key, message, hashlib.sha256).hexdigest()`."""
    if len(key) > _BLOCK:
        key = sha256(key).digest()
    key = key.ljust(_BLOCK, b"\0")
    inner = sha256(key.translate(_INNER))
    inner.update(message)
    return sha256(key.translate(_OUTER) + inner.digest()).hexdigest()
