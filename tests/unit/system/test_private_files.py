"""Nothing the tool writes follows a path another user controls: its folders are its
own (no symlink, no other owner, no other writer), its files are new (O_EXCL) and
replaced by rename."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from adaptyst_top.system import private_files as pf


def test_a_new_private_folder_is_0700(tmp_path: Path) -> None:
    d = pf.private_dir(tmp_path / "a" / "b")
    assert d.stat().st_mode & 0o777 == 0o700


def test_a_symlink_or_a_shared_folder_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(pf.UnsafePathError, match="symlink"):
        pf.private_dir(tmp_path / "link")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(pf.UnsafePathError, match="writable by others"):
        pf.private_dir(shared)


def test_write_private_replaces_a_planted_symlink_and_never_writes_through_it(
    tmp_path: Path,
) -> None:
    d = pf.private_dir(tmp_path / "cache")
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (d / "calibration.json").symlink_to(victim)
    pf.write_private(d / "calibration.json", b"{}")
    assert victim.read_text() == "precious"
    assert not (d / "calibration.json").is_symlink()
    assert (d / "calibration.json").stat().st_mode & 0o777 == 0o600


def test_private_logs_have_unpredictable_names(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(pf, "runtime_dir", lambda: pf.private_dir(tmp_path / "rt"))
    fd1, p1 = pf.private_log("command")
    fd2, p2 = pf.private_log("command")
    os.close(fd1)
    os.close(fd2)
    assert p1 != p2 and p1.stat().st_mode & 0o777 == 0o600
