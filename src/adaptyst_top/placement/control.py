"""The control channel: a Unix socket through which the monitor pushes device
assignments to the applications that registered.

The monitor listens (under $XDG_RUNTIME_DIR/adaptyst-top, or /run/adaptyst-top for
root); an application connects and says hello. Each side checks the other's
credentials (SO_PEERCRED): an application takes assignments only from root or from
its own user, and the monitor takes registrations only from processes of users it
may act for (root: anyone; otherwise its own user). Malformed messages are
rejected and logged; an application keeps running when the monitor goes away.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from adaptyst_top.placement.protocol import MAX_LINE, Message, ProtocolError, decode, encode
from adaptyst_top.system.line_socket import LineReader, listen, listening, peer_credentials
from adaptyst_top.system.private_files import runtime_dir

log = logging.getLogger("adaptyst_top.control")


CONTROL_ENV = "ADAPTYST_TOP_CONTROL"  # the monitor's socket, as it tells a command it launches


def server_socket_path() -> Path:
    """Where this monitor listens: in runtime_dir(), made and checked (a fresh private
    folder when another user squatted the conventional one). When another monitor of
    the same user already listens there (two demos, two --advisor sessions), a path of
    this process's own: the first keeps its socket, and a command this one launches is
    told where this one is (CONTROL_ENV). Decided once per process and user."""
    return _chosen_path(os.getpid(), os.geteuid(), os.environ.get("XDG_RUNTIME_DIR"))


@functools.cache
def _chosen_path(pid: int, euid: int, xdg: str | None) -> Path:
    conventional = runtime_dir() / "control.sock"
    if listening(conventional):
        return conventional.with_name(f"control-{pid}.sock")
    return conventional


def default_socket_path() -> Path:
    """Where an application looks for the monitor: where the monitor said (its launched
    command's environment), else the conventional place runtime_dir() makes."""
    if told := os.environ.get(CONTROL_ENV):
        return Path(told)
    if os.geteuid() == 0:
        return Path("/run/adaptyst-top/control.sock")
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / "adaptyst-top" / "control.sock"
    return Path(tempfile.gettempdir()) / f"adaptyst-top-{os.getuid()}" / "control.sock"


def allowed(peer_uid: int, own_uid: int) -> bool:
    return peer_uid == 0 or peer_uid == own_uid


def _lines(sock: socket.socket, stop: threading.Event) -> Iterator[bytes]:
    """Complete lines from a socket until STOP; an over-long line is dropped whole."""
    reader = LineReader(sock, MAX_LINE, lambda: log.warning("control: dropping an over-long line"))
    while not stop.is_set():
        try:
            line = reader.line()
        except TimeoutError:
            continue
        except (OSError, ProtocolError):
            return
        if line is None:
            return
        yield line


@dataclass
class Client:
    sock: socket.socket
    pid: int
    uid: int
    tasks: list[str] = field(default_factory=list)
    kernels: dict[str, list[str]] = field(default_factory=dict)  # task -> kernel globs
    registered: bool = False


def _wants(client: Client, task: str) -> bool:
    """A client that named no tasks takes every assignment (that it may have)."""
    return not client.tasks or task in client.tasks


def _owners(clients: list[Client]) -> dict[str, set[int]]:
    """Which users' applications named each task (SO_PEERCRED uids)."""
    named: dict[str, set[int]] = {}
    for c in clients:
        if c.registered:
            for t in c.tasks:
                named.setdefault(t, set()).add(c.uid)
    return named


def _may_have(client: Client, task: str, owners: dict[str, set[int]]) -> bool:
    """Whether an assignment of TASK may go to CLIENT. Root's monitor serves every
    user's applications: another user's gets only a task its own user alone named (an
    application that names none gets none), so no user learns where another's tasks
    run, or is moved by them. The monitor's own user's and root's get all."""
    if client.uid in (0, os.geteuid()):
        return _wants(client, task)
    return task in client.tasks and owners.get(task) == {client.uid}


class ControlServer:
    """The monitor's side."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or server_socket_path()
        self.clients: list[Client] = []
        self.rejected: list[str] = []  # reasons, newest last (bounded)
        self.acks: list[tuple[int, str, str]] = []
        # The standing assignment per task (exploration excluded: it is temporary), sent
        # to an application when it registers, so one that connects late, or after the
        # monitor restarted, is not left on its default until the next change.
        self.assignments: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()
        # Held across a push or a registration and its sends, so that every application
        # sees assignments in the order they were made (never an older one last).
        self._send_lock = threading.Lock()
        self._stop = threading.Event()
        # A folder another user made (or a symlink) is refused: it would own our socket.
        # Applications of other users may connect; what they may do is checked per peer.
        mode = 0o755 if os.geteuid() == 0 else 0o700
        self.sock = listen(self.path, folder_mode=mode, backlog=16)
        self._inode = os.stat(self.path).st_ino  # close() unlinks only this socket
        self.sock.settimeout(0.2)
        self._thread = threading.Thread(target=self._accept, name="control-accept", daemon=True)
        self._thread.start()

    def _reject(self, why: str) -> None:
        log.warning("control: rejected: %s", why)
        with self._lock:
            self.rejected = [*self.rejected, why][-100:]

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            pid, uid, _gid = peer_credentials(conn)
            if not allowed(uid, os.geteuid()) and os.geteuid() != 0:
                self._reject(
                    f"pid {pid} uid {uid}: not allowed to register with uid {os.geteuid()}"
                )
                conn.close()
                continue
            conn.settimeout(0.5)
            client = Client(conn, pid, uid)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: Client) -> None:
        with self._lock:
            self.clients.append(client)
        for line in _lines(client.sock, self._stop):
            try:
                msg = decode(line)
            except ProtocolError as exc:
                self._reject(f"pid {client.pid}: {exc}")
                continue
            if msg.type == "hello":
                if msg.fields["pid"] != client.pid:
                    self._reject(f"pid {client.pid} claims to be {msg.fields['pid']}")
                    continue
                self._register(client, msg.fields["tasks"], msg.fields["kernels"])
            elif msg.type == "ack":
                with self._lock:
                    ack = (client.pid, msg.fields["task"], msg.fields["device"])
                    self.acks = [*self.acks, ack][-100:]
            else:
                self._reject(f"pid {client.pid}: unexpected {msg.type}")
        with self._lock:
            if client in self.clients:
                self.clients.remove(client)
        client.sock.close()

    def _register(self, client: Client, tasks: list[str], kernels: dict[str, list[str]]) -> None:
        with self._send_lock:
            with self._lock:
                client.tasks, client.kernels, client.registered = tasks, kernels, True
                owners = _owners(self.clients)
                standing = [
                    (t, d, r)
                    for t, (d, r) in self.assignments.items()
                    if _may_have(client, t, owners)
                ]
            for task, device, reason in standing:
                with contextlib.suppress(OSError):
                    client.sock.sendall(encode("assign", task=task, device=device, reason=reason))

    def kernel_marks(self) -> dict[str, tuple[str, ...]]:
        """Each task's kernel globs, from the applications that may have the task (as
        for its assignments: another user's application marks none of this one's)."""
        marks: dict[str, set[str]] = {}
        with self._lock:
            owners = _owners(self.clients)
            for c in self.clients:
                for task, globs in c.kernels.items() if c.registered else ():
                    if _may_have(c, task, owners):
                        marks.setdefault(task, set()).update(globs)
        return {t: tuple(sorted(g)) for t, g in marks.items()}

    def push(self, task: str, device: str, reason: str = "", runs: int | None = None) -> int:
        """Send an assignment to every registered application with that task; how many.
        With runs, the application goes back after that many executions (exploration);
        without, it becomes the task's standing assignment, also sent to applications
        that register later."""
        extra = {} if runs is None else {"runs": runs}
        data = encode("assign", task=task, device=device, reason=reason[:512], **extra)
        sent = 0
        with self._send_lock:
            with self._lock:
                if runs is None:
                    self.assignments[task] = (device, reason[:512])
                owners = _owners(self.clients)
                targets = [c for c in self.clients if c.registered and _may_have(c, task, owners)]
            for c in targets:
                try:
                    c.sock.sendall(data)
                    sent += 1
                except OSError:
                    pass
        return sent

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self.sock.close()
        with self._lock:
            for c in self.clients:
                with contextlib.suppress(OSError):
                    c.sock.close()
        with contextlib.suppress(FileNotFoundError):
            if os.stat(self.path).st_ino == self._inode:  # not one another monitor made since
                self.path.unlink()


class ControlClient:
    """The application's side: connects when a monitor listens, reconnects when it comes
    back, and keeps the last assignments when it goes."""

    def __init__(
        self,
        tasks: list[str],
        on_assign: Callable[[str, str, int | None], None],
        path: Path | None = None,
        retry_s: float = 2.0,
        kernels: dict[str, list[str]] | None = None,
    ) -> None:
        """KERNELS: globs over each task's device kernels (its runs on an accelerator
        are then timed by their device time)."""
        self.path = path or default_socket_path()
        self.tasks = tasks
        self.kernels = kernels or {}
        self.on_assign = on_assign
        self.retry_s = retry_s
        self.connected = False
        self.rejected: list[str] = []
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        # The hello and set_tasks() under one lock: a task added while the connection's
        # first hello went out would otherwise never reach the monitor (seen under load:
        # the demo's fourth task never moved).
        self._hello_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="adaptyst-control", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):  # the monitor went away: try again later
                self._session()
            self.connected = False
            self._stop.wait(self.retry_s)

    def _session(self) -> None:
        if not self.path.exists():
            return
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(0.5)
        sock.connect(str(self.path))
        _pid, uid, _gid = peer_credentials(sock)
        if not allowed(uid, os.geteuid()):
            self._reject(f"monitor uid {uid} is neither root nor uid {os.geteuid()}: ignored")
            sock.close()
            return
        with self._hello_lock:
            self._sock = sock
            sock.sendall(self._hello())
            self.connected = True
        for line in _lines(sock, self._stop):
            try:
                msg = decode(line)
            except ProtocolError as exc:
                self._reject(str(exc))
                continue
            if msg.type != "assign":
                self._reject(f"unexpected {msg.type}")
                continue
            self.on_assign(msg.fields["task"], msg.fields["device"], msg.fields["runs"])
            with contextlib.suppress(OSError):
                sock.sendall(encode("ack", task=msg.fields["task"], device=msg.fields["device"]))
        sock.close()

    def _hello(self) -> bytes:
        marks = {t: g for t, g in self.kernels.items() if t in self.tasks}
        extra = {"kernels": marks} if marks else {}
        return encode("hello", pid=os.getpid(), tasks=self.tasks, **extra)

    def set_tasks(self, tasks: list[str], kernels: dict[str, list[str]] | None = None) -> None:
        """Tell the monitor about new tasks (a second hello on the same connection)."""
        with self._hello_lock:
            self.tasks = tasks
            if kernels is not None:
                self.kernels = kernels
            if self.connected and self._sock is not None:
                with contextlib.suppress(OSError):
                    self._sock.sendall(self._hello())

    def _reject(self, why: str) -> None:
        log.warning("adaptyst control: %s", why)
        self.rejected = [*self.rejected, why][-100:]

    def close(self) -> None:
        self._stop.set()
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()


__all__ = [
    "CONTROL_ENV",
    "ControlClient",
    "ControlServer",
    "Message",
    "default_socket_path",
    "server_socket_path",
]
