"""`adaptyst-top bridge --job ID --nodes A,B,...`: a relay of a job's view, run by the
user (through ssh) on the first node of a group (job_tree.py). It speaks the node agent's
protocol on standard input and output, as the agent would through `bridge`, and does what
the login node's view does for the group: one `ssh NODE adaptyst-top bridge` a node
(job_fanout.py), each node's agent deciding for the user, the group's snapshots merged
into one. The user's own process: it is trusted with nothing the user could not do."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from typing import Any

from adaptyst_top.runtime.job_fanout import FRESH_WAIT_S, JobFanout, JobRefused
from adaptyst_top.runtime.job_tree import DEFAULT_FANOUT, FANOUT_RANGE, TreeError, node_name
from adaptyst_top.runtime.remote import protocol as proto
from adaptyst_top.runtime.remote.client import ANSWER_TIMEOUT_S
from adaptyst_top.runtime.remote.transport import AgentInterrupted, AgentRefused
from adaptyst_top.runtime.session_options import ProbeSettings, SessionOptions, Target
from adaptyst_top.snapshot import ProbeRef, reusing
from adaptyst_top.system.slurm_jobs import JobError, check_job_id

# Its group's answers are waited for this long, so that its merge reaches the login
# node within the wait there (FRESH_WAIT_S) when every node answers at once.
RELAY_WAIT_S = FRESH_WAIT_S / 2
# Its group opened within this, so that its answer to the open comes within the login
# node's wait for it (a node later is unreachable, and tried again).
OPEN_WITHIN_S = ANSWER_TIMEOUT_S * 0.8

Fanout = Callable[[str, Sequence[str], SessionOptions], JobFanout]


class RelayError(ValueError):
    """A relay asked for what it cannot be, in one line."""


def relay_args(job: str, nodes_text: str) -> tuple[str, list[str]]:
    """(the job, its group's nodes) from the command line; RelayError in one line."""
    try:
        nodes = [node_name(n) for n in nodes_text.split(",")]
        job = check_job_id(job)
    except (TreeError, JobError) as exc:
        raise RelayError(str(exc)) from None
    if not 1 <= len(nodes) <= FANOUT_RANGE[1] or len(set(nodes)) != len(nodes):
        raise RelayError(f"--nodes names 1..{FANOUT_RANGE[1]} nodes, each once")
    return job, nodes


class _Stdin:
    """Standard input as a stream a LineReader reads."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def recv(self, size: int) -> bytes:
        return os.read(self.fd, size)


class Relay:
    """The agent's side of the protocol for JOB's NODES; MAKE opens them (a test's fake)."""

    def __init__(self, job: str, nodes: Sequence[str], make: Fanout | None = None) -> None:
        self.job = job
        self.nodes = list(nodes)
        self.make: Fanout = make or (
            lambda j, n, o: JobFanout(j, n, o, RELAY_WAIT_S, OPEN_WITHIN_S)
        )
        self.fanout: JobFanout | None = None

    def answer(self, msg: dict[str, Any]) -> bytes:
        """MSG's answer; ProtocolError for a request that breaks the protocol."""
        kind = msg["type"]
        if kind not in proto.REQUESTS:
            raise proto.ProtocolError(f"unknown request {kind!r}")
        ref = ProbeRef(*proto.ref_field(msg)) if kind in ("toggle", "remove") else None
        try:
            if kind == "open":
                return self._open(proto.open_request(msg))
            if kind in ("list", "profile"):
                raise AgentRefused(f"a job's relay takes no {kind}: ask a node with --host")
            if self.fanout is None:
                raise AgentRefused("open a session first")
            if kind == "snapshot":
                snap = self.fanout.snapshot(bool(proto.field(msg, "with_hist", bool, True)))
                with reusing():
                    return proto.encode("snapshot", snapshot=snap.to_json())
            if kind == "add":
                self.fanout.add(proto.field(msg, "spec", str))
                return proto.encode("ok")
            if kind == "candidates":
                return proto.encode("ok", specs=[], candidates=[])
            assert ref is not None
            if kind == "toggle":
                return proto.encode("ok", on=self.fanout.toggle(ref))
            return proto.encode("ok", spec=self.fanout.remove(ref))
        except (AgentRefused, AgentInterrupted, JobRefused) as exc:
            return proto.encode("error", message=str(exc))

    def _open(self, asked: proto.OpenRequest) -> bytes:
        if self.fanout is not None:
            raise AgentRefused("a session is open already on this connection")
        if asked.job != self.job or asked.pid is not None or asked.command_path is not None:
            raise AgentRefused(f"this relay watches job {self.job}'s processes alone")
        opts = SessionOptions(
            target=Target(job=self.job, job_fanout=max(DEFAULT_FANOUT, len(self.nodes))),
            probing=ProbeSettings(
                specs=asked.probes,
                budget=asked.budget,
                enforce_budget=asked.enforce_budget,
                max_probes=asked.max_probes,
                profile_hz=asked.profile_hz,
                by_process=True,
            ),
        )
        self.fanout = self.make(self.job, self.nodes, opts)
        return proto.encode("ok", refused=self.fanout.refused)

    def close(self) -> None:
        if self.fanout is not None:
            self.fanout.close()


def serve(relay: Relay, stdin: int = 0, stdout: int = 1) -> int:
    """RELAY's answers on STDOUT to what STDIN asks, until it ends (0) or breaks the
    protocol (2, said in an error answer); every node it opened is let go on the way out."""
    reader = proto.LineReader(_Stdin(stdin), proto.MAX_LINE)

    def send(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(stdout, view) :]

    try:
        hello = reader.read()
        if hello is None:
            return 0
        proto.check_version(hello, "client")
        send(proto.encode("hello", uid=os.getuid()))
        while (msg := reader.read()) is not None:
            try:
                answer = relay.answer(msg)
            except proto.ProtocolError:
                raise
            except Exception as exc:  # what nothing foresaw: one line, and the relay goes on
                answer = proto.encode("error", message=f"relay: {type(exc).__name__}: {exc}")
            send(answer)
        return 0
    except proto.ProtocolError as exc:
        with contextlib.suppress(OSError):
            send(proto.encode("error", message=str(exc)))
        return 2
    except OSError:
        return 0  # the login node went: the same end
    finally:
        relay.close()
