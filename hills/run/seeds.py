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


def generate_inputs(ctx: Any, rep: Any, target: str) -> str | None:
    """Run the hill's `solution.generate` for replicate `rep`: trusted, with
    the evaluator's confinement and the submission out of its sight, in an
    empty folder, with the secret seed; then add what it wrote to `target`
    (the snapshot's inputs/). Returns why it failed, or None."""
    import os

    from ..base import state
    from . import evaluate, runner

    folder = evaluate._fresh(os.path.join(ctx.run_dir, "generated" + rep.tag))
    os.mkdir(folder)
    hill_dir = ctx.run_hill_dir
    argv = [part.replace("{python}", ctx.python) for part in ctx.spec["solution"]["generate"]]
    argv = [os.path.join(hill_dir, part) if not os.path.isabs(part) and not part.startswith("-")
            and os.path.isfile(os.path.join(hill_dir, part)) else part for part in argv]
    env = evaluator_env_for(ctx, rep, folder)
    hide = (rep.submission_dir, ctx.source_dir, os.path.join(ctx.run_dir, "scratch" + rep.tag))
    process = runner.run(ctx.confinement.evaluator(argv, folder, hide=hide), cwd=folder, env=env,
                         timeout=ctx.spec["timeout"],
                         stdout_path=evaluate._fresh(os.path.join(ctx.run_dir, f"generate-stdout{rep.tag}.log")),
                         stderr_path=evaluate._fresh(os.path.join(ctx.run_dir, f"generate-stderr{rep.tag}.log")),
                         verbose=ctx.verbose)
    if process.interrupted:
        raise KeyboardInterrupt(process.stop_signal or "SIGINT")
    if process.timed_out or process.exit_code != 0:
        said = evaluate._last_line(os.path.join(ctx.run_dir, f"generate-stderr{rep.tag}.log"))
        return (f"the hill's solution.generate failed ({process.describe_exit()})" + (f": {said}" if said else "")
                + f"; see generate-stderr{rep.tag}.log in {ctx.run_dir}")
    os.makedirs(target, exist_ok=True)
    for name in sorted(os.listdir(folder)):
        if os.path.lexists(os.path.join(target, name)):
            return f"the hill's solution.generate wrote '{name}', which the split's inputs already hold"
        source = os.path.join(folder, name)
        if os.path.islink(source):
            return f"the hill's solution.generate wrote '{name}' as a link; inputs must be files or folders"
        if os.path.isdir(source):
            state.copy_tree(source, os.path.join(target, name))
        else:
            with open(source, "rb") as reader, open(os.path.join(target, name), "xb") as writer:
                writer.write(reader.read())
    return None


def evaluator_env_for(ctx: Any, rep: Any, folder: str) -> dict[str, str]:
    """The generator's environment: the evaluator's, with the secret seed,
    the split, the hill and where to write."""
    from . import evaluate

    env = evaluate.evaluator_env(ctx, rep.env)
    env.update({ENV_SECRET: str(rep.secret), "HILLS_INPUTS": folder, "HILLS_HILL": ctx.run_hill_dir,
                "HILLS_SPLIT": ctx.split})
    return env
