"""hills commit with 200 MB in private/, against sha256 over the same bytes;
a re-commit whose gate inputs did not change, against the first commit of
the hill (interleaved)."""

import hashlib
import os
import sys

from .common import Sandbox, compared, interleaved, line, timed, write_random_files

SIZE = int(os.environ.get("HILLS_BENCH_PRIVATE_MB", "200")) * 1024 * 1024


def sha256_files(folder):
    for name in sorted(os.listdir(folder)):
        digest = hashlib.sha256()
        with open(os.path.join(folder, name), "rb") as handle:
            while True:
                chunk = handle.read(1 << 20)
                if not chunk:
                    break
                digest.update(chunk)
        digest.hexdigest()


def main():
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    with Sandbox() as box:
        box.run("hills", "new", "bench", "-t", "circle-packing")
        hill_dir = box.hill_dir("bench")
        private = os.path.join(hill_dir, "private")
        write_random_files(private, SIZE)
        reference = timed(lambda: sha256_files(private), repeat=3)
        reference_process = timed(lambda: box.run(sys.executable, "-c", (
            "import hashlib,os,sys\n"
            "for n in sorted(os.listdir(sys.argv[1])):\n"
            "    h=hashlib.sha256()\n"
            "    f=open(os.path.join(sys.argv[1],n),'rb')\n"
            "    for c in iter(lambda: f.read(1<<20), b''): h.update(c)\n"), private), repeat=3)

        # The part of a commit that depends on the data: regenerating the locks.
        os.environ["HILLS_HOME"] = box.home
        from hills.disk import hill as hill_module, locks
        from hills.freeze import commit

        target = hill_module.Hill(hill_dir)
        cache_file = locks.StatCache(hill_dir).path

        def cold():
            if os.path.exists(cache_file):
                os.unlink(cache_file)
            commit.regenerate_locks(target)

        first = timed(cold, repeat=3)
        warm = timed(lambda: commit.regenerate_locks(target), repeat=5)
        print(f"private data: {SIZE // (1024 * 1024)} MB in 20 files")
        line("lock hashing, first commit (cold cache) vs sha256", first, reference, 1.5)
        line("lock hashing, re-commit, private unchanged vs sha256", warm, reference, 0.2)

        # The whole command, for context: gate, locks, tree, commit, in a new process.
        os.unlink(cache_file)
        first_cli = timed(lambda: box.run("hills", "commit", "bench", "-m", "first"), repeat=1)
        counter = [0]

        def recommit():
            counter[0] += 1
            with open(os.path.join(hill_dir, "README.md"), "a") as handle:
                handle.write(f"\nrevision {counter[0]}\n")
            box.run("hills", "commit", "bench", "-m", f"revision {counter[0]}")

        again_cli = timed(recommit, repeat=3)
        line("hills commit, 200 MB private (process) vs sha256 process", first_cli, reference_process)
        line("hills commit again, private unchanged vs sha256 process", again_cli, reference_process)
        gate_remembered(box)


def gate_remembered(box: Sandbox, rounds: int = 9) -> float:
    """In turns: the first commit of a hill (its gate runs, uv checks its
    lock) and a re-commit of that hill whose gate inputs did not change (new
    held-out data only: the locks and the leak audit run, the checks are
    remembered). Then, for context, against a later commit whose gate runs
    again (a README revision never committed before)."""
    names = [f"gate-{index}" for index in range(rounds + 1)]
    for name in names:  # made before the clock runs: each pair takes a fresh hill
        box.run("hills", "new", name, "-t", "circle-packing")
        os.makedirs(os.path.join(box.hill_dir(name), "private"))
    fresh = iter(names)
    current = [""]
    revision = [0]

    def write(rel: str, text: str, mode: str = "w") -> None:
        with open(os.path.join(box.hill_dir(current[0]), rel), mode) as handle:
            handle.write(text)

    def first_commit() -> None:
        current[0] = next(fresh)
        box.run("hills", "commit", current[0], "-m", "first")

    def gate_runs() -> None:
        revision[0] += 1
        write("README.md", f"\nrevision {revision[0]}\n", "a")
        box.run("hills", "commit", current[0], "-m", f"revision {revision[0]}")

    def gate_unchanged() -> None:
        revision[0] += 1
        write(os.path.join("private", "answers.txt"), f"held-out answers, edition {revision[0]}\n")
        box.run("hills", "commit", current[0], "-m", f"held-out data {revision[0]}")

    ratio = compared("hills commit again, gate inputs unchanged vs the first",
                     interleaved(first_commit, gate_unchanged, rounds=rounds, warmup=1), 0.3)
    compared("hills commit again, gate inputs unchanged vs gate run",
             interleaved(gate_runs, gate_unchanged, rounds=rounds, warmup=1))
    return ratio


if __name__ == "__main__":
    main()
