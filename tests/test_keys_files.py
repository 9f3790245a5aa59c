"""Key files and state files: created private and atomic, never through a planted symlink."""

from __future__ import annotations

import os
import stat

import pytest

from table import files, keys


def test_write_atomic_refuses_a_symlink_planted_at_its_temporary_path(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_text("do not touch")
    target = tmp_path / "journal.head"
    monkeypatch.setattr(files.secrets, "token_hex", lambda n: "fixed")
    (tmp_path / ".journal.head.fixed.tmp").symlink_to(victim)
    with pytest.raises(files.UnsafeFile):
        files.write_atomic(target, b"new head")
    assert victim.read_text() == "do not touch"
    assert not target.exists()


def test_write_atomic_creates_the_file_0600_and_replaces_whole(tmp_path):
    target = tmp_path / "state.json"
    files.write_atomic(target, b"one")
    files.write_atomic(target, b"two")
    assert target.read_bytes() == b"two"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temporary left behind


def test_read_regular_does_not_follow_a_symlink(tmp_path):
    real = tmp_path / "real"
    real.write_bytes(b"x")
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(files.UnsafeFile):
        files.read_regular(link)


def test_unsafe_permissions_names_a_world_writable_file_and_folder(tmp_path):
    f = tmp_path / "table.toml"
    f.write_text("")
    f.chmod(0o644)
    assert files.unsafe_permissions(f) is None
    f.chmod(0o646)
    assert "writable by every user" in files.unsafe_permissions(f)
    f.chmod(0o644)
    tmp_path.chmod(0o777)
    try:
        assert "folder" in files.unsafe_permissions(f)
    finally:
        tmp_path.chmod(0o755)


def test_a_key_readable_by_others_is_refused(tmp_path):
    k = keys.generate()
    path, pub = keys.save(k, tmp_path / "table.key")
    assert keys.load_private_key(path).key_id == k.key_id
    assert keys.key_id(keys.load_public_key(pub)) == k.key_id
    os.chmod(path, 0o644)
    with pytest.raises(keys.KeyFileError, match="chmod 600"):
        keys.load_private_key(path)


def test_save_refuses_to_overwrite_a_key(tmp_path):
    path, _ = keys.save(keys.generate(), tmp_path / "table.key")
    with pytest.raises(FileExistsError):
        keys.save(keys.generate(), path)


def test_the_table_key_comes_from_systemd_credentials(tmp_path):
    creds = tmp_path / "creds"
    creds.mkdir()
    k = keys.generate()
    keys.save(k, creds / keys.CREDENTIAL_NAME)
    got = keys.load_table_key(environ={"CREDENTIALS_DIRECTORY": str(creds)})
    assert got.key_id == k.key_id and got.source == f"credential:{keys.CREDENTIAL_NAME}"
    with pytest.raises(keys.KeyFileError, match="no table key"):
        keys.load_table_key(environ={})


def test_derived_keys_differ_per_context_and_signatures_verify():
    k = keys.generate()
    assert k.derive("journal-seal/1", b"r1") != k.derive("journal-seal/1", b"r2")
    assert k.derive("journal-seal/1", b"r1") == k.derive("journal-seal/1", b"r1")
    sig = k.sign(b"head")
    assert keys.verify_signature(k.public, sig, b"head")
    assert not keys.verify_signature(k.public, sig, b"head!")
    assert not keys.verify_signature(keys.generate().public, sig, b"head")
