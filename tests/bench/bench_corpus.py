"""The cost of the cheat corpus at `hills check`: the checks of each
template (its tests left out), with the corpus and with it replaced by a
check that tries nothing, in this process, in turns. Prints the seconds the
corpus adds (target: at most 5 s) and the ratio."""

import os

from .common import Sandbox, interleaved

ROUNDS = int(os.environ.get("HILLS_BENCH_REPEAT", "3"))
TEMPLATES = ("circle-packing", "bin-packing", "default")


def main():
    with Sandbox() as box:
        for template in TEMPLATES:
            box.run("hills", "new", f"c-{template}", "-t", template)
        with box.inside():
            for template in TEMPLATES:
                _compare(box.hill_dir(f"c-{template}"), template)


def _compare(hill_dir, template):
    from hills.checks import check, corpus

    real = corpus.cheat_corpus

    def checks(with_corpus):
        corpus.cheat_corpus = real if with_corpus else (lambda *args: check.Result(corpus.NAME, "ok", "skipped"))
        try:
            results = check.run_checks(hill_dir, tests=False)
        finally:
            corpus.cheat_corpus = real
        # A fresh template's README still holds the note for its author: only the corpus must pass here.
        failed = [result for result in results if result.status == "fail" and result.name == corpus.NAME]
        assert not failed, [(result.name, result.detail) for result in failed]

    comparison = interleaved(lambda: checks(False), lambda: checks(True), rounds=ROUNDS, warmup=1)
    added = comparison.candidate_s - comparison.reference_s
    verdict = "  ok" if added <= 5 else "  OVER TARGET"
    print(f"{'hills check ' + template + ': with the cheat corpus vs without':<58} {comparison.candidate_s:8.3f}s / "
          f"{comparison.reference_s:8.3f}s  median ratio {comparison.ratio:5.2f}x, adds {added:.2f}s "
          f"(target <= 5 s){verdict}", flush=True)


if __name__ == "__main__":
    main()
