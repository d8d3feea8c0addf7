"""A client of the node agent: the session's probes attach in the agent (root), this
process holds no bcc and no BPF object; snapshots come over the socket in the record
format. The agent is reached at its socket on this node, or on another node through
`ssh NODE adaptyst-top bridge` (SSH authenticates; nothing new listens on the network).
A restarted agent or a broken connection is found again: the session is opened anew,
its probes re-added, its clock and counts carried on, and the next snapshot says so.
Every wait for the agent has a deadline and ends at once when the run is stopped."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NoReturn

from adaptyst_top.collectors.probes.kinds import parse_spec
from adaptyst_top.collectors.probes.spec import ProbeSpecError
from adaptyst_top.runtime.listing import Candidate
from adaptyst_top.runtime.remote import protocol as proto
from adaptyst_top.runtime.remote.continuity import Continuity
from adaptyst_top.runtime.remote.defaults import STOPPING_S
from adaptyst_top.runtime.remote.transport import (
    CONNECT_TIMEOUT_S,
    REMOTE_ENV,
    SSH_ENV,
    AgentInterrupted,
    AgentRefused,
    AgentUnavailable,
    SocketTransport,
    SshTransport,
    Transport,
)
from adaptyst_top.runtime.stop_flag import StopFlag
from adaptyst_top.snapshot import ProbeRef, Snapshot, SnapshotError, reusing
from adaptyst_top.snapshot.inert import inert

# The transports' names are the client's too (its callers import them from here).
__all__ = [
    "ANSWER_TIMEOUT_S",
    "CONNECT_TIMEOUT_S",
    "REMOTE_ENV",
    "SNAPSHOT_TIMEOUT_S",
    "SSH_ENV",
    "STOPPING_S",
    "AgentConnection",
    "AgentHub",
    "AgentInterrupted",
    "AgentRefused",
    "AgentUnavailable",
    "SocketTransport",
    "SshTransport",
    "Transport",
    "absolute_spec",
]

SSH_HELLO_TIMEOUT_S = 20.0  # ssh's own handshake comes first (DNS, keys, a slow link)
ANSWER_TIMEOUT_S = 300.0  # an open waits for the probes to attach (a wide glob: minutes)
# A snapshot, toggle or remove takes the agent milliseconds: longer is a stall.
SNAPSHOT_TIMEOUT_S = 30.0
RETRY_FIRST_S, RETRY_MAX_S = 0.2, 5.0  # between reconnects to an agent that is not back


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
    """To the agent at PATH (a socket) or, with HOST, on that node through SSH. A wait
    under way when STOP is set ends at once; none goes past GIVE_UP_AT (monotonic)."""

    def __init__(
        self,
        path: str,
        host: str | None = None,
        stop: StopFlag | None = None,
        give_up_at: float | None = None,
        bridge_args: Sequence[str] = (),
    ) -> None:
        self.path = path
        self.host = host
        self.bridge_args = tuple(bridge_args)  # a relay's (runtime/job_relay.py)
        self.where = f"{host} (ssh{', relay' if bridge_args else ''})" if host else path
        self.stop = stop
        self.give_up_at = give_up_at
        # Held by each exchange, and by a reconnect throughout: another thread's request
        # (the monitor's toggle, add, picker) never meets a half-made link.
        self._lock = threading.RLock()
        self._retry_at = 0.0  # after a failed reconnect, the next one not before this
        self._backoff = RETRY_FIRST_S
        self._open: dict[str, Any] | None = None
        self._profiled: tuple[int, int] | None = None  # the process list's pick, and its rate
        self.refused: list[str] = []  # what the kernel refused at the open (the agent says)
        self._added: list[str] = []
        self._told: list[str] = []
        self.carry = Continuity()
        self.lost: str | None = None  # why the last snapshot is a held one (the agent is lost)
        self._connect()

    def _connect(self) -> None:
        self.link: Transport = (
            SshTransport(self.host, self.bridge_args) if self.host else SocketTransport(self.path)
        )
        self.reader = proto.LineReader(self.link, proto.MAX_SNAPSHOT_LINE)
        unsent: OSError | None = None
        capped = self._arm(SSH_HELLO_TIMEOUT_S if self.host else CONNECT_TIMEOUT_S)
        try:
            self.link.send(proto.encode("hello"))
        except OSError as exc:
            # An agent that turns this connection away says why and closes at once,
            # maybe before the hello went out (a broken pipe): its reason is still here
            # to read, and is the one to show.
            unsent = exc
        try:
            hello = self.reader.read()
        except (AgentInterrupted, TimeoutError) as exc:
            if isinstance(exc, AgentInterrupted) or capped:  # the run's stop, not the agent's
                self.link.close()
                raise AgentInterrupted(self._gave_up(exc, capped)) from None
            self._closed_because(f"the agent at {self.where} did not answer: {unsent or exc}")
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

    def _arm(self, limit_s: float) -> str:
        """The link's deadline and stop for the next wait; what a timeout then means
        ("" for the agent's own stall)."""
        now = time.monotonic()
        self.link.deadline, self.link.stop, capped = now + limit_s, self.stop, ""
        if self.stop is not None and self.stop.is_set():
            # Stopping already: the last snapshot is still asked for, briefly.
            self.link.stop = None
            if now + STOPPING_S < self.link.deadline:
                self.link.deadline, capped = now + STOPPING_S, "stopped"
        if self.give_up_at is not None and self.give_up_at < self.link.deadline:
            self.link.deadline, capped = self.give_up_at, "the run's time is up"
        return capped

    def _gave_up(self, exc: BaseException, capped: str) -> str:
        why = capped if isinstance(exc, TimeoutError) else str(exc)
        return f"{why} while waiting for the agent at {self.where}"

    def _ask(self, kind: str, **fields: Any) -> dict[str, Any]:
        """One request, its answer within its kind's limit; AgentRefused for an error
        answer, AgentInterrupted when the run stopped or ran out of time first."""
        # What attaches (open, add, profile) or reads files (list) may take minutes; the rest not.
        slow = kind in ("open", "add", "list", "candidates", "profile")
        limit_s = ANSWER_TIMEOUT_S if slow else SNAPSHOT_TIMEOUT_S
        with self._lock:
            capped = self._arm(limit_s)
            try:
                self.link.send(proto.encode(kind, **fields))
                answer = self.reader.read()
            except (AgentInterrupted, TimeoutError) as exc:
                # The answer may still come: this link would pair it with the next ask.
                self.link.close()
                if isinstance(exc, TimeoutError) and not capped:
                    raise TimeoutError(f"no answer to {kind} in {limit_s:g} s") from None
                raise AgentInterrupted(self._gave_up(exc, capped)) from None
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
        profile_hz: int | None = None,
        ranks: bool = False,
    ) -> None:
        self._open = {
            "pid": pid,
            "job": job,
            # Paths on another node are that node's: only this node's are made absolute.
            "probes": [p.strip() if self.host else absolute_spec(p.strip()) for p in probes],
            "budget": budget,
            "enforce_budget": enforce_budget,
            "max_probes": max_probes,
            "command_path": command_path,
            "profile_hz": profile_hz,
        }
        if ranks:  # only where asked: an agent from before it knows no such field
            self._open["ranks"] = True
        self._note_refused(self._ask("open", **self._open))

    def _note_refused(self, answer: dict[str, Any]) -> None:
        """What the kernel refused at an open (record stops on it), made inert, bounded."""
        said = answer.get("refused")
        self.refused = (
            [inert(s)[:500] for s in said if isinstance(s, str)][:100]
            if isinstance(said, list)
            else []
        )

    def snapshot(self, with_hist: bool) -> Snapshot:
        """The agent's snapshot; after a lost connection, one that says so (and the
        session is opened again as soon as an agent answers)."""
        try:
            return self._fetch(with_hist)
        except AgentInterrupted as exc:
            return self._held(str(exc))
        except AgentRefused as exc:  # the agent ended this session (the guard)
            return self._held(f"agent: {exc}", ended=True)
        except (OSError, proto.ProtocolError, SnapshotError) as exc:
            lost = exc
        if self.stop is not None and self.stop.is_set():
            # The run is ending: its last line says so, no session is opened for it.
            return self._held(f"lost the agent at {self.where} ({lost})")
        if time.monotonic() < self._retry_at:
            return self._held(f"lost the agent at {self.where} ({lost}); retrying")
        try:
            self._reopen(lost)
            snap = self._fetch(with_hist)
        except AgentInterrupted as exc:
            return self._held(str(exc))
        except (OSError, proto.ProtocolError, SnapshotError, AgentRefused) as exc:
            self.link.close()
            # Tried again after a pause that grows: an agent that is down for a while is
            # not asked to attach everything every tick.
            self._retry_at = time.monotonic() + self._backoff
            self._backoff = min(RETRY_MAX_S, self._backoff * 2)
            return self._held(f"lost the agent at {self.where} ({lost}); retrying: {exc}")
        self._backoff = RETRY_FIRST_S
        return snap

    def _held(self, why: str, ended: bool = False) -> Snapshot:
        self.lost = why
        return self.carry.held(why, ended)

    def _fetch(self, with_hist: bool) -> Snapshot:
        answer = self._ask("snapshot", with_hist=with_hist)
        self.lost = None
        try:
            with reusing():  # the answer is fresh and dropped after
                snap = self.carry.carry(Snapshot.from_json(answer.get("snapshot")))
        except (ArithmeticError, ValueError) as exc:  # a snapshot that parses but is absurd
            raise proto.ProtocolError(f"a snapshot that cannot be carried on: {exc}") from None
        if self._told:
            told, self._told = tuple(self._told), []
            return replace(snap, warnings=snap.warnings + told)
        return snap

    def _reopen(self, why: BaseException) -> None:
        """A new connection, the session opened there as it was (its probes re-added),
        its clock and counts carried on from the last snapshot."""
        with self._lock:
            self.link.close()
            self._connect()
            if self._open is not None:
                self._note_refused(self._ask("open", **self._open))
            gap = self.carry.broke()  # the new session's clock starts with the open
            dropped = []
            if self._profiled is not None:
                try:
                    self._ask("profile", pid=self._profiled[0], hz=self._profiled[1])
                except AgentRefused as exc:
                    self._profiled = None
                    dropped.append(f"the profile was not taken up again: {exc}")
            for spec in list(self._added):
                try:
                    self._ask("add", spec=spec)
                except AgentRefused as exc:  # refused for good (a file gone): not re-asked
                    self._added.remove(spec)
                    dropped.append(f"{spec} not re-added: {exc}")
        self._told.append(
            f"the connection to the agent at {self.where} broke ({why}); it is back: "
            f"probes re-added, counts go on (hits in the {gap:.1f} s gap are not counted)"
        )
        self._told += dropped

    def add(self, spec: str) -> None:
        spec = spec.strip() if self.host else absolute_spec(spec.strip())
        with self._lock:  # a reconnect between the two re-adds it
            self._ask("add", spec=spec)
            self._added.append(spec)

    def profile(self, pid: int, hz: int) -> None:
        """Profile PID at HZ from now on (the process list's pick): AgentRefused in one
        line when the agent will not."""
        with self._lock:
            self._ask("profile", pid=pid, hz=hz)
            self._profiled = (pid, hz)

    def toggle(self, ref: ProbeRef) -> bool:
        return bool(self._ask("toggle", ref=[ref.group, ref.row, ref.key]).get("on"))

    def remove(self, ref: ProbeRef) -> str:
        spec = str(self._ask("remove", ref=[ref.group, ref.row, ref.key]).get("spec", ""))
        if spec in self._added:
            self._added.remove(spec)
        elif self._open is not None and spec in self._open["probes"]:
            self._open["probes"] = [p for p in self._open["probes"] if p != spec]
        self.carry.forget(spec)
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
