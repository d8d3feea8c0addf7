"""Files and folders the tool writes, made so that no other user can steer them.

On a shared node `/tmp` and any folder another user can write to are hostile: a
pre-created symlink turns root's write into an overwrite of any file, a pre-created
folder hands another user our socket or cache. Every path the tool writes therefore
lies in a folder that we own, that nobody else can write to and that is not a
symlink; files are created new (O_EXCL, through mkstemp: never one that exists) and
replace others atomically by rename.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import secrets
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path


class UnsafePathError(OSError):
    """A path we were about to write is controlled, or could be, by someone else."""


def check_private_dir(path: Path) -> None:
    """Raise unless PATH is a real folder (no symlink) of ours that only we can write."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise UnsafePathError(f"{path}: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UnsafePathError(f"{path} is not a folder (a symlink or a file is there): not used")
    if st.st_uid != os.geteuid():
        raise UnsafePathError(f"{path} belongs to uid {st.st_uid}, not to us: not used")
    if st.st_mode & 0o022:
        raise UnsafePathError(
            f"{path} is writable by others (mode {st.st_mode & 0o777:o}): not used"
        )


def private_dir(path: Path, mode: int = 0o700) -> Path:
    """PATH made (MODE; parents as the umask allows) or found, and checked as ours."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(path, mode)
    except FileExistsError:
        pass
    except OSError as exc:
        raise UnsafePathError(f"cannot create {path}: {exc.strerror}") from None
    check_private_dir(path)
    return path


def write_private(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace PATH (in a private folder) with DATA atomically: a fresh O_EXCL file, renamed."""
    check_private_dir(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(data)
        os.rename(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/adaptyst-top (or ~/.cache/adaptyst-top), private."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return private_dir(Path(base) / "adaptyst-top")


def runtime_dir() -> Path:
    """Where sockets and a launched command's output go: /run/adaptyst-top for root,
    else $XDG_RUNTIME_DIR/adaptyst-top, else /tmp/adaptyst-top-UID, made by us and checked
    (a folder another user made first is never used: a fresh private one instead)."""
    if os.geteuid() == 0:
        # Searchable by all: other users' applications connect to root's sockets here.
        return private_dir(Path("/run/adaptyst-top"), 0o755)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return private_dir(Path(xdg) / "adaptyst-top")
    try:
        return private_dir(Path(tempfile.gettempdir()) / f"adaptyst-top-{os.getuid()}")
    except UnsafePathError:
        # Another user made it first (or put something there): never used, and never a
        # reason not to run. A fresh folder with an unpredictable name, ours alone.
        return _fresh_runtime_dir()


_FRESH: list[Path] = []


def _fresh_runtime_dir() -> Path:
    if not _FRESH:
        made = Path(tempfile.mkdtemp(prefix=f"adaptyst-top-{os.getuid()}-"))  # 0700
        _FRESH.append(made)
        atexit.register(shutil.rmtree, made, True)
    return _FRESH[0]


def private_log(prefix: str) -> tuple[int, Path]:
    """A new file (O_EXCL, mode 0600) with an unpredictable name in runtime_dir()."""
    fd, name = tempfile.mkstemp(dir=runtime_dir(), prefix=f"{prefix}-{os.getpid()}-", suffix=".log")
    return fd, Path(name)


def _others_may_write(st: os.stat_result) -> bool:
    # Root's folders count too: a link root made there (to a user's folder) would lead
    # through whatever that user planted, past every check made here.
    return st.st_uid != os.geteuid() or bool(st.st_mode & 0o022)


def open_for_writing(path: str, mode: int = 0o644) -> int:
    """PATH opened to write (created, or emptied), never through a link that someone
    else could have planted: the path is walked a folder at a time from a descriptor;
    in a folder another user can write (theirs, or /tmp), a symbolic link is refused,
    not followed, and an existing file must be ours, a plain file with one name. A FIFO
    without a reader is an error, not a wait."""
    folder, name = _folder_of(path)
    try:
        hostile = _others_may_write(os.fstat(folder))
        flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK
        fd = _open_in(folder, name, flags | (0 if hostile else os.O_TRUNC), path, mode)
    finally:
        os.close(folder)
    try:
        st = os.fstat(fd)
        # A character device is written as it is (/dev/null, a terminal): only root makes
        # one, and writing it truncates nothing.
        device = stat.S_ISCHR(st.st_mode)
        if (
            hostile
            and not device
            and (st.st_uid != os.geteuid() or st.st_nlink != 1 or not stat.S_ISREG(st.st_mode))
        ):
            raise UnsafePathError(
                f"{path}: not a regular file of yours, in a folder others may write: "
                "not overwritten"
            )
        if hostile and not device:
            os.ftruncate(fd, 0)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _folder_of(path: str) -> tuple[int, str]:
    """PATH's folder, opened a folder at a time from / (see open_for_writing), and the
    name in it."""
    parts = [p for p in os.path.abspath(path).split("/") if p]
    if not parts:
        raise UnsafePathError(f"{path}: not a file")
    folder = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts[:-1]:
            nxt = _open_in(folder, name, os.O_RDONLY | os.O_DIRECTORY, path)
            os.close(folder)
            folder = nxt
    except BaseException:
        os.close(folder)
        raise
    return folder, parts[-1]


@dataclass
class Replacement:
    """A file written under a new name beside PATH and renamed over it by commit(): a
    write that fails or is cut short leaves PATH as it was (or absent)."""

    fd: int
    folder: int
    temp: str
    name: str

    def commit(self) -> None:
        try:
            os.rename(self.temp, self.name, src_dir_fd=self.folder, dst_dir_fd=self.folder)
        finally:
            os.close(self.folder)

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.temp, dir_fd=self.folder)
        os.close(self.folder)


def open_for_replacing(path: str, mode: int = 0o644) -> Replacement:
    """A Replacement for PATH: a new file of a name no one could guess, created (never
    opened: O_EXCL) in PATH's folder, walked to as open_for_writing does. The rename
    replaces the name itself: a link planted at PATH is replaced, never followed."""
    folder, name = _folder_of(path)
    try:
        temp = f".{name}.{secrets.token_hex(8)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temp, flags, mode, dir_fd=folder)
    except BaseException:
        os.close(folder)
        raise
    return Replacement(fd, folder, temp, name)


def _open_in(folder: int, name: str, flags: int, path: str, mode: int = 0o777) -> int:
    hostile = _others_may_write(os.fstat(folder))
    try:
        return os.open(name, flags | (os.O_NOFOLLOW if hostile else 0), mode, dir_fd=folder)
    except OSError as exc:
        if hostile and exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(folder, name):
            raise UnsafePathError(
                f"{path}: {name} is a symbolic link in a folder another user can write: "
                "not followed"
            ) from None
        if exc.errno == errno.ENXIO:
            raise UnsafePathError(f"{path}: a FIFO with no reader: not waited for") from None
        raise


def _is_link(folder: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False
