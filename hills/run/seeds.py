"""Fresh inputs: the seeds of an eval's replicates, unpredictable unless the
hill asks for 0..N-1 (`seeds: fixed`), and the secret seed each replicate's
evaluator gets and submitted code never sees before its phase ends."""

from __future__ import annotations

from ..base.digests import blake2b

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

ENV_SECRET = "HILLS_SECRET_SEED"
# Seeds fit the widest seed numpy and torch take from a plain int.
_BOUND = 2 ** 31


def _derived(key: str, label: str, index: int) -> int:
    digest = blake2b(f"{label}:{index}".encode(), key=bytes.fromhex(key), digest_size=8).digest()
    return int.from_bytes(digest, "big") % _BOUND


def replicate_seed(spec: Mapping[str, Any], key: str, index: int) -> int:
    """HILLS_REPLICATE_SEED of replicate `index`: the index under `seeds:
    fixed`, else drawn for this eval (seen by the submission)."""
    return index if spec.get("seeds") == "fixed" or not key else _derived(key, "replicate", index)


def secret_seed(key: str, index: int) -> int:
    """HILLS_SECRET_SEED of replicate `index`: drawn for this eval whatever
    `seeds:` says, for the evaluator alone."""
    return _derived(key, "secret", index) if key else 0


def record(spec: Mapping[str, Any], key: str, ran: int) -> dict[str, Any]:
    """The report's `seeds`, written once every phase has ended: the seeds
    of the replicates that ran, the secret ones too, so that anyone can
    regenerate the inputs the eval used."""
    return {"fixed": spec.get("seeds") == "fixed",
            "replicates": [replicate_seed(spec, key, index) for index in range(ran)],
            "secret": [secret_seed(key, index) for index in range(ran)]}
