"""The learner's models kept between runs of an application (as StarPU keeps its
per-machine performance models): read when the monitor's advisor starts, written when
the session ends. One private file per application and node, under the user's cache:
`$XDG_CACHE_HOME/adaptyst-top/models/APP@HOST.json`. A file another user could steer is
never read or written (system/private_files.py); a damaged one is not used, and says
so in one line."""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adaptyst_top.system.private_files import (
    UnsafePathError,
    cache_dir,
    check_private_dir,
    private_dir,
    write_private,
)
from adaptyst_top.system.process_names import app_name, process_name

if TYPE_CHECKING:  # the advisor's numpy, imported when it starts
    from adaptyst_top.placement.learned_advisor import LearnedAdvisor

VERSION = 2  # 1 kept the advisor's models: not read since the learner replaced it
DIR_ENV = "ADAPTYST_TOP_MODELS"  # another folder for them (the tests use their own)
MAX_BYTES = 4 << 20  # a kept file larger than this is not ours to parse
_UNSAFE = re.compile(r"[^A-Za-z0-9._+@-]")


def app_of(command: Sequence[str], pid: int | None) -> str | None:
    """Whose models these are: the launched command's, or the target process's; another
    user's process (root watching it) has its owner in the name: one user's runs of
    `solver` never place another's (issue 74's newcomer found root's cache shared)."""
    if command:
        return app_name(command)
    if pid is None:
        return None
    name = process_name(pid)
    try:
        owner = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return name
    return name if name is None or owner == os.geteuid() else f"{name} (uid {owner})"


def kept_models(app: str | None, placer: LearnedAdvisor) -> tuple[Callable[[], object] | None, str]:
    """APP's kept models given to PLACER; what keeps this run's when it ends, and a line
    on what was read (for the advisor's state line)."""
    if app is None:
        return None, ""
    try:
        path = models_path(app)
    except OSError as exc:
        return None, f"models not kept: {exc}"
    data, why = load_models(path)
    if data is not None:
        why = placer.from_json(data)
        why = None if why is None else f"kept models not read: {path}: {why}"
    taken = placer.learned_count()
    line = why or (f"{taken} model(s) from earlier runs of {app}" if taken else "")
    return (lambda: save_models(path, placer.to_json())), line


def models_path(app: str, host: str | None = None) -> Path:
    """Where APP's models on this node are kept (the name made safe for a file)."""
    name = _UNSAFE.sub("_", f"{app}@{host or socket.gethostname()}")[:200]
    folder = os.environ.get(DIR_ENV)
    return (Path(folder) if folder else cache_dir() / "models") / f"{name}.json"


def load_models(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """What is kept at PATH, and a line saying why nothing was used (None: fine, or no
    file yet)."""
    if not os.path.lexists(path.parent):
        return None, None  # nothing kept yet
    try:
        check_private_dir(path.parent)
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return None, None
    except UnsafePathError as exc:
        return None, f"kept models not read: {exc}"
    except OSError as exc:
        return None, f"kept models not read: {path}: {exc.strerror}"
    if len(raw) > MAX_BYTES:
        return None, f"kept models not read: {path} is over {MAX_BYTES >> 20} MiB"
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None, f"kept models not read: {path} is not JSON"
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return None, f"kept models not read: {path} is not a version {VERSION} models file"
    return data, None


def save_models(path: Path, kept: dict[str, Any]) -> str | None:
    """Keep KEPT (LearnedAdvisor.to_json) at PATH, replaced atomically; a line saying
    why not, or None."""
    data = {"version": VERSION, **kept}
    try:
        private_dir(path.parent)
        write_private(path, json.dumps(data, allow_nan=False).encode())
    except (OSError, ValueError) as exc:
        return f"models not kept: {exc}"
    return None


__all__ = ["app_name", "app_of", "kept_models", "load_models", "models_path", "save_models"]
