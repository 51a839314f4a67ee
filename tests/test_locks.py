"""Lock files and the stat cache (DESIGN section 4): the canonical encoding,
the blob rules, and verification of unchanged data without reading it."""

import json
import os

import pytest

from testing.util import digest_of, write_files
from hills.disk import locks
from hills.base.errors import Refused, UsageError

RULES = {"track": ["data/*.bin", "weights/**", "*.npz"], "threshold": 1000}


@pytest.fixture
def counted(monkeypatch):
    """Count the files whose bytes are read (every read goes through file_digest)."""
    calls = []
    real = locks.file_digest

    def counting(path):
        calls.append(os.path.basename(path))
        return real(path)

    monkeypatch.setattr(locks, "file_digest", counting)
    return calls


@pytest.fixture
def data_dir(tmp_path):
    contents = {"private/a.txt": b"alpha\n", "private/b.bin": os.urandom(4096), "private/sub/c.csv": b"x,y\n1,2\n"}
    return write_files(tmp_path / "hill", contents), contents


def test_hash_files_gives_size_and_blake3(data_dir, counted):
    folder, contents = data_dir
    entries = locks.hash_files(str(folder), locks.walk_private(str(folder)))
    assert entries == {rel: {"size": len(data), "digest": digest_of(data)} for rel, data in contents.items()}
    assert sorted(counted) == ["a.txt", "b.bin", "c.csv"]


def test_unchanged_files_are_not_read_again(data_dir, counted):
    folder, _contents = data_dir
    rels = locks.walk_private(str(folder))
    first = locks.hash_files(str(folder), rels)
    assert len(counted) == 3
    counted.clear()
    # A fresh cache object, as in a new process: loaded from machine state.
    assert locks.hash_files(str(folder), rels) == first
    assert counted == []
    cache = locks.StatCache(str(folder))
    locks.verify_disk(str(folder), locks.PRIVATE_LOCK, first, cache)
    assert counted == []


def test_touched_file_is_read_once(data_dir, counted):
    folder, _contents = data_dir
    rels = locks.walk_private(str(folder))
    first = locks.hash_files(str(folder), rels)
    counted.clear()
    target = folder / "private" / "a.txt"
    stat = target.stat()
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert locks.hash_files(str(folder), rels) == first
    assert counted == ["a.txt"]
    counted.clear()
    assert locks.hash_files(str(folder), rels) == first
    assert counted == []


def test_changed_content_is_caught(data_dir, counted):
    folder, _contents = data_dir
    rels = locks.walk_private(str(folder))
    expected = locks.hash_files(str(folder), rels)
    target = folder / "private" / "sub" / "c.csv"
    stat = target.stat()
    target.write_bytes(b"x,y\n9,9\n")  # same size
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the old mtime: ctime still moves
    counted.clear()
    with pytest.raises(Refused) as caught:
        locks.verify_disk(str(folder), locks.PRIVATE_LOCK, expected, locks.StatCache(str(folder)))
    assert caught.value.message == ("'private/sub/c.csv' does not match private.lock "
                                    "(its content changed since the hill was committed)")
    assert counted == ["c.csv"]


def test_verify_names_missing_and_added_files(data_dir):
    folder, _contents = data_dir
    rels = locks.walk_private(str(folder))
    expected = locks.hash_files(str(folder), rels)
    (folder / "private" / "extra.txt").write_text("new\n")
    with pytest.raises(Refused) as caught:
        locks.verify_disk(str(folder), locks.PRIVATE_LOCK, expected, locks.StatCache(str(folder)))
    assert caught.value.message == ("'private/extra.txt' is not listed in private.lock "
                                    "(added since the hill was committed)")
    (folder / "private" / "extra.txt").unlink()
    (folder / "private" / "a.txt").unlink()
    with pytest.raises(Refused) as caught:
        locks.verify_disk(str(folder), locks.PRIVATE_LOCK, expected, locks.StatCache(str(folder)))
    assert caught.value.message == "'private/a.txt' is listed in private.lock but missing on disk"


@pytest.mark.parametrize("lock_name, rel", [(locks.PRIVATE_LOCK, "private/a.txt"), (locks.BLOBS_LOCK, "weights.bin")])
def test_a_locked_file_replaced_by_a_link_to_the_same_bytes_is_refused(data_dir, tmp_path, lock_name, rel):
    folder, _contents = data_dir
    (folder / "weights.bin").write_bytes(b"\0" * 64)
    expected = locks.hash_files(str(folder), [rel])
    copy = tmp_path / "copy"
    copy.write_bytes((folder / rel).read_bytes())
    (folder / rel).unlink()
    (folder / rel).symlink_to(copy)
    with pytest.raises(Refused) as caught:
        locks.verify_disk(str(folder), lock_name, expected, locks.StatCache(str(folder)))
    assert caught.value.message == f"'{rel}' is listed in {lock_name} but is now a symbolic link"
    assert caught.value.hint == "put the plain file back in its place: a hill holds no links"


def test_a_link_added_to_private_is_refused_as_drift(data_dir):
    folder, _contents = data_dir
    expected = locks.hash_files(str(folder), locks.walk_private(str(folder)))
    (folder / "private" / "link").symlink_to(folder / "private" / "a.txt")
    with pytest.raises(Refused) as caught:  # not UsageError: it is drift, as hills-eval reports it
        locks.verify_disk(str(folder), locks.PRIVATE_LOCK, expected, locks.StatCache(str(folder)))
    assert caught.value.message == "'private/link' is a symbolic link" and caught.value.hint
    links = []
    assert "private/link" not in locks.walk_private(str(folder), links) and links == ["private/link"]


def tamper(cache_path, change):
    document = json.loads(cache_path.read_text())
    change(document)
    cache_path.write_text(json.dumps(document))


def test_edited_cache_is_ignored(data_dir, counted):
    folder, contents = data_dir
    rels = locks.walk_private(str(folder))
    locks.hash_files(str(folder), rels)
    cache_path = locks.StatCache(str(folder)).path
    assert cache_path.startswith(os.environ["HILLS_HOME"])
    assert oct(os.stat(cache_path).st_mode & 0o777) == "0o600"
    full = str(folder / "private" / "a.txt")
    forged = "blake3:" + "0" * 64

    def forge(document):
        document["entries"][full][4] = forged

    tamper(type(folder)(cache_path), forge)
    counted.clear()
    entries = locks.hash_files(str(folder), rels)
    # The HMAC no longer matches: the whole cache is dropped and rebuilt.
    assert entries["private/a.txt"]["digest"] == digest_of(contents["private/a.txt"])
    assert sorted(counted) == ["a.txt", "b.bin", "c.csv"]
    counted.clear()
    assert locks.hash_files(str(folder), rels) == entries
    assert counted == []


def test_cache_forged_with_a_recomputed_mac_under_another_key_is_ignored(data_dir, counted, tmp_path):
    folder, contents = data_dir
    rels = locks.walk_private(str(folder))
    locks.hash_files(str(folder), rels)
    cache_path = locks.StatCache(str(folder)).path
    # Someone without the machine key rewrites the cache under their own key.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HILLS_HOME", str(tmp_path / "attacker"))
        forged = locks.StatCache(str(folder))
        with open(cache_path) as handle:
            forged.entries = json.load(handle)["entries"]
        for entry in forged.entries.values():
            entry[4] = "blake3:" + "f" * 64
        forged.dirty = True
        forged.save()
        os.replace(forged.path, cache_path)
    counted.clear()
    entries = locks.hash_files(str(folder), rels)
    assert entries["private/b.bin"]["digest"] == digest_of(contents["private/b.bin"])
    assert len(counted) == 3


@pytest.mark.parametrize("garbage", ["", "not json", "[]", '{"entries": {}}', '{"entries": 1, "mac": "x"}'])
def test_corrupt_cache_is_ignored(data_dir, counted, garbage):
    folder, _contents = data_dir
    rels = locks.walk_private(str(folder))
    expected = locks.hash_files(str(folder), rels)
    with open(locks.StatCache(str(folder)).path, "w") as handle:
        handle.write(garbage)
    counted.clear()
    assert locks.hash_files(str(folder), rels) == expected
    assert len(counted) == 3


def test_encode_is_canonical():
    entries = {"private/z": {"size": 1, "digest": "blake3:cd"}, "private/a b": {"size": 3, "digest": "blake3:ab"}}
    text = locks.encode(entries)
    assert text == ('version = 1\n\n[files."private/a b"]\nsize = 3\ndigest = "blake3:ab"\n\n'
                    '[files."private/z"]\nsize = 1\ndigest = "blake3:cd"\n')
    assert locks.encode(dict(reversed(list(entries.items())))) == text
    assert locks.decode(text, "private.lock") == entries
    assert locks.encode({}) == "version = 1\n\n[files]\n"


@pytest.mark.parametrize("text, words", [
    ("version = 2\n", "'private.lock': key 'version': expected 1, got 2"),
    ("version = 1\nextra = 1\n", "'private.lock': unknown key 'extra'"),
    ('version = 1\n[files."a"]\nsize = "3"\ndigest = "blake3:00"\n', "key 'files.\"a\"': expected size (integer)"),
    ('version = 1\n[files."a"]\nsize = 3\ndigest = "sha256:00"\n', "digest ('blake3:...')"),
    ("version = \n", "'private.lock': not valid TOML"),
])
def test_decode_errors_name_the_file_and_key(text, words):
    with pytest.raises(UsageError) as caught:
        locks.decode(text, "private.lock")
    assert words in caught.value.message


@pytest.mark.parametrize("path, size, blob", [
    ("data/x.bin", 1, True), ("weights/a/b.pt", 1, True), ("other/x.bin", 1, False),
    ("deep/arrays.npz", 1, True), ("eval.py", 999, False), ("eval.py", 1000, True), ("data/x.txt", 5, False),
])
def test_blob_rules(path, size, blob):
    assert locks.is_blob(path, size, RULES) is blob


def test_symlink_in_private_is_refused(data_dir):
    folder, _contents = data_dir
    (folder / "private" / "link").symlink_to(folder / "private" / "a.txt")
    with pytest.raises(UsageError) as caught:
        locks.walk_private(str(folder))
    assert caught.value.message == "'private/link' is a symbolic link"
