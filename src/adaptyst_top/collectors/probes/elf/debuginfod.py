"""A debuginfod client: a stripped file's separate debug file fetched by its build ID
from the servers `DEBUGINFOD_URLS` names (elfutils' protocol: GET URL/buildid/ID/debuginfo),
kept in elfutils' own cache layout so that gdb, perf and this tool share one download.

Only when DEBUGINFOD_URLS is set: a node told of no server is never made to wait, and a
server that failed is not asked again by this process. The cache is the user's own
(DEBUGINFOD_CACHE_PATH, else $XDG_CACHE_HOME/debuginfod_client, else
~/.cache/debuginfod_client), made private; a download lands in a fresh file, renamed.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path

from adaptyst_top.system.private_files import UnsafePathError, check_private_dir, private_dir

URLS_ENV = "DEBUGINFOD_URLS"
TIMEOUT_S = 5.0  # a server that sends nothing for this long is given up (DEBUGINFOD_TIMEOUT)
MAX_BYTES = 1 << 30  # a debug file past this is not downloaded (DEBUGINFOD_MAXSIZE)
_BUILD_ID = re.compile(r"^[0-9a-f]{8,128}$")
_failed: set[tuple[str, str]] = set()  # (server, build ID) that answered nothing usable


def urls() -> list[str]:
    """The servers to ask, in order (none unless DEBUGINFOD_URLS names them)."""
    text = os.environ.get(URLS_ENV, "")
    return [u.rstrip("/") for u in text.split() if u.startswith(("http://", "https://"))]


def cache_root() -> Path:
    explicit = os.environ.get("DEBUGINFOD_CACHE_PATH")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "debuginfod_client"


def _env_number(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if 0 < value < 1e12 else default


def cached(build_id: str) -> str | None:
    """The debug file already in the cache (None: not there, or not ours)."""
    if not _BUILD_ID.match(build_id):
        return None
    folder = cache_root() / build_id
    path = folder / "debuginfo"
    try:
        check_private_dir(cache_root())
        check_private_dir(folder)
    except OSError:
        return None
    return str(path) if path.is_file() and not path.is_symlink() else None


def fetch(build_id: str) -> str | None:
    """The debug file of BUILD_ID (hex), from the cache or the first server that has
    it; None when no server is set, none has it, or the cache cannot be written."""
    if not _BUILD_ID.match(build_id):
        return None
    servers = urls()
    if not servers:
        return None
    hit = cached(build_id)
    if hit is not None:
        return hit
    timeout = _env_number("DEBUGINFOD_TIMEOUT", TIMEOUT_S)
    limit = int(_env_number("DEBUGINFOD_MAXSIZE", MAX_BYTES))
    for server in servers:
        if (server, build_id) in _failed:
            continue
        try:
            root = private_dir(cache_root())
        except (UnsafePathError, OSError):
            return None
        path = _download(f"{server}/buildid/{build_id}/debuginfo", root, build_id, timeout, limit)
        if path is not None:
            return path
        _failed.add((server, build_id))
    return None


def _download(url: str, root: Path, build_id: str, timeout: float, limit: int) -> str | None:
    import urllib.request  # here: http.client costs every launch 18 ms otherwise

    fd, tmp = tempfile.mkstemp(dir=root, prefix=f".{build_id}.")
    try:
        with os.fdopen(fd, "wb") as out:
            with urllib.request.urlopen(url, timeout=timeout) as answer:
                size = 0
                while chunk := answer.read(1 << 20):
                    size += len(chunk)
                    if size > limit:
                        raise OSError("larger than DEBUGINFOD_MAXSIZE")
                    out.write(chunk)
            if size < 4:
                raise OSError("empty answer")
        os.chmod(tmp, 0o600)
        final = private_dir(root / build_id) / "debuginfo"
        os.rename(tmp, final)
        return str(final)
    except (OSError, ValueError, TimeoutError):  # URLError is an OSError
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return None
