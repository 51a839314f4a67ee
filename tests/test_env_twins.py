"""Hill environments that install the same files share them: the second is
hard-linked from an intact first (its twin: the same hill's built from the
same pyproject.toml, uv.lock and interpreter, or another hill's of the same
packages) rather than installed again, each keeps its own seal, an edit
through either shows in both, and a twin that changed is never linked from.
Environments carry compiled bytecode from their build."""

import os
from pathlib import Path

from testing.util import run_cli
from hills.disk import uvenv


def made_hill(name="twins"):
    created = run_cli("new", name, "-t", "default")
    assert created.code == 0, created.output
    return Path(created.out.strip())


def with_six(hill_dir, extra=""):
    (hill_dir / "pyproject.toml").write_text((hill_dir / "pyproject.toml").read_text()
                                             .replace("dependencies = []", 'dependencies = ["six==1.16.0"]') + extra)
    uvenv.lock(hill_dir)


def a_package_file(env_dir):
    found = sorted(Path(env_dir).glob("lib/python*/site-packages/**/*.py"))
    assert found, f"no package file in {env_dir}"
    return found[0]


def test_a_second_environment_of_the_same_lock_is_linked_from_its_twin(project):
    hill_dir = made_hill()
    with_six(hill_dir)
    first = Path(uvenv.ensure("twins", "first", hill_dir)).parent.parent
    second = Path(uvenv.ensure("twins", "second", hill_dir)).parent.parent
    package = a_package_file(first)
    twin = second / package.relative_to(first)
    assert os.stat(package).st_ino == os.stat(twin).st_ino
    # bin/ names its own folder, so it is a copy with the path replaced.
    assert (second / "pyvenv.cfg").read_text() == (first / "pyvenv.cfg").read_text().replace(str(first), str(second))
    assert os.stat(second / "pyvenv.cfg").st_ino != os.stat(first / "pyvenv.cfg").st_ino
    # Both seals hold after the link, which moved the first's ctimes.
    assert uvenv.changed_since_built(str(first)) is None
    assert uvenv.changed_since_built(str(second)) is None
    # Bytecode was compiled at the build.
    assert list(Path(first).glob("lib/python*/site-packages/__pycache__/six.*.pyc"))
    # An edit through one name shows in both seals.
    with open(twin, "a", encoding="utf-8") as handle:
        handle.write("# edited\n")
    assert uvenv.changed_since_built(str(first)) == "a file in it was added, removed or edited"
    assert uvenv.changed_since_built(str(second)) == "a file in it was added, removed or edited"
    # A changed environment is no twin: the next one is installed afresh.
    third = Path(uvenv.ensure("twins", "third", hill_dir)).parent.parent
    assert os.stat(third / twin.relative_to(second)).st_ino not in (os.stat(twin).st_ino,)
    assert "# edited" not in (third / twin.relative_to(second)).read_text()
    assert uvenv.changed_since_built(str(third)) is None


def test_another_lock_is_no_twin(project):
    hill_dir = made_hill()
    first = Path(uvenv.ensure("twins", "first", hill_dir)).parent.parent
    with_six(hill_dir)
    second = Path(uvenv.ensure("twins", "second", hill_dir)).parent.parent
    assert not list(first.glob("lib/python*/site-packages/six.py"))
    assert list(second.glob("lib/python*/site-packages/six.py"))


def test_another_hill_of_the_same_packages_is_a_twin(project):
    first_dir, second_dir = made_hill("twins"), made_hill("other")
    with_six(first_dir)
    with_six(second_dir)
    # The two locks differ (each names its own project), the packages do not.
    assert (first_dir / "uv.lock").read_text() != (second_dir / "uv.lock").read_text()
    assert uvenv.env_digest(first_dir) != uvenv.env_digest(second_dir)
    assert uvenv.packages_digest(first_dir) == uvenv.packages_digest(second_dir) is not None
    first = Path(uvenv.ensure("twins", "v1", first_dir)).parent.parent
    second = Path(uvenv.ensure("other", "v1", second_dir)).parent.parent
    package = a_package_file(first)
    linked = second / package.relative_to(first)
    assert os.stat(package).st_ino == os.stat(linked).st_ino
    assert (second / "pyvenv.cfg").read_text() == (first / "pyvenv.cfg").read_text().replace(str(first), str(second))
    assert uvenv.changed_since_built(str(first)) is None and uvenv.changed_since_built(str(second)) is None
    # Its interpreter runs from its own folder and imports the shared package.
    import subprocess

    done = subprocess.run([str(second / "bin" / "python"), "-c", "import six, sys; print(sys.prefix, six.__file__)"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(second), str(linked)]
    # An edit through one hill's name shows in the other's seal.
    with open(linked, "a", encoding="utf-8") as handle:
        handle.write("# edited\n")
    assert uvenv.changed_since_built(str(first)) == "a file in it was added, removed or edited"


def test_another_hill_that_installs_differently_is_no_twin(project):
    first_dir, second_dir = made_hill("twins"), made_hill("other")
    with_six(first_dir)
    # How uv installs is part of what an environment holds.
    with_six(second_dir, extra="\n[tool.uv]\ncompile-bytecode = false\n")
    assert uvenv.packages_digest(first_dir) != uvenv.packages_digest(second_dir)
    first = Path(uvenv.ensure("twins", "v1", first_dir)).parent.parent
    second = Path(uvenv.ensure("other", "v1", second_dir)).parent.parent
    package = a_package_file(first)
    assert os.stat(package).st_ino != os.stat(second / package.relative_to(first)).st_ino
    # Nor is a lock that cannot be read looked up in other hills.
    (second_dir / "uv.lock").write_text("not [toml")
    assert uvenv.packages_digest(second_dir) is None
