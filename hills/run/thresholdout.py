"""The reusable holdout (docs/noise.md, "The reusable holdout"):
Thresholdout's answer to one `--final` query, its Laplace noise from the
operating system's generator, and the noisy threshold kept sealed in
machine state per hill version. The answer is a pure function of the two
scores, the parameters, the threshold's noise and a draw, so that the
suite's simulations run the very rule an eval runs."""

from __future__ import annotations

import math
import os

from ..base import state
from ..base.records import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    Draw = Callable[[float], float]  # a Laplace draw of the given scale

STATE_FILE = "thresholdout.json"
STATE_VERSION = 1


def system_uniform() -> float:
    """A uniform number in the open interval (0, 1) from 53 bits of
    os.urandom: the `random` module's generator would be predictable from
    its outputs, and costs an import on the eval path."""
    bits = int.from_bytes(os.urandom(7), "big") >> 3
    return (bits + 0.5) / 2.0 ** 53


def laplace(scale: float, uniform: Callable[[], float] = system_uniform) -> float:
    """A draw of Laplace(0, scale), by inverting its distribution function
    at a uniform number; `uniform` must never give 0 or 1."""
    centred = uniform() - 0.5
    return -scale * math.copysign(1.0, centred) * math.log(1.0 - 2.0 * abs(centred))


@frozen
class Answer:
    """Thresholdout's answer to one query: the value to report, whether it
    is a release of the holdout score (which spends a unit of budget), and
    after a release the threshold noise to keep in place of the old one."""

    value: float
    release: bool
    next_gamma: float | None = None


def answer(validation: float, holdout: float, threshold: float, sigma: float, gamma: float,
           draw: Draw = laplace) -> Answer:
    """Thresholdout's rule (Dwork et al., Science 2015; CACM 60(4), 2017,
    Figure 1), with `gamma` the noise on the threshold the version holds:
    the holdout score plus Laplace(sigma) noise where |holdout - validation|
    passes threshold + gamma + Laplace(4 sigma), and then a fresh gamma,
    Laplace(2 sigma); else the validation score, unchanged."""
    if abs(holdout - validation) > threshold + gamma + draw(4.0 * sigma):
        return release(holdout, sigma, draw)
    return Answer(validation, False)


def release(holdout: float, sigma: float, draw: Draw = laplace) -> Answer:
    """A release of the holdout score: plus Laplace(sigma), and a fresh
    threshold noise, Laplace(2 sigma), for the queries after it."""
    return Answer(holdout + draw(sigma), True, draw(2.0 * sigma))


def state_path(name: str, tree_hash: str) -> str:
    """Where a version keeps its threshold noise: beside its holdout count."""
    return os.path.join(state.state_dir(name, tree_hash), STATE_FILE)


def held_gamma(name: str, tree_hash: str, sigma: float, draw: Draw = laplace) -> float:
    """The threshold noise of a version, drawn (Laplace(2 sigma)) and sealed
    at its first reusable `--final`. A file that is missing or whose seal
    does not hold (edited, or written under another key) is drawn again:
    only the machine's own writes are believed."""
    path = state_path(name, tree_hash)
    kept = state.sealed_read(path)
    if isinstance(kept, dict) and kept.get("version") == STATE_VERSION and isinstance(kept.get("gamma"), float) \
            and math.isfinite(kept["gamma"]):
        return kept["gamma"]
    gamma = draw(2.0 * sigma)
    keep_gamma(name, tree_hash, gamma)
    return gamma


def keep_gamma(name: str, tree_hash: str, gamma: float) -> None:
    """Seal `gamma` as the version's threshold noise (under the caller's budget lock)."""
    state.sealed_write(state_path(name, tree_hash), {"version": STATE_VERSION, "gamma": gamma})
