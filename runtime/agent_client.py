"""A client of the node agent: the session's probes attach in the agent (root), this
process holds no bcc and no BPF object; snapshots come over the socket in the record
format. The agent is reached at its socket on this node, or on another node through
`ssh NODE adaptyst-top bridge` (SSH authenticates; nothing new listens on the network).
A restarted agent or a broken connection is found again: the session is opened anew,
its probes re-added, and the next snapshot says so."""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import socket
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, NoReturn

from adaptyst_top.collectors.inert import inert
from adaptyst_top.collectors.probe_spec import ProbeSpecError, parse_spec
from adaptyst_top.collectors.snapshot import ProbeRef, Snapshot, SnapshotError
from adaptyst_top.runtime import agent_protocol as proto
from adaptyst_top.runtime.listing import Candidate

CONNECT_TIMEOUT_S = 5.0
ANSWER_TIMEOUT_S = 300.0  # an open waits for the probes to attach (a wide glob: minutes)


SSH_ENV = "ADAPTYST_TOP_SSH"  # the ssh command and its options ("ssh" by default)
REMOTE_ENV = "ADAPTYST_TOP_REMOTE"  # adaptyst-top's path on the other node


class Transport(ABC):
    """Bytes to and from the agent, with a timeout on each wait."""

    timeout: float = CONNECT_TIMEOUT_S

    @abstractmethod
    def send(self, data: bytes) -> None: ...

    @abstractmethod
    def recv(self, size: int) -> bytes: ...

    @abstractmethod
    def close(self) -> None: ...


class SocketTransport(Transport):
    def __init__(self, path: str) -> None:
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while True:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(CONNECT_TIMEOUT_S)
            try:
                self.sock.connect(path)
                return
            except BlockingIOError:
                # The agent's queue is full (another user's connect flood): it drains
                # the queue at once, so a moment later there is room.
                self.sock.close()
                if time.monotonic() < deadline:
                    time.sleep(0.01)
                    continue
                raise AgentUnavailable(f"the agent at {path} is too busy: try later") from None
            except OSError as exc:
                self.sock.close()
                raise AgentUnavailable(f"no agent at {path}: {exc.strerror or exc}") from None

    def send(self, data: bytes) -> None:
        self.sock.settimeout(self.timeout)
        self.sock.sendall(data)

    def recv(self, size: int) -> bytes:
        self.sock.settimeout(self.timeout)
        return self.sock.recv(size)

    def close(self) -> None:
        self.sock.close()


class SshTransport(Transport):
    """`ssh HOST adaptyst-top bridge`: its standard input and output are the socket's."""

    def __init__(self, host: str) -> None:
        ssh = shlex.split(os.environ.get(SSH_ENV, "ssh"))
        remote = os.environ.get(REMOTE_ENV, "adaptyst-top")
        # BatchMode: a password prompt would hang under the monitor's screen.
        argv = [*ssh, "-o", "BatchMode=yes", "--", host, remote, "bridge"]
        try:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        except OSError as exc:
            raise AgentUnavailable(f"cannot run {ssh[0]}: {exc.strerror or exc}") from None
        self.host = host

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def recv(self, size: int) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], self.timeout)
        if not ready:
            raise TimeoutError(f"no answer from {self.host} in {self.timeout:g} s")
        return os.read(fd, size)

    def why_closed(self) -> str:
        """What ssh said on its way out (its last line), once it has ended."""
        try:
            _, err = self.proc.communicate(timeout=1)
        except subprocess.TimeoutExpired:
            return ""
        lines = err.decode(errors="replace").strip().splitlines()
        return inert(lines[-1]) if lines else ""  # the remote's words

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(2)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            # A send that met a closed pipe left its bytes in stdin's buffer: closing
            # flushes them into the same closed pipe. Nothing is waiting for them.
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()


class AgentUnavailable(OSError):
    """No agent answers at that socket, in one line."""


class AgentRefused(RuntimeError):
    """The agent answered with an error line (a refusal, a bad spec...)."""


def absolute_spec(text: str, cwd: str | None = None) -> str:
    """TEXT with a relative TARGET path made absolute (the agent runs elsewhere)."""
    try:
        spec = parse_spec(text)
    except ProbeSpecError:
        return text  # the agent says what is wrong with it, in its one line
    if "/" not in spec.target or os.path.isabs(spec.target):
        return text
    kind, _, rest = text.split(":", 2)
    return f"{kind}:{os.path.abspath(os.path.join(cwd or os.getcwd(), spec.target))}:{rest}"


class AgentConnection:
    """To the agent at PATH (a socket) or, with HOST, on that node through SSH."""

    def __init__(self, path: str, host: str | None = None) -> None:
        self.path = path
        self.host = host
        self.where = f"{host} (ssh)" if host else path
        self._lock = threading.Lock()
        self._open: dict[str, Any] | None = None
        self._added: list[str] = []
        self._told: list[str] = []
        self._connect()

    def _connect(self) -> None:
        self.link: Transport = SshTransport(self.host) if self.host else SocketTransport(self.path)
        self.reader = proto.LineReader(self.link, proto.MAX_SNAPSHOT_LINE)
        unsent: OSError | None = None
        try:
            self.link.send(proto.encode("hello"))
        except OSError as exc:
            # An agent that turns this connection away says why and closes at once,
            # maybe before the hello went out (a broken pipe): its reason is still here
            # to read, and is the one to show.
            unsent = exc
        try:
            hello = self.reader.read()
        except (OSError, proto.ProtocolError) as exc:
            self._closed_because(f"the agent at {self.where} did not answer: {unsent or exc}")
        if hello is None:
            self._closed_because(
                f"the agent at {self.where} did not answer: {unsent}"
                if unsent
                else f"the agent at {self.where} closed the connection"
            )
        if hello.get("type") == "error":
            self._closed_because(f"the agent at {self.where}: {inert(str(hello.get('message')))}")
        try:
            proto.check_version(hello, "agent")
        except proto.ProtocolError as exc:
            self._closed_because(str(exc))

    def _closed_because(self, why: str) -> NoReturn:
        said = self.link.why_closed() if isinstance(self.link, SshTransport) else ""
        self.link.close()
        raise AgentUnavailable(f"{why}: {said}" if said else why)

    def _ask(self, kind: str, **fields: Any) -> dict[str, Any]:
        """One request, its answer; AgentRefused for an error answer."""
        with self._lock:
            self.link.timeout = ANSWER_TIMEOUT_S
            self.link.send(proto.encode(kind, **fields))
            answer = self.reader.read()
        if answer is None:
            raise ConnectionResetError("the agent closed the connection")
        if answer.get("type") == "error":
            raise AgentRefused(inert(str(answer.get("message", "refused"))))
        return answer

    # ----- requests ---------------------------------------------------------------------

    def open(
        self,
        pid: int | None,
        probes: Sequence[str],
        budget: float,
        enforce_budget: bool,
        max_probes: int,
        command_path: str | None = None,
        job: str | None = None,
    ) -> None:
        self._open = {
            "pid": pid,
            "job": job,
            # Paths on another node are that node's: only this node's are made absolute.
            "probes": [p if self.host else absolute_spec(p) for p in probes],
            "budget": budget,
            "enforce_budget": enforce_budget,
            "max_probes": max_probes,
            "command_path": command_path,
        }
        self._ask("open", **self._open)

    def snapshot(self, with_hist: bool) -> Snapshot:
        """The agent's snapshot; after a lost connection, one that says so (and the
        session is opened again as soon as an agent answers)."""
        try:
            answer = self._ask("snapshot", with_hist=with_hist)
            snap = Snapshot.from_json(answer.get("snapshot"))
        except (OSError, proto.ProtocolError, SnapshotError) as exc:
            return self._reconnect(exc, with_hist)
        except AgentRefused as exc:
            return Snapshot(t=0.0, host="", warnings=(f"agent: {exc}",))
        if self._told:
            from dataclasses import replace

            told, self._told = tuple(self._told), []
            return replace(snap, warnings=snap.warnings + told)
        return snap

    def _reconnect(self, why: BaseException, with_hist: bool) -> Snapshot:
        self.link.close()
        try:
            self._connect()
            if self._open is not None:
                self._ask("open", **self._open)
            for spec in self._added:
                self._ask("add", spec=spec)
        except (OSError, proto.ProtocolError, AgentRefused) as exc:
            self.link.close()
            time.sleep(0.2)
            return Snapshot(
                t=0.0,
                host="",
                warnings=(f"lost the agent at {self.where} ({why}); retrying: {exc}",),
            )
        self._told.append(
            f"the connection to the agent at {self.where} broke ({why}); "
            "it is back: probes re-added"
        )
        return self.snapshot(with_hist)

    def add(self, spec: str) -> None:
        spec = spec if self.host else absolute_spec(spec)
        self._ask("add", spec=spec)
        self._added.append(spec)

    def toggle(self, ref: ProbeRef) -> bool:
        return bool(self._ask("toggle", ref=[ref.group, ref.row, ref.key]).get("on"))

    def remove(self, ref: ProbeRef) -> str:
        spec = str(self._ask("remove", ref=[ref.group, ref.row, ref.key]).get("spec", ""))
        if spec in self._added:
            self._added.remove(spec)
        return spec

    def list_objects(self, request: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
        """`list --json`'s objects as the agent sees them for this user, and whether the
        boot's entry-check verdicts were known to it."""
        answer = self._ask("list", **request)
        objects = answer.get("objects")
        if not isinstance(objects, list) or not all(isinstance(o, dict) for o in objects):
            raise proto.ProtocolError("list: the agent's answer has no objects")
        return objects, answer.get("policy_known") is True

    def candidates(self) -> list[Candidate]:
        reply = self._ask("candidates")
        found = reply.get("candidates")
        if isinstance(found, list):  # an agent that marks them
            return [c for c in map(Candidate.from_json, found) if c is not None]
        specs = reply.get("specs")  # an agent of before: the specs alone
        return (
            [Candidate(s, s) for s in specs if isinstance(s, str)]
            if isinstance(specs, list)
            else []
        )

    def close(self) -> None:
        self.link.close()


class AgentHub:
    """The hub of a session whose probes and devices are read by the agent."""

    def __init__(self, conn: AgentConnection) -> None:
        self.conn = conn

    def snapshot(self, with_hist: bool = True) -> Snapshot:
        return self.conn.snapshot(with_hist)

    def close(self) -> None:
        self.conn.close()
