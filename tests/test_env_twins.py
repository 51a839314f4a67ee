"""Hill environments that install the same files share them: the second is
hard-linked from an intact first (its twin: the same hill's built from the
same pyproject.toml, uv.lock and interpreter, or another hill's of the same
packages) rather than installed again, each keeps its own seal, an edit
through either shows in both, and a twin that changed is never linked from.
Environments carry compiled bytecode from their build. Where the file
system clones, an environment shares uv's cached blocks."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

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


@pytest.fixture
def own_uv_cache(tmp_path, monkeypatch):
    """A uv cache of the test's own: its package files are hard links of
    the environments', which the test edits."""
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    return tmp_path / "uv-cache"


def test_a_second_environment_of_the_same_lock_is_linked_from_its_twin(project, own_uv_cache):
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
    # The edited file was uv's cached one too (a hard link): the edit shows
    # as such, and the rebuild fetches the package anew rather than link it.
    assert uvenv.cache_edited(str(first)) and uvenv.cache_edited(str(second))
    assert "# edited" in next(path for path in own_uv_cache.rglob(twin.name)
                              if path.stat().st_ino == twin.stat().st_ino).read_text()
    rebuilt = Path(uvenv.ensure("twins", "second", hill_dir)).parent.parent
    assert rebuilt == second and "# edited" not in (second / twin.relative_to(second)).read_text()
    assert uvenv.changed_since_built(str(second)) is None
    third = Path(uvenv.ensure("twins", "third", hill_dir)).parent.parent
    assert os.stat(third / twin.relative_to(second)).st_ino != os.stat(package).st_ino
    assert "# edited" not in (third / twin.relative_to(second)).read_text()
    assert uvenv.changed_since_built(str(third)) is None


def test_another_lock_is_no_twin(project):
    hill_dir = made_hill()
    first = Path(uvenv.ensure("twins", "first", hill_dir)).parent.parent
    with_six(hill_dir)
    second = Path(uvenv.ensure("twins", "second", hill_dir)).parent.parent
    assert not list(first.glob("lib/python*/site-packages/six.py"))
    assert list(second.glob("lib/python*/site-packages/six.py"))


def test_another_hill_of_the_same_packages_is_a_twin(project, own_uv_cache):
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
    # Installed by uv, not linked from the first: its bytecode (compiled at
    # the build, never a file of uv's cache) is its own.
    [compiled] = first.glob("lib/python*/site-packages/__pycache__/six.*.pyc")
    assert os.stat(compiled).st_ino != os.stat(second / compiled.relative_to(first)).st_ino
    # Nor is a lock that cannot be read looked up in other hills.
    (second_dir / "uv.lock").write_text("not [toml")
    assert uvenv.packages_digest(second_dir) is None


# ---------------------------------------------------------------- hard links of uv's cache

def test_where_the_file_system_does_not_clone_an_environment_is_hard_linked_from_uv_s_cache(
        project, own_uv_cache, tmp_path):
    """On ext4 (uv's clone falls back to a hard link) a package file is the
    cache's inode. A link added or removed elsewhere moves its ctime alone:
    the seal judges it by content and holds. An edit in place, its size
    and mtime put back, is seen; without the content digest sealed at the
    build, the moved ctime alone is a change (the control)."""
    hill_dir = made_hill()
    with_six(hill_dir)
    env = Path(uvenv.ensure("twins", "v1", hill_dir)).parent.parent
    [six] = env.glob("lib/python*/site-packages/six.py")
    cached = [path for path in own_uv_cache.rglob("six.py") if path.stat().st_ino == six.stat().st_ino]
    if not cached:
        pytest.skip("uv cloned or copied here: the environment shares no inode with its cache")
    assert six.stat().st_nlink >= 2 and str(six.relative_to(env)) in uvenv.shared_digests(str(env))
    os.link(six, tmp_path / "another-name")
    (tmp_path / "another-name").unlink()
    assert uvenv.changed_since_built(str(env)) is None
    os.link(six, tmp_path / "another-name")
    before = six.stat()
    text = six.read_bytes()
    six.write_bytes(text.replace(b"import", b"IMPORT", 1))
    os.utime(six, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert six.stat().st_size == before.st_size
    assert uvenv.changed_since_built(str(env)) == f"its file {six.relative_to(env)}, shared with uv's cache, was edited"
    six.write_bytes(text)
    os.utime(six, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert uvenv.changed_since_built(str(env)) is None  # the content is the build's again
    os.link(six, tmp_path / "a-third-name")
    Path(uvenv.shared_path(str(env))).unlink()
    assert uvenv.changed_since_built(str(env)) == "a file in it was added, removed or edited"


# ---------------------------------------------------------------- clones of uv's cache

# Where Debian puts it, off the PATH of a user who is not root.
MKFS_BTRFS = shutil.which("mkfs.btrfs", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))


@pytest.fixture
def reflink_folder(tmp_path):
    """A btrfs file system on a loop device, mounted for the test: a file
    system that clones (root, and the Debian package btrfs-progs, which
    .ci/run installs)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a btrfs file system for the clone test needs root")
    if MKFS_BTRFS is None:
        pytest.skip("mkfs.btrfs is missing (install the Debian package 'btrfs-progs')")
    image, mount = tmp_path / "btrfs.img", tmp_path / "mnt"
    mount.mkdir()
    with open(image, "wb") as handle:
        handle.truncate(256 * 1024 * 1024)
    made = subprocess.run([MKFS_BTRFS, "-q", str(image)], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    mounted = subprocess.run(["mount", "-o", "loop", str(image), str(mount)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"this machine cannot mount a loop device: {mounted.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


def exclusive_bytes(path):
    """The bytes of `path` no other file shares, as btrfs counts them."""
    done = subprocess.run(["btrfs", "filesystem", "du", "--raw", "-s", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.splitlines()[-1].split()[1])


def test_where_the_file_system_clones_an_environment_shares_the_cache_s_blocks(project, reflink_folder, monkeypatch):
    """uv's copy is copy_file_range(2), which btrfs answers with a clone:
    the environment's files are its own inodes sharing the cache's blocks,
    so it costs no disk beyond its bytecode, and an edit of the cache never
    reaches it (copy on write)."""
    monkeypatch.setenv("HILLS_HOME", str(reflink_folder / "hills-home"))
    monkeypatch.setenv("UV_CACHE_DIR", str(reflink_folder / "uv-cache"))
    hill_dir = made_hill()
    with_six(hill_dir)
    env = Path(uvenv.ensure("twins", "v1", hill_dir)).parent.parent
    [six] = env.glob("lib/python*/site-packages/six.py")
    [cached] = [path for path in (reflink_folder / "uv-cache").rglob("six.py")
                if path.stat().st_size == six.stat().st_size]
    assert six.read_bytes() == cached.read_bytes() and six.stat().st_ino != cached.stat().st_ino
    assert six.stat().st_size > 20_000 and six.stat().st_nlink == 1
    assert exclusive_bytes(six) == 0  # every block shared with the cache's file
    # An edit of the cache never reaches the environment, whose seal holds.
    cached.chmod(0o644)
    with open(cached, "a", encoding="utf-8") as handle:
        handle.write("# edited in the cache\n")
    assert "# edited in the cache" not in six.read_text()
    assert uvenv.changed_since_built(str(env)) is None
