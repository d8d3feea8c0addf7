"""Nothing the tool writes follows a path another user controls: its folders are its
own (no symlink, no other owner, no other writer), its files are new (O_EXCL) and
replaced by rename."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from adaptyst_top.system import private_files as pf
from tests.support.as_user import run_as
from tests.support.marks import IS_ROOT

NOBODY = 65534


@pytest.mark.skipif(not IS_ROOT, reason="chown needs root")
def test_a_folder_another_user_made_first_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(pf.UnsafePathError, match="belongs to uid 65534"):
        pf.private_dir(theirs)


@pytest.mark.skipif(not IS_ROOT, reason="switching users needs root")
def test_a_users_fallback_runtime_folder_made_by_someone_else_is_not_used() -> None:
    """Without XDG_RUNTIME_DIR a user's sockets go to /tmp/adaptyst-top-UID: another
    user who creates it first must neither own them nor keep the monitor from running."""
    squat = Path(tempfile.gettempdir()) / f"adaptyst-top-{NOBODY}"
    if squat.is_symlink() or squat.is_file():
        squat.unlink()
    shutil.rmtree(squat, ignore_errors=True)
    squat.mkdir(mode=0o777)  # made by root (the "other user" here)
    squat.chmod(0o777)

    def serve() -> bytes:
        os.environ.pop("XDG_RUNTIME_DIR", None)
        from adaptyst_top.placement.control import ControlServer

        server = ControlServer()
        where = Path(server.path).parent
        st = where.stat()
        said = f"{where} {st.st_uid} {st.st_mode & 0o777:o}"
        server.close()
        return said.encode()

    try:
        code, out = run_as(NOBODY, serve)
    finally:
        shutil.rmtree(squat, ignore_errors=True)  # never leave a world-writable folder
    said = out.decode()
    assert code == 0, said
    folder, uid, mode = said.split()
    assert Path(folder) != squat and Path(folder).name.startswith(f"adaptyst-top-{NOBODY}-")
    assert (int(uid), mode) == (NOBODY, "700")


@pytest.mark.skipif(not IS_ROOT, reason="a second user needs root")
def test_roots_output_never_follows_a_link_another_user_planted(tmp_path: Path) -> None:
    """Root records into a folder a user owns: a symlink the user put at the file, or at a
    folder on the way, would turn root's write into an overwrite of a root-only file."""
    from adaptyst_top.runtime.record_file import open_output

    vault = tmp_path / "vault"
    vault.mkdir(mode=0o700)
    secret = vault / "secret"
    secret.write_text("root's\n")
    secret.chmod(0o600)
    shared = Path(tempfile.mkdtemp(prefix="adt-out-"))
    shared.chmod(0o755)
    users = shared / "users"
    users.mkdir()
    os.chown(users, NOBODY, NOBODY)

    def plant() -> bytes:
        (users / "out.jsonl").symlink_to(secret)
        (users / "sub").symlink_to(vault)
        (users / "mine.jsonl").write_text("x")
        os.link(users / "mine.jsonl", users / "second-name.jsonl")
        return b"ok"

    try:
        assert run_as(NOBODY, plant) == (0, b"ok")
        for name in ("out.jsonl", "sub/secret", "mine.jsonl", "second-name.jsonl"):
            with pytest.raises(pf.UnsafePathError) as got:
                open_output(str(users / name))
            assert "\n" not in str(got.value) and str(users / name) in str(got.value)
        assert secret.read_text() == "root's\n"
        assert (users / "mine.jsonl").read_text() == "x"
        # A file new to the folder is written; so is one through root's own link.
        with open_output(str(users / "new.jsonl")) as f:
            f.write("{}\n")
        (shared / "mine").symlink_to(tmp_path)
        with open_output(str(shared / "mine" / "ok.jsonl")) as f:
            f.write("{}\n")
        assert (tmp_path / "ok.jsonl").read_text() == "{}\n"
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.skipif(not IS_ROOT, reason="needs root to become another user")
def test_a_user_may_record_to_the_null_device_not_to_a_planted_file(tmp_path: Path) -> None:
    """/dev is root's: its null device is written as asked. In a folder others may write,
    a file that is not a regular one of the user's own is still refused, in one line."""
    from adaptyst_top.runtime.record_file import open_output

    shared = Path(tempfile.mkdtemp(prefix="adt-out-"))
    shared.chmod(0o777)  # not sticky: the kernel's protected_fifos/regular stay out of it
    os.mkfifo(shared / "fifo")  # root's, in a folder anyone may write
    (shared / "fifo").chmod(0o666)
    (shared / "roots.jsonl").write_text("root's\n")
    (shared / "roots.jsonl").chmod(0o666)
    # A link root made in a folder of its own, to a name in the shared folder where
    # another user put a link of theirs: never followed, root's folder or not.
    roots = Path(tempfile.mkdtemp(prefix="adt-roots-"))
    roots.chmod(0o755)
    (shared / "planted.jsonl").symlink_to(shared / "roots.jsonl")
    (roots / "latest.jsonl").symlink_to(shared / "planted.jsonl")

    def write() -> bytes:
        with open_output("/dev/null") as f:
            f.write("{}\n")
        said = []
        for path in (shared / "fifo", shared / "roots.jsonl", roots / "latest.jsonl"):
            try:
                open_output(str(path))
            except pf.UnsafePathError as exc:
                said.append(str(exc))
        return "\n".join(said).encode()

    try:
        code, said = run_as(NOBODY, write)
        assert code == 0, said
        assert said.decode().splitlines() == [
            f"{shared / 'fifo'}: a FIFO with no reader: not waited for",
            f"{shared / 'roots.jsonl'}: not a regular file of yours, in a folder others may "
            "write: not overwritten",
            f"{roots / 'latest.jsonl'}: latest.jsonl is a symbolic link in a folder another "
            "user can write: not followed",
        ]
        assert (shared / "roots.jsonl").read_text() == "root's\n"
        done = subprocess.run(
            [sys.executable, "-m", "adaptyst_top.cli.start", "record", "--out", "/dev/null",
             "--duration", "0.5", "--", "true"],
            capture_output=True, text=True, timeout=60, user=NOBODY, group=NOBODY, extra_groups=[],
            env={"PATH": os.environ["PATH"]},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    finally:
        shutil.rmtree(shared, ignore_errors=True)
        shutil.rmtree(roots, ignore_errors=True)
