"""Files and folders the tool writes, made so that no other user can steer them.

On a shared node `/tmp` and any folder another user can write to are hostile: a
pre-created symlink turns root's write into an overwrite of any file, a pre-created
folder hands another user our socket or cache. Every path the tool writes therefore
lies in a folder that we own, that nobody else can write to and that is not a
symlink; files are created new (O_EXCL, through mkstemp: never one that exists) and
replace others atomically by rename.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
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
    (a folder another user made first is refused, never used)."""
    if os.geteuid() == 0:
        # Searchable by all: other users' applications connect to root's sockets here.
        return private_dir(Path("/run/adaptyst-top"), 0o755)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return private_dir(Path(xdg) / "adaptyst-top")
    return private_dir(Path(tempfile.gettempdir()) / f"adaptyst-top-{os.getuid()}")


def private_log(prefix: str) -> tuple[int, Path]:
    """A new file (O_EXCL, mode 0600) with an unpredictable name in runtime_dir()."""
    fd, name = tempfile.mkstemp(dir=runtime_dir(), prefix=f"{prefix}-{os.getpid()}-", suffix=".log")
    return fd, Path(name)
