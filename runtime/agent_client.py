"""A client of the node agent: the session's probes attach in the agent (root), this
process holds no bcc and no BPF object; snapshots come over the socket in the record
format. A restarted agent is found again: the session is opened anew, its probes
re-added, and the next snapshot says so."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

from adaptyst_top.collectors.probe_spec import ProbeSpecError, parse_spec
from adaptyst_top.collectors.snapshot import ProbeRef, Snapshot, SnapshotError
from adaptyst_top.runtime import agent_protocol as proto

CONNECT_TIMEOUT_S = 5.0
ANSWER_TIMEOUT_S = 300.0  # an open waits for the probes to attach (a wide glob: minutes)


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
    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._open: dict[str, Any] | None = None
        self._added: list[str] = []
        self._told: list[str] = []
        self._connect()

    def _connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            sock.connect(self.path)
        except OSError as exc:
            sock.close()
            raise AgentUnavailable(f"no agent at {self.path}: {exc.strerror or exc}") from None
        self.sock = sock
        self.reader = proto.LineReader(sock, proto.MAX_SNAPSHOT_LINE)
        try:
            sock.sendall(proto.encode("hello"))
            hello = self.reader.read()
        except (OSError, proto.ProtocolError) as exc:
            sock.close()
            raise AgentUnavailable(f"the agent at {self.path} did not answer: {exc}") from None
        if hello is None:
            sock.close()
            raise AgentUnavailable(f"the agent at {self.path} closed the connection")
        if hello.get("type") == "error":
            sock.close()
            raise AgentUnavailable(f"the agent at {self.path}: {hello.get('message')}")
        try:
            proto.check_version(hello, "agent")
        except proto.ProtocolError as exc:
            sock.close()
            raise AgentUnavailable(str(exc)) from None

    def _ask(self, kind: str, **fields: Any) -> dict[str, Any]:
        """One request, its answer; AgentRefused for an error answer."""
        with self._lock:
            self.sock.settimeout(ANSWER_TIMEOUT_S)
            self.sock.sendall(proto.encode(kind, **fields))
            answer = self.reader.read()
        if answer is None:
            raise ConnectionResetError("the agent closed the connection")
        if answer.get("type") == "error":
            raise AgentRefused(str(answer.get("message", "refused")))
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
    ) -> None:
        self._open = {
            "pid": pid,
            "probes": [absolute_spec(p) for p in probes],
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
            return self._reconnect(exc)
        except AgentRefused as exc:
            return Snapshot(t=0.0, host="", warnings=(f"agent: {exc}",))
        if self._told:
            from dataclasses import replace

            told, self._told = tuple(self._told), []
            return replace(snap, warnings=snap.warnings + told)
        return snap

    def _reconnect(self, why: BaseException) -> Snapshot:
        self.sock.close()
        try:
            self._connect()
            if self._open is not None:
                self._ask("open", **self._open)
            for spec in self._added:
                self._ask("add", spec=spec)
        except (OSError, proto.ProtocolError, AgentRefused) as exc:
            self.sock.close()
            time.sleep(0.2)
            return Snapshot(
                t=0.0,
                host="",
                warnings=(f"lost the agent at {self.path} ({why}); retrying: {exc}",),
            )
        self._told.append(f"the agent at {self.path} restarted: probes re-added")
        return self.snapshot(with_hist=False)

    def add(self, spec: str) -> None:
        spec = absolute_spec(spec)
        self._ask("add", spec=spec)
        self._added.append(spec)

    def toggle(self, ref: ProbeRef) -> bool:
        return bool(self._ask("toggle", ref=[ref.group, ref.row, ref.key]).get("on"))

    def remove(self, ref: ProbeRef) -> str:
        spec = str(self._ask("remove", ref=[ref.group, ref.row, ref.key]).get("spec", ""))
        if spec in self._added:
            self._added.remove(spec)
        return spec

    def candidates(self) -> list[str]:
        specs = self._ask("candidates").get("specs")
        return [s for s in specs if isinstance(s, str)] if isinstance(specs, list) else []

    def close(self) -> None:
        self.sock.close()


class AgentHub:
    """The hub of a session whose probes and devices are read by the agent."""

    def __init__(self, conn: AgentConnection) -> None:
        self.conn = conn

    def snapshot(self, with_hist: bool = True) -> Snapshot:
        return self.conn.snapshot(with_hist)

    def close(self) -> None:
        self.conn.close()
