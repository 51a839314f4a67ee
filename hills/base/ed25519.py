"""Ed25519 signature checks (RFC 8032) in plain Python, and the OpenSSH
wire forms hills keys and signatures travel in: a public key line, its
SHA256 fingerprint, and SSHSIG (OpenSSH's PROTOCOL.sshsig).

Checking needs no secret, so plain integer arithmetic is safe here, and it
costs about 2 ms where importing `cryptography` costs 20 to 45: `hills
verify` and the readers of a log check with this module. Signing goes
through `cryptography` (`hills.evidence.trust.Keys`).
"""

from __future__ import annotations

import binascii

from .digests import sha256, sha512

KEY_TYPE = "ssh-ed25519"
SSHSIG_MAGIC = b"SSHSIG"
SSHSIG_VERSION = 1
SSHSIG_HASH = "sha512"
ARMOR_BEGIN = "-----BEGIN SSH SIGNATURE-----"
ARMOR_END = "-----END SSH SIGNATURE-----"

_P = 2**255 - 19
_L = 2**252 + 27742317777372353535851937790883648493
# Written out rather than computed at import (a millisecond of every
# verify); tests/test_ed25519.py computes them again.
_D = 37095705934669439343138083508754565189542113879843219016388785533085940283555  # -121665/121666
_D2 = 2 * _D % _P
_SQRT_M1 = 19681161376707505956807079304988542015446066515923890162744021073123829784752  # 2^((p-1)/4)
_IDENTITY = (0, 1, 1, 0)

Point = tuple  # extended coordinates (X, Y, Z, T), x = X/Z, y = Y/Z, xy = T/Z


def _add(one: Point, two: Point) -> Point:
    x1, y1, z1, t1 = one
    x2, y2, z2, t2 = two
    a = (y1 - x1) * (y2 - x2) % _P
    b = (y1 + x1) * (y2 + x2) % _P
    c = t1 * _D2 * t2 % _P
    d = 2 * z1 * z2 % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return e * f % _P, g * h % _P, f * g % _P, e * h % _P


def _double(point: Point) -> Point:
    x1, y1, z1, _ = point
    a = x1 * x1 % _P
    b = y1 * y1 % _P
    c = 2 * z1 * z1 % _P
    h = a + b
    e = h - (x1 + y1) * (x1 + y1)
    g = a - b
    f = c + g
    return e * f % _P, g * h % _P, f * g % _P, e * h % _P


def _recover_x(y: int, sign: int) -> int | None:
    if y >= _P:
        return None
    u = (y * y - 1) % _P
    v = (_D * y * y + 1) % _P
    x = u * pow(v, 3, _P) * pow(u * pow(v, 7, _P), (_P - 5) // 8, _P) % _P
    check = v * x * x % _P
    if check == (-u) % _P:
        x = x * _SQRT_M1 % _P
    elif check != u:
        return None
    if x == 0 and sign:
        return None
    if x & 1 != sign:
        x = _P - x
    return x


def _decode(encoded: bytes) -> Point | None:
    number = int.from_bytes(encoded, "little")
    y = number & ((1 << 255) - 1)
    x = _recover_x(y, number >> 255)
    if x is None:
        return None
    return x, y, 1, x * y % _P


def _encode(point: Point) -> bytes:
    x, y, z, _ = point
    inverse = pow(z, _P - 2, _P)
    x, y = x * inverse % _P, y * inverse % _P
    return (y | ((x & 1) << 255)).to_bytes(32, "little")


# The base point B (y = 4/5, x even), in extended coordinates.
_BASE = (15112221349535400772501151409588531511454012693041857206046113283949847762202,
         46316835694926478169428394003475163141307993866256225615783033603165251855960, 1,
         46827403850823179245072216630277197565144205554125654976674165829533817101731)


def _negate(point: Point) -> Point:
    x, y, z, t = point
    return (_P - x) % _P, y, z, (_P - t) % _P


def _odd_multiples(point: Point) -> tuple[list[Point], list[Point]]:
    """([1P, 3P, ..., 15P], their negations): the table of a width-5 window."""
    twice = _double(point)
    table = [point]
    for _ in range(7):
        table.append(_add(table[-1], twice))
    return table, [_negate(entry) for entry in table]


def _naf(scalar: int) -> list[int]:
    """The width-5 non-adjacent form of `scalar`, lowest digit first: odd
    digits in -15..15, at least four zeros after each, so a scalar
    multiplication adds about once in six doublings."""
    digits = []
    while scalar:
        digit = 0
        if scalar & 1:
            digit = scalar & 31
            if digit >= 16:
                digit -= 32
            scalar -= digit
        digits.append(digit)
        scalar >>= 1
    return digits


_BASE_TABLE: tuple[list[Point], list[Point]] | None = None


def _multiply(pairs: list[tuple[int, tuple[list[Point], list[Point]]]]) -> Point:
    """The sum of scalar * point over `pairs` (scalar, the point's table),
    in one pass of doublings (Straus, width-5 windows)."""
    forms = [(_naf(scalar), table) for scalar, table in pairs]
    result = _IDENTITY
    for index in range(max(len(digits) for digits, _ in forms) - 1, -1, -1):
        result = _double(result)
        for digits, (positive, negative) in forms:
            digit = digits[index] if index < len(digits) else 0
            if digit > 0:
                result = _add(result, positive[digit >> 1])
            elif digit < 0:
                result = _add(result, negative[-digit >> 1])
    return result


def _base_table() -> tuple[list[Point], list[Point]]:
    global _BASE_TABLE
    if _BASE_TABLE is None:
        _BASE_TABLE = _odd_multiples(_BASE)
    return _BASE_TABLE


def verify(public: bytes, message: bytes, signature: bytes) -> bool:
    """Whether `signature` is `public`'s Ed25519 signature of `message`
    (RFC 8032 section 5.1.7, with s < L and canonical encodings required)."""
    if len(public) != 32 or len(signature) != 64:
        return False
    point = _decode(public)
    if point is None:
        return False
    r_bytes = signature[:32]
    s = int.from_bytes(signature[32:], "little")
    if s >= _L:
        return False
    k = int.from_bytes(sha512(r_bytes + public + message).digest(), "little") % _L
    # [s]B + [k](-A), compared with R as bytes.
    result = _multiply([(s, _base_table()), (k, _odd_multiples(_negate(point)))])
    return _encode(result) == r_bytes


def public_from_seed(seed: bytes) -> bytes:
    """The public key of the Ed25519 private key `seed` (RFC 8032 5.1.5)."""
    digest = sha512(seed).digest()
    scalar = int.from_bytes(digest[:32], "little")
    scalar &= (1 << 254) - 8
    scalar |= 1 << 254
    return _encode(_multiply([(scalar, _base_table())]))


# --- OpenSSH wire forms -------------------------------------------------

def _string(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def _read_strings(blob: bytes) -> list[bytes]:
    """The SSH strings `blob` is made of; ValueError when it is not exactly that."""
    items = []
    position = 0
    while position < len(blob):
        if position + 4 > len(blob):
            raise ValueError("a length runs past the end")
        size = int.from_bytes(blob[position:position + 4], "big")
        position += 4
        if position + size > len(blob):
            raise ValueError("a string runs past the end")
        items.append(blob[position:position + size])
        position += size
    return items


def public_blob(public: bytes) -> bytes:
    """The SSH wire encoding of an Ed25519 public key."""
    return _string(KEY_TYPE.encode()) + _string(public)


def public_line(public: bytes, comment: str = "") -> str:
    """`ssh-ed25519 AAAA... COMMENT`, as in authorized_keys and allowed_signers."""
    text = f"{KEY_TYPE} {binascii.b2a_base64(public_blob(public), newline=False).decode('ascii')}"
    return f"{text} {comment}" if comment else text


def fingerprint(public: bytes) -> str:
    """`SHA256:...` as `ssh-keygen -l` prints it."""
    digest = binascii.b2a_base64(sha256(public_blob(public)).digest(), newline=False)
    return "SHA256:" + digest.decode("ascii").rstrip("=")


def parse_public(text: str) -> bytes:
    """The 32 key bytes of `ssh-ed25519 AAAA... [comment]`; ValueError
    naming what was expected otherwise."""
    fields = text.split()
    if len(fields) < 2:
        raise ValueError("expected 'ssh-ed25519 AAAA...' (a key type and a base64 key)")
    if fields[0] != KEY_TYPE:
        raise ValueError(f"expected key type '{KEY_TYPE}', got '{fields[0]}'")
    try:
        blob = binascii.a2b_base64(fields[1].encode("ascii"), strict_mode=True)
        parts = _read_strings(blob)
    except (ValueError, UnicodeEncodeError, binascii.Error):
        raise ValueError("expected base64 of an ssh-ed25519 key after 'ssh-ed25519'") from None
    if len(parts) != 2 or parts[0] != KEY_TYPE.encode() or len(parts[1]) != 32:
        raise ValueError("expected base64 of an ssh-ed25519 key (32 bytes) after 'ssh-ed25519'")
    if _decode(parts[1]) is None:
        raise ValueError("the key is not a point of Ed25519")
    return parts[1]


def sshsig_signed_data(namespace: str, message: bytes) -> bytes:
    """What an SSHSIG signature signs (PROTOCOL.sshsig): the magic, the
    namespace, an empty reserved string, the hash name and H(message)."""
    return (SSHSIG_MAGIC + _string(namespace.encode()) + _string(b"")
            + _string(SSHSIG_HASH.encode()) + _string(sha512(message).digest()))


def sshsig_blob(public: bytes, namespace: str, signature: bytes) -> bytes:
    """The SSHSIG blob carrying `signature` (of sshsig_signed_data) by `public`."""
    return (SSHSIG_MAGIC + SSHSIG_VERSION.to_bytes(4, "big") + _string(public_blob(public))
            + _string(namespace.encode()) + _string(b"") + _string(SSHSIG_HASH.encode())
            + _string(_string(KEY_TYPE.encode()) + _string(signature)))


def parse_sshsig(blob: bytes) -> tuple[bytes, str, bytes]:
    """(public key, namespace, raw signature) of an Ed25519 SSHSIG blob;
    ValueError saying what is wrong otherwise."""
    if not blob.startswith(SSHSIG_MAGIC) or len(blob) < 10:
        raise ValueError("not an SSHSIG signature (no SSHSIG magic)")
    if int.from_bytes(blob[6:10], "big") != SSHSIG_VERSION:
        raise ValueError(f"SSHSIG version {int.from_bytes(blob[6:10], 'big')}, expected {SSHSIG_VERSION}")
    parts = _read_strings(blob[10:])
    if len(parts) != 5:
        raise ValueError("an SSHSIG signature holds five fields")
    key_blob, namespace, _reserved, hash_name, signature_blob = parts
    key_parts = _read_strings(key_blob)
    if len(key_parts) != 2 or key_parts[0] != KEY_TYPE.encode() or len(key_parts[1]) != 32:
        raise ValueError("the signer is not an ssh-ed25519 key")
    if hash_name != SSHSIG_HASH.encode():
        raise ValueError(f"hash '{hash_name.decode('ascii', 'replace')}', expected '{SSHSIG_HASH}'")
    signature_parts = _read_strings(signature_blob)
    if len(signature_parts) != 2 or signature_parts[0] != KEY_TYPE.encode() or len(signature_parts[1]) != 64:
        raise ValueError("the signature is not an ssh-ed25519 signature")
    return key_parts[1], namespace.decode("utf-8", "replace"), signature_parts[1]


def armor(blob: bytes) -> str:
    """The PEM-like text `ssh-keygen -Y sign` writes (76 columns)."""
    text = binascii.b2a_base64(blob, newline=False).decode("ascii")
    lines = [text[start:start + 76] for start in range(0, len(text), 76)]
    return "\n".join([ARMOR_BEGIN, *lines, ARMOR_END]) + "\n"
