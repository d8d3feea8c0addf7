"""A TOML file read as a config file should be: a regular file of sane size (a FIFO
there never hangs the reader, a device is never read), parsed with its nesting bounded
by the parser's recursion (5,000 levels are an error, not a traceback)."""

from __future__ import annotations

import os
import stat
import sys
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

MAX_BYTES = 1 << 20  # a config is a few hundred bytes; this is far past any real one


def read_toml(path: str | os.PathLike[str]) -> tuple[str, dict[str, Any]]:
    """PATH's text and its table; ValueError, in one line naming PATH, for anything
    that keeps it from being a config file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path}: not a regular file")
        data = os.read(fd, MAX_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise ValueError(f"{path}: larger than {MAX_BYTES} bytes: not a config file")
    try:
        text = data.decode("utf-8")
        return text, tomllib.loads(text)
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: {exc}") from None
    except RecursionError:
        raise ValueError(f"{path}: nested too deeply to be a config file") from None
