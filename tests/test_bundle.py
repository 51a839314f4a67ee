"""`hills bundle` and `hills unbundle`: one file per hill version, rebuilt
elsewhere only when it checks out against its tree hash and its locks; a
damaged or edited bundle is refused, naming what differs, and leaves
nothing behind."""

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from testing.util import git, run_cli
from testing.eval_fixtures import SCORE_EVAL, make_hill, on_machine, submission

NAME = "bundled"
BLOBS = 'blobs:\n  track: ["data/*.bin"]\n'


@pytest.fixture(scope="module")
def source(module_machine, tmp_path_factory):
    """A hill with private data and a blob, committed twice (so its HEAD has a
    parent), and its bundle."""
    with on_machine(module_machine):
        hill_dir = make_hill(NAME, SCORE_EVAL, extra=BLOBS,
                             private={"answers.csv": "id,answer\n1,42\n", "same.txt": "x\n", "twin.txt": "x\n"})
        (hill_dir / "data").mkdir()
        (hill_dir / "data" / "weights.bin").write_bytes(bytes(range(256)) * 8)
        committed = run_cli("commit", NAME, "-m", "a blob")
        assert committed.code == 0, committed.output
        target = tmp_path_factory.mktemp("bundles") / "bundled.hillbundle"
        made = run_cli("bundle", NAME, "-o", target)
        assert made.code == 0, made.output
        assert made.out.strip() == str(target)
        return hill_dir, target


def _members(path):
    with tarfile.open(path) as archive:
        return [(member.name, archive.extractfile(member).read()) for member in archive]


def _rewrite(path, target, change):
    """Write a copy of bundle `path` to `target`, each (name, bytes) member
    passed through `change`, which may return None to drop it or a list to
    add more."""
    with tarfile.open(target, "w") as out:
        for name, data in _members(path):
            changed = change(name, data)
            for item in changed if isinstance(changed, list) else [changed] if changed else []:
                info = tarfile.TarInfo(item[0])
                info.size = len(item[1])
                out.addfile(info, io.BytesIO(item[1]))
    return target


def _refused(bundle_file, into, *words):
    before = _registry_paths()
    Path(into).mkdir()
    result = run_cli("unbundle", bundle_file, "--into", into)
    assert result.code == 1, result.output
    message = result.error_lines[0]
    assert "is damaged or was edited" in message
    for word in words:
        assert word in message, message
    assert not (Path(into) / ".hills").exists(), "a refused bundle left a folder"
    assert _registry_paths() == before, "a refused bundle was registered"
    return message


def _registry_paths():
    from hills.base import state

    return sorted(entry["path"] for _, entry in state.registry_entries())


def test_the_bundle_holds_the_commit_the_pack_and_the_data_by_digest(source):
    hill_dir, bundle_file = source
    members = dict(_members(bundle_file))
    manifest = json.loads(members["hills-bundle.json"])
    head = git(hill_dir, "rev-parse", "HEAD").out.strip()
    tree = git(hill_dir, "rev-parse", "HEAD^{tree}").out.strip()
    assert manifest == {"format": "hills-bundle", "version": 1, "hill": NAME, "commit": head, "tree_hash": tree}
    assert list(members)[:2] == ["hills-bundle.json", "objects.pack"]
    from testing.util import digest_of

    expected = {"data/" + digest_of(data).removeprefix("blake3:") for data in
                (b"id,answer\n1,42\n", b"x\n", bytes(range(256)) * 8)}
    assert set(members) - {"hills-bundle.json", "objects.pack"} == expected  # twin.txt shares same.txt's member
    assert os.stat(bundle_file).st_mode & 0o777 == 0o600


def test_unbundle_rebuilds_registers_and_keeps_the_tree_hash(source, tmp_path):
    hill_dir, bundle_file = source
    logged = json.loads(run_cli("log", NAME, "--json").out)
    assert [set(version) >= {"tree_hash", "commit"} for version in logged] == [True, True]
    into = tmp_path / "node"
    into.mkdir()
    result = run_cli("unbundle", bundle_file, "--into", into, "--json")
    assert result.code == 0, result.output
    rebuilt = Path(json.loads(result.out)["path"])
    assert rebuilt == into / ".hills" / NAME
    assert str(rebuilt) in _registry_paths()
    there = json.loads(run_cli("log", rebuilt, "--json").out)
    # One version, the bundled one, with the same commit and tree hash.
    assert [(v["commit"], v["tree_hash"]) for v in there] == [(logged[0]["commit"], logged[0]["tree_hash"])]
    for rel in ("private/answers.csv", "private/twin.txt", "data/weights.bin", "eval.py", "hill.yaml"):
        assert (rebuilt / rel).read_bytes() == (hill_dir / rel).read_bytes(), rel
    # Its index holds the files' stat data: an eval knows it clean without
    # git. (Asked first: a plain git status writes them into the index.)
    from hills.base import gitobjects
    from hills.disk.hill import excluded_blobs

    assert gitobjects.clean_by_stat(str(rebuilt / ".vc"), str(rebuilt), logged[0]["tree_hash"],
                                    excluded_blobs(str(rebuilt)))
    assert git(rebuilt, "status", "--porcelain", "--untracked-files=all").out == ""
    assert (rebuilt / ".vc" / "shallow").read_text().strip() == logged[0]["commit"]
    assert (rebuilt / ".vc" / "hooks" / "pre-commit").exists()
    # Scored there as at home: same tree, clean, official.
    folder = submission(tmp_path / "sub", {"score.txt": "3\n"})
    scored = run_cli("eval", folder, "-H", rebuilt, "--json")
    assert scored.code == 0, scored.output
    assert scored.report["tree_hash"] == logged[0]["tree_hash"] and scored.report["official"]


def test_an_existing_hill_is_not_overwritten(source, tmp_path):
    _, bundle_file = source
    assert run_cli("unbundle", bundle_file, "--into", tmp_path).code == 0
    again = run_cli("unbundle", bundle_file, "--into", tmp_path)
    assert again.code == 2
    assert f"hill '{NAME}' already exists" in again.error_lines[0]


def test_a_flipped_byte_in_the_pack_is_refused(source, tmp_path):
    _, bundle_file = source

    def flip(name, data):
        if name != "objects.pack":
            return name, data
        middle = len(data) // 2
        return name, data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1:]

    damaged = _rewrite(bundle_file, tmp_path / "flipped.hillbundle", flip)
    _refused(damaged, tmp_path / "into", "git objects do not check out")


def test_edited_private_data_is_refused_naming_the_file(source, tmp_path):
    _, bundle_file = source
    from testing.util import digest_of

    member = "data/" + digest_of(b"id,answer\n1,42\n").removeprefix("blake3:")
    edited = _rewrite(bundle_file, tmp_path / "edited.hillbundle",
                      lambda name, data: (name, b"id,answer\n1,43\n") if name == member else (name, data))
    message = _refused(edited, tmp_path / "into", "'private/answers.csv'", "private.lock")
    assert "found 15 bytes" in message


def test_an_edited_blob_is_refused_naming_blobs_lock(source, tmp_path):
    _, bundle_file = source
    from testing.util import digest_of

    member = "data/" + digest_of(bytes(range(256)) * 8).removeprefix("blake3:")
    edited = _rewrite(bundle_file, tmp_path / "blob.hillbundle",
                      lambda name, data: (name, data[:-1]) if name == member else (name, data))
    _refused(edited, tmp_path / "into", "'data/weights.bin'", "blobs.lock")


def test_a_manifest_naming_another_tree_is_refused(source, tmp_path):
    _, bundle_file = source

    def other_tree(name, data):
        if name != "hills-bundle.json":
            return name, data
        manifest = json.loads(data)
        manifest["tree_hash"] = "0" * 40
        return name, json.dumps(manifest).encode()

    _refused(_rewrite(bundle_file, tmp_path / "tree.hillbundle", other_tree), tmp_path / "into",
             "not the tree 000000000000")


def test_missing_and_extra_data_are_refused(source, tmp_path):
    _, bundle_file = source
    from testing.util import digest_of

    member = "data/" + digest_of(b"x\n").removeprefix("blake3:")
    dropped = _rewrite(bundle_file, tmp_path / "dropped.hillbundle",
                       lambda name, data: None if name == member else (name, data))
    _refused(dropped, tmp_path / "a", "lacks the data of 'private/same.txt'", "private.lock")
    extra = _rewrite(bundle_file, tmp_path / "extra.hillbundle",
                     lambda name, data: [(name, data), ("data/" + "ab" * 32, b"planted")] if name == member
                     else (name, data))
    _refused(extra, tmp_path / "b", "'data/" + "ab" * 32 + "'", "no lock")


def test_a_truncated_or_foreign_file_is_refused(source, tmp_path):
    _, bundle_file = source
    data = bundle_file.read_bytes()
    with tarfile.open(bundle_file) as archive:
        pack = archive.getmember("objects.pack")
    cut = tmp_path / "cut.hillbundle"
    cut.write_bytes(data[: pack.offset_data + pack.size // 2])
    _refused(cut, tmp_path / "a")
    foreign = tmp_path / "foreign.hillbundle"
    foreign.write_text("not a bundle\n")
    _refused(foreign, tmp_path / "b", "not a bundle file")
    missing = run_cli("unbundle", tmp_path / "nope.hillbundle")
    assert missing.code == 2 and "no bundle file" in missing.error_lines[0]


def test_bundle_refuses_private_data_that_left_its_lock(module_machine, tmp_path):
    with on_machine(module_machine):
        hill_dir = make_hill("drifted", SCORE_EVAL, private={"answers.csv": "1\n"})
        (hill_dir / "private" / "answers.csv").write_text("2\n")
        target = tmp_path / "drifted.hillbundle"
        result = run_cli("bundle", "drifted", "-o", target)
        assert result.code == 1, result.output
        assert "'private/answers.csv' does not match private.lock" in result.error_lines[0]
        assert not target.exists() and os.listdir(tmp_path) == []


def test_bundle_of_a_hill_without_commits_is_refused(project):
    assert run_cli("new", "fresh").code == 0
    result = run_cli("bundle", "fresh")
    assert result.code == 1 and "has no commits yet" in result.error_lines[0]


def test_bad_places_to_write_or_rebuild_are_usage_errors(source, tmp_path):
    _, bundle_file = source
    (tmp_path / "a-file").write_text("x")
    into = run_cli("unbundle", bundle_file, "--into", tmp_path / "a-file")
    assert into.code == 2 and "--into" in into.error_lines[0] and "is a file" in into.error_lines[0]
    out = run_cli("bundle", NAME, "-o", tmp_path / "missing" / "x.hillbundle")
    assert out.code == 2 and "does not exist" in out.error_lines[0]
    assert not (tmp_path / "missing").exists()


def test_unbundle_creates_the_folder_it_is_given(source, tmp_path):
    _, bundle_file = source
    into = tmp_path / "new" / "project"
    assert not into.parent.exists()
    result = run_cli("unbundle", bundle_file, "--into", into)
    assert result.code == 0, result.output
    assert Path(result.out.strip()) == into / ".hills" / NAME and (into / ".hills" / NAME / "hill.yaml").is_file()


def test_a_refused_bundle_leaves_no_folder_it_created(tmp_path):
    damaged = tmp_path / "damaged.hillbundle"
    damaged.write_bytes(b"not a bundle")
    result = run_cli("unbundle", damaged, "--into", tmp_path / "made" / "here")
    assert result.code in (1, 2), result.output
    assert result.error_lines and str(damaged) in result.error_lines[0]
    assert not (tmp_path / "made").exists()


def _forged(tmp_path, name, files, locks_text=None):
    """A bundle whose pack holds a commit of `files` (path: bytes, or
    ("link", target)) made by hand, and no data."""
    import subprocess

    repo = tmp_path / f"forge-{name}"
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    index = tmp_path / f"index-{name}"
    env = dict(os.environ, GIT_DIR=str(repo), GIT_INDEX_FILE=str(index))
    for rel, content in files.items():
        mode, data = ("120000", content[1].encode()) if isinstance(content, tuple) else ("100644", content)
        blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], input=data, env=env, capture_output=True,
                              check=True).stdout.decode().strip()
        subprocess.run(["git", "update-index", "--add", "--cacheinfo", f"{mode},{blob},{rel}"], env=env, check=True)
    tree = subprocess.run(["git", "write-tree"], env=env, capture_output=True, check=True).stdout.decode().strip()
    commit = subprocess.run(["git", "commit-tree", tree, "-m", "forged"], env=env, capture_output=True,
                            check=True).stdout.decode().strip()
    listed = subprocess.run(["git", "ls-tree", "-r", "-t", tree], env=env, capture_output=True,
                            check=True).stdout.decode().splitlines()
    objects = [commit, tree] + [line.split()[2] for line in listed]
    pack = subprocess.run(["git", "pack-objects", "--stdout", "-q"], input="\n".join(objects).encode() + b"\n",
                          env=env, capture_output=True, check=True).stdout
    manifest = json.dumps({"format": "hills-bundle", "version": 1, "hill": name, "commit": commit,
                           "tree_hash": tree}).encode()
    target = tmp_path / f"{name}.hillbundle"
    with tarfile.open(target, "w") as out:
        for member, data in (("hills-bundle.json", manifest), ("objects.pack", pack)):
            info = tarfile.TarInfo(member)
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))
    return target


@pytest.mark.parametrize("files, words", [
    ({"hill.yaml": b"x\n", ".vc/config": b"[core]\n\tfsmonitor = touch /tmp/owned\n"}, "inside a git dir ('.vc')"),
    ({"hill.yaml": b"x\n", "examples/a/.vc/config": b"[core]\n"}, "'examples/a/.vc/config', inside a git dir"),
    ({"hill.yaml": b"x\n", "private": ("link", "/etc")}, "is not a plain file"),
    ({"hill.yaml": b"x\n", "private.lock": b'version = 1\n[files."../../escape"]\nsize = 1\n'
                                           b'digest = "blake3:00"\n'}, "no place for a data file"),
])
def test_a_forged_tree_is_refused_before_anything_is_written(project, tmp_path, files, words):
    forged = _forged(tmp_path, "forged", files)
    _refused(forged, tmp_path / "into", words)
    assert not (tmp_path / "escape").exists()


# A bundle whose lock plants a repository in the hill: `.git/config` with
# an fsmonitor would run its command in the next git call under the hill
# (an eval's lineage of its example). Refused by name, at any depth and in
# any case, before a file is written.
PLANTED = b"[core]\n\tfsmonitor = touch /tmp/hills-planted-fsmonitor\n"


def _lock_listing(rel, data=PLANTED):
    from testing.util import digest_of

    return (f'version = 1\n[files."{rel}"]\nsize = {len(data)}\ndigest = "{digest_of(data)}"\n').encode()


@pytest.mark.parametrize("lock, rel", [
    ("blobs.lock", ".git/config"),
    ("blobs.lock", "examples/grid/.git/config"),
    ("blobs.lock", "data/.GIT/hooks/post-checkout"),
    ("blobs.lock", "data/.git./config"),
    ("private.lock", "private/.vc/config"),
])
def test_a_lock_listing_a_path_in_a_git_dir_is_refused_by_name(project, tmp_path, lock, rel):
    from testing.util import digest_of

    forged = _forged(tmp_path, "planted", {"hill.yaml": b"x\n", lock: _lock_listing(rel)})
    # The bundle carries the payload too, as a data member the lock names.
    with tarfile.open(forged, "a") as out:
        info = tarfile.TarInfo("data/" + digest_of(PLANTED).removeprefix("blake3:"))
        info.size = len(PLANTED)
        out.addfile(info, io.BytesIO(PLANTED))
    message = _refused(forged, tmp_path / "into", f"{lock} lists '{rel}'", "inside a git dir")
    assert "where hills writes no data file" in message
    assert not list((tmp_path / "into").iterdir()), "a refused bundle left something behind"


@pytest.mark.parametrize("neutral", [True, False])
def test_a_bundles_attributes_pick_no_driver_of_the_users_global_config(project, tmp_path, monkeypatch, neutral):
    # The user's global config defines a smudge filter; the bundle's
    # .gitattributes names it, so checking its files out would run it.
    marker = tmp_path / "smudged"
    home = Path(os.environ["HOME"])
    (home / ".gitconfig").write_text(f"[filter \"evil\"]\n\tsmudge = \"sh -c 'touch {marker}; cat'\"\n")
    if not neutral:
        from hills.base import git as git_module

        monkeypatch.setattr(git_module, "NEUTRAL_CONFIG", {})  # the control: git reads the user's config
    forged = _forged(tmp_path, "attributed", {"hill.yaml": b"x\n", ".gitattributes": b"* filter=evil\n",
                                              "eval.py": b"print(1)\n"})
    into = tmp_path / "into"
    into.mkdir()
    result = run_cli("unbundle", forged, "--into", into)
    assert result.code == 0, result.output
    assert (into / ".hills" / "attributed" / "eval.py").read_bytes() == b"print(1)\n"
    assert marker.exists() is not neutral, "the global smudge filter ran" if neutral else "the control proves nothing"
