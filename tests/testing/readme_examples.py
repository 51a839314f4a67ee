"""The examples of the README's section "Use hills from your loop", each
a fenced block after a `<!-- example: NAME -->` line, read from the README
itself so that the test that runs one runs what a reader copies."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "## Use hills from your loop\n"


def section() -> str:
    text = README.read_text()
    assert SECTION in text, f"README.md has no section {SECTION.strip()!r}"
    rest = text.split(SECTION, 1)[1]
    return rest.split("\n## ", 1)[0]


def examples() -> dict[str, str]:
    """{name: the block's text} for every marked block of the section."""
    return dict(re.findall(r"<!-- example: ([\w-]+) -->\n```(?:python|sh)\n(.*?)```", section(), re.S))


def example(name: str) -> str:
    found = examples()
    assert name in found, f"README.md's section has no example {name!r} (it has {sorted(found)})"
    return found[name]
