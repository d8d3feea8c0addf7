"""The node agent with real unprivileged users (made with useradd here): a user probes
their own processes exactly, is refused anyone else's, and nothing of theirs outlives
their connection; the agent survives bad clients and its own SIGKILL leaves nothing.

Clients run as the users in forked children of this process (the interpreter of this
checkout may lie in a folder other users cannot read: everything a child needs is
imported before it forks)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from adaptyst_top.cli.main import main as cli_main
from adaptyst_top.cli.record import record_parser
from adaptyst_top.runtime.remote import protocol as proto
from adaptyst_top.runtime.remote.client import AgentConnection, AgentRefused, SocketTransport
from adaptyst_top.runtime.remote.settings import AgentSettings
from adaptyst_top.system.version import package_version
from tests.support.agent_unit import User, useradd, with_the_units_capabilities
from tests.support.as_user import become
from tests.support.bpf_objects import none_left, our_programs, uprobe_event_lines
from tests.support.cli import CLI
from tests.support.marks import requires_root
from tests.support.proc_tree import parents_and_uids

pytestmark = [pytest.mark.ebpf, requires_root]

package_version()  # what the children's parsers print is looked up now
record_parser()


_useradd = useradd


@pytest.fixture(scope="module")
def users() -> Iterator[tuple[User, User]]:
    tag = uuid.uuid4().hex[:6]
    made = [_useradd(f"adt-a-{tag}"), _useradd(f"adt-b-{tag}")]
    try:
        yield made[0], made[1]
    finally:
        for u in made:
            subprocess.run(["userdel", u.name], check=False)


@pytest.fixture(scope="module")
def shared(workload_bin: Path) -> Iterator[Path]:
    """A folder every user can read, only root can write: the agent's socket, the target."""
    d = Path(tempfile.mkdtemp(prefix="adt-agent-"))
    d.chmod(0o755)
    shutil.copy(workload_bin, d / "workload")
    (d / "workload").chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


class Agent:
    def __init__(self, path: Path, *options: str) -> None:
        self.path = path
        self.log = open(path.parent / "agent.log", "ab")  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen(
            [*with_the_units_capabilities(), *CLI, "agent", "--socket", str(path), *options],
            stderr=self.log,
            stdout=self.log,
        )
        deadline = time.monotonic() + 30
        while not self.answers():  # a socket left by a killed agent is there, dead
            assert self.proc.poll() is None, (path.parent / "agent.log").read_text()
            assert time.monotonic() < deadline
            time.sleep(0.05)

    def answers(self) -> bool:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(str(self.path))
            return True
        except OSError:
            return False
        finally:
            s.close()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(60)
        self.log.close()


@pytest.fixture
def agent(shared: Path) -> Iterator[Agent]:
    a = Agent(shared / "agent.sock")
    try:
        yield a
    finally:
        a.stop()
        assert nothing_left(5.0), our_programs()


def nothing_left(within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if none_left() and not uprobe_event_lines():
            return True
        time.sleep(0.05)
    return none_left() and not uprobe_event_lines()


class AsUser:
    """A forked child that became USER and runs FN(to_parent, from_parent); the parent
    talks to it a line at a time."""

    def __init__(self, user: User, fn: Callable[[int, int], None]) -> None:
        up_r, up_w = os.pipe()
        down_r, down_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            code = 1
            try:
                os.close(up_r)
                os.close(down_w)
                become(user.uid, user.gid)
                fn(up_w, down_r)
                code = 0
            except BaseException as exc:  # SystemExit too: the child never returns into pytest
                os.write(up_w, (json.dumps({"raised": repr(exc)}) + "\n").encode())
            finally:
                os._exit(code)
        os.close(up_w)
        os.close(down_r)
        self.up = os.fdopen(up_r, "r")
        self.down = down_w

    def read(self) -> dict[str, object]:
        line = self.up.readline()
        assert line, "the child ended"
        msg = json.loads(line)
        assert "raised" not in msg, msg["raised"]
        return dict(msg)

    def tell(self, text: str = "go") -> None:
        os.write(self.down, (text + "\n").encode())

    def wait(self) -> int:
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        self.wait()


def children_as(parent: int, uid: int) -> list[int]:
    """PARENT's processes, its children's too, that run as UID (the agent's workers of
    that user)."""
    procs = parents_and_uids()
    return [
        pid
        for pid, (up, who) in procs.items()
        if who == uid and parent in (up, procs.get(up, (None, None))[0])
    ]


def worker_name(pid: int) -> str:
    """Which worker PID is: "opener", "parser" or "unwinder" (its command line), else ""."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    for module, name in ((b"open_files", "opener"), (b"parse_elf", "parser"),
                         (b"unwind_stacks", "unwinder")):  # fmt: skip
        if module in argv:
            return name
    return ""


def say(fd: int, **msg: object) -> None:
    os.write(fd, (json.dumps(msg) + "\n").encode())


def hear(fd: int) -> str:
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            break
        line += chunk
    return line.decode().strip()


def record_as(
    agent: Agent, user: User, out: Path, args: list[str], env: dict[str, str] | None = None
) -> dict[str, object]:
    """`record --agent AGENT ARGS` run as USER (ENV added to theirs), its JSON lines
    written to OUT as `--out -` would: the last snapshot, the run having ended with 0."""

    def client(up: int, _down: int) -> None:
        sys.stdout = open(out, "w")  # noqa: SIM115 - not pytest's capture: the file
        os.environ.update(env or {})
        code = cli_main(["record", "--agent", str(agent.path), *args])
        sys.stdout.flush()
        say(up, code=code)

    c = AsUser(user, client)
    assert c.read() == {"code": 0}
    assert c.wait() == 0
    last: dict[str, object] = json.loads(out.read_text().splitlines()[-1])
    return last


def workload_as(user: User, binary: Path, *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [str(binary), *args],
        user=user.uid,
        group=user.gid,
        extra_groups=[],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE if not args else subprocess.DEVNULL,
        text=True,
    )
    if not args:  # driven line by line: it says when it reads
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def driven_as(user: User, *argv: str) -> subprocess.Popen[str]:
    """ARGV as USER, with a pipe to its standard input (it acts when told)."""
    return subprocess.Popen(
        list(argv),
        user=user.uid,
        group=user.gid,
        extra_groups=[],
        stdin=subprocess.PIPE,
        text=True,
    )


def run(proc: subprocess.Popen[str], command: str) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(command + "\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "ok"


def test_a_user_probes_their_own_process_exactly(
    agent: Agent, users: tuple[User, User], shared: Path
) -> None:
    alice, _ = users
    target = workload_as(alice, shared / "workload")
    spec = f"uprobe:{shared / 'workload'}:fast_fn"

    def client(up: int, down: int) -> None:
        conn = AgentConnection(str(agent.path))
        conn.open(target.pid, [spec], 0.02, False, 1000)
        say(up, ready=True)
        hear(down)
        snap = conn.snapshot(with_hist=False)
        offered = {c.spec: c for c in conn.candidates()}  # the picker, through the agent
        fast = offered.get(spec)
        say(
            up,
            counts=[p.count for p in snap.probes],
            states=[p.state for p in snap.probes],
            offered=fast is not None and fast.label.endswith(":fast_fn") and not fast.refused,
        )

    try:
        c = AsUser(alice, client)
        assert c.read() == {"ready": True}
        run(target, "fast 5000")
        c.tell()
        assert c.read() == {"counts": [5000], "states": ["attached"], "offered": True}
        assert c.wait() == 0
        assert nothing_left(1.0), our_programs()  # gone with the connection
    finally:
        target.kill()
        target.wait()


@pytest.mark.parametrize("whose", ["another user's", "root's"])
def test_another_users_or_roots_process_is_refused_naming_the_rule(
    agent: Agent, users: tuple[User, User], shared: Path, whose: str
) -> None:
    alice, bob = users
    if whose == "root's":
        target = subprocess.Popen([str(shared / "workload")], stdin=subprocess.PIPE)
        owner = "root"
    else:
        target = workload_as(bob, shared / "workload")
        owner = bob.name

    def client(up: int, _down: int) -> None:
        conn = AgentConnection(str(agent.path))
        try:
            conn.open(target.pid, [f"uprobe:{shared / 'workload'}:fast_fn"], 0.02, False, 1000)
            say(up, refused=None)
        except AgentRefused as exc:
            say(up, refused=str(exc))

    try:
        c = AsUser(alice, client)
        assert c.read() == {
            "refused": f"PID {target.pid} belongs to {owner}; you may probe your own processes"
        }
        assert c.wait() == 0
        assert none_left()
    finally:
        target.kill()
        target.wait()


def test_node_wide_and_unreadable_files_are_refused(
    agent: Agent, users: tuple[User, User], shared: Path
) -> None:
    alice, bob = users
    secret = shared / "secret"
    secret.mkdir(mode=0o700)
    shutil.copy(shared / "workload", secret / "workload")
    target = workload_as(alice, shared / "workload")
    bobs = workload_as(bob, shared / "workload")
    bobs_exe = f"/proc/{bobs.pid}/exe"  # names bob's program for root, not for alice

    def client(up: int, _down: int) -> None:
        answers = []
        for pid, spec in (
            (None, f"uprobe:{shared / 'workload'}:fast_fn"),
            (target.pid, f"uprobe:{secret / 'workload'}:fast_fn"),
            (target.pid, f"uprobe:{secret / 'nothing'}:fast_fn"),  # missing: the same answer
            (target.pid, f"uprobe:{bobs_exe}:fast_fn"),
        ):
            conn = AgentConnection(str(agent.path))
            try:
                conn.open(pid, [spec], 0.02, False, 1000)
                answers.append("opened")
            except AgentRefused as exc:
                answers.append(str(exc))
            conn.close()
        say(up, answers=answers)

    try:
        c = AsUser(alice, client)
        node_wide, unreadable, missing, exe = c.read()["answers"]  # type: ignore[misc]
        assert "node-wide probes are for root" in node_wide
        assert "you may not read" in unreadable
        assert unreadable.replace("workload", "X") == missing.replace("nothing", "X")
        assert unreadable.replace(str(secret / "workload"), "X") == exe.replace(bobs_exe, "X")
        assert c.wait() == 0
    finally:
        for p in (target, bobs):
            p.kill()
            p.wait()
        shutil.rmtree(secret)


def test_a_sigterm_the_kernel_hands_to_another_thread_still_stops_the_agent(
    agent: Agent,
) -> None:
    """The kernel may deliver a process's signal to any of its threads. Python's handler
    then runs only when the main thread is back in Python, and a main thread blocked in
    accept() never was: the agent went on listening (seen in CI)."""
    import ctypes

    pid = agent.proc.pid
    others = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    others.remove(pid)
    assert others  # the guard thread at least
    # The main thread asleep in accept() again after the connection that found the
    # agent up (the fix's accept sleeps in poll(), the old one in the socket's wait).
    deadline, asleep = time.monotonic() + 10, 0
    while asleep < 5:
        stat = Path(f"/proc/{pid}/task/{pid}/stat").read_text()
        asleep = asleep + 1 if stat.rsplit(")", 1)[1].split()[0] == "S" else 0
        assert time.monotonic() < deadline
        time.sleep(0.05)
    libc = ctypes.CDLL(None, use_errno=True)
    sys_tgkill = 234  # x86-64
    # A thread listed a moment ago may have ended since (a short-lived one: ESRCH, seen
    # in a fresh-clone run): the threads are listed again until one takes the signal.
    for _ in range(100):
        others = [int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid]
        if others and libc.syscall(sys_tgkill, pid, others[0], signal.SIGTERM) == 0:
            break
        time.sleep(0.01)
    else:
        raise AssertionError(f"no thread of {pid} but its main one took the signal")
    assert agent.proc.wait(15) == 0
    assert not agent.path.exists()


def test_a_killed_client_leaves_no_probe_within_a_second(
    agent: Agent, users: tuple[User, User], shared: Path
) -> None:
    alice, _ = users
    target = workload_as(alice, shared / "workload", "forever", "100")

    def client(up: int, down: int) -> None:
        conn = AgentConnection(str(agent.path))
        conn.open(target.pid, [f"uprobe:{shared / 'workload'}:fast_fn"], 0.02, False, 1000)
        say(up, ready=True)
        hear(down)  # never comes: SIGKILL first

    try:
        c = AsUser(alice, client)
        assert c.read() == {"ready": True}
        assert our_programs()
        c.kill()
        assert nothing_left(1.0), our_programs()
        assert agent.proc.poll() is None
    finally:
        target.kill()
        target.wait()


def test_a_process_that_stops_being_the_users_ends_its_probes(
    agent: Agent, users: tuple[User, User], shared: Path
) -> None:
    """Not dumpable any more (what a setuid exec makes of a process): the guard ends
    the probes and the client is told."""
    alice, _ = users
    python = shutil.which("python3", path="/usr/bin")
    assert python, "Debian's /usr/bin/python3"
    target = driven_as(
        alice,
        python,
        "-c",
        "import ctypes, sys, time\n"
        "sys.stdin.readline()\n"
        "ctypes.CDLL(None).prctl(4, 0)\n"  # PR_SET_DUMPABLE 0
        "time.sleep(60)\n",
    )

    def client(up: int, down: int) -> None:
        conn = AgentConnection(str(agent.path))
        conn.open(target.pid, ["uprobe:c:getpid"], 0.02, False, 1000)
        before = [p.state for p in conn.snapshot(with_hist=False).probes]
        say(up, ready=True)
        hear(down)
        time.sleep(1.0)
        snap = conn.snapshot(with_hist=False)
        say(up, warnings=list(snap.warnings), states=[before, [p.state for p in snap.probes]])

    try:
        time.sleep(0.3)
        c = AsUser(alice, client)
        assert c.read() == {"ready": True}
        assert target.stdin is not None
        target.stdin.write("now\n")
        target.stdin.flush()
        assert nothing_left(1.0), our_programs()
        c.tell()
        said = c.read()
        (warning,) = said["warnings"]  # type: ignore[misc]
        assert "probes ended" in str(warning) and "not dumpable" in str(warning)
        # Its rows said attached after the agent had ended them: now ended.
        assert said["states"] == [["attached"], ["ended"]], said
        assert c.wait() == 0
    finally:
        target.kill()
        target.wait()


def test_candidates_after_an_exec_of_another_users_private_program_are_refused(
    agent: Agent, users: tuple[User, User], shared: Path
) -> None:
    """The picker's list is asked for the process as it is at that moment: after alice's
    process execs bob's execute-only program (which makes it not dumpable), bob's
    private path and function names never reach alice, not even before the guard's
    next round."""
    alice, bob = users
    private = shared / f"bob-{uuid.uuid4().hex[:6]}"
    private.mkdir(mode=0o711)
    prog = private / "secret-prog"
    shutil.copy(shared / "workload", prog)
    prog.chmod(0o711)
    os.chown(private, bob.uid, bob.gid)
    os.chown(prog, bob.uid, bob.gid)
    target = driven_as(alice, "/bin/sh", "-c", f"read x; exec {prog} forever 100")

    def client(up: int, down: int) -> None:
        conn = AgentConnection(str(agent.path))
        conn.open(target.pid, [], 0.02, False, 1000)
        before = [c.spec for c in conn.candidates()]
        say(up, ready=bool(before))
        hear(down)
        try:
            found = [c.spec for c in conn.candidates()]
            say(up, found=found)
        except Exception as exc:
            say(up, refused=str(exc))

    try:
        c = AsUser(alice, client)
        assert c.read() == {"ready": True}
        assert target.stdin is not None
        target.stdin.write("now\n")
        target.stdin.flush()
        deadline = time.monotonic() + 10
        while os.readlink(f"/proc/{target.pid}/exe") != str(prog):
            assert time.monotonic() < deadline
            time.sleep(0.001)
        c.tell()
        answer = c.read()
        assert "secret-prog" not in json.dumps(answer), answer
        assert "not dumpable" in str(answer.get("refused")), answer
        assert c.wait() == 0
    finally:
        target.kill()
        target.wait()
        shutil.rmtree(private, ignore_errors=True)


HELLO = b'{"v": 1, "type": "hello"}\n'


def raw_client(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(str(path))
    return s


def answers(s: socket.socket) -> list[dict[str, object]]:
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    return [json.loads(line) for line in data.splitlines()]


@pytest.mark.parametrize(
    ("sent", "words"),
    [
        (b'{"v": 99, "type": "hello"}\n', "protocol version 99"),
        (b"not json\n", "not JSON"),
        (b'{"v": 1, "type": "hello"}\n{"type": "launch", "cmd": "rm -rf /"}\n', "unknown"),
        (b'{"v": 1, "type": "hello"}\n{"type": "open", "pid": "1", "probes": []}\n', "pid"),
        (b'{"v": 1, "type": "hello"}\n{"type": "toggle", "ref": {"a": 1}}\n', "ref is not"),
        (b'{"v": 1, "type": "hello"}\n{"type": "snapshot", "with_hist": "yes"}\n', "with_hist"),
        (b"x" * (proto.MAX_LINE + 10), "longer than"),
        (b'{"v": true, "type": "hello"}\n', "protocol version True"),
        (HELLO + b'{"type": "open", "pid": null, "probes": [], "budget": 1e308}\n', "budget"),
        (HELLO + b'{"type": "open", "pid": null, "probes": [], "budget": -1}\n', "budget"),
        (HELLO + b'{"type": "open", "probes": [], "max_probes": 1000000000000000000}\n', "max_"),
        (HELLO + b'{"type": "open", "probes": [], "max_probes": 2.5}\n', "max_probes"),
        (HELLO + b'{"type": "toggle", "ref": [true, true, null]}\n', "ref is not"),
        (HELLO + b'{"type": "remove", "ref": ["1", 1, null]}\n', "ref is not"),
    ],
    ids=[
        *("version", "not-json", "unknown", "bad-pid", "bad-ref", "bad-flag", "oversized"),
        *("v-true", "budget-huge", "budget-negative", "max-probes-huge", "max-probes-float"),
        *("ref-bools", "ref-text-group"),
    ],
)
def test_bad_messages_close_that_connection_with_one_line(
    agent: Agent, sent: bytes, words: str
) -> None:
    s = raw_client(agent.path)
    s.sendall(sent)
    got = answers(s)
    s.close()
    assert got[-1]["type"] == "error" and words in str(got[-1]["message"])
    # The agent goes on.
    ok = raw_client(agent.path)
    ok.sendall(proto.encode("hello"))
    ok.shutdown(socket.SHUT_WR)
    assert answers(ok)[0]["type"] == "hello"
    ok.close()


def test_a_stalled_client_delays_no_other(agent: Agent) -> None:
    stalled = raw_client(agent.path)
    stalled.sendall(proto.encode("hello") + proto.encode("open", pid=None, probes=[]))
    # Never reads: its answers fill the socket's buffers and its thread waits on them.
    stalled.sendall(proto.encode("snapshot") * 2000)
    other = AgentConnection(str(agent.path))
    other.open(None, [], 0.02, False, 1000)
    start = time.monotonic()
    for _ in range(5):
        assert other.snapshot(with_hist=False).devices
    assert time.monotonic() - start < 2.0
    other.close()
    stalled.close()


def test_twenty_clients_at_once(agent: Agent) -> None:
    conns = [AgentConnection(str(agent.path)) for _ in range(20)]
    for c in conns:
        c.open(None, [], 0.02, False, 1000)
    assert all(c.snapshot(with_hist=False).devices for c in conns)
    for c in conns:
        c.close()


def test_a_restarted_agent_is_found_again_and_the_probes_re_added(
    shared: Path, workload_bin: Path
) -> None:
    target = subprocess.Popen([str(workload_bin), "forever", "100"], stdout=subprocess.DEVNULL)
    first = Agent(shared / "agent.sock")
    conn = AgentConnection(str(first.path))
    try:
        conn.open(target.pid, [f"uprobe:{workload_bin}:fast_fn"], 0.02, False, 1000)
        assert conn.snapshot(with_hist=False).probes[0].state == "attached"
        first.stop(signal.SIGKILL)
        assert nothing_left(1.0), our_programs()  # SIGKILL of the agent leaves nothing
        lost = conn.snapshot(with_hist=False)
        assert any("lost the agent" in w for w in lost.warnings)
        second = Agent(shared / "agent.sock")
        try:
            back = conn.snapshot(with_hist=False)
            assert any("is back: probes re-added" in w for w in back.warnings), back.warnings
            time.sleep(0.5)
            again = conn.snapshot(with_hist=False)
            assert again.probes[0].state == "attached" and again.probes[0].count > 0
        finally:
            conn.close()
            second.stop()
    finally:
        target.kill()
        target.wait()
    assert nothing_left(5.0), our_programs()


def test_record_through_the_agent_as_a_user(
    agent: Agent, users: tuple[User, User], shared: Path
) -> None:
    alice, _ = users
    target = workload_as(alice, shared / "workload", "forever", "100")
    out = shared / f"rec-{uuid.uuid4().hex}.jsonl"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.fchown(fd, alice.uid, alice.gid)

    def client(up: int, _down: int) -> None:
        sys.stdout = os.fdopen(fd, "w")  # not pytest's capture: the file, as `--out -`
        code = cli_main(
            [
                "record",
                "--agent",
                str(agent.path),
                "--pid",
                str(target.pid),
                "--probe",
                f"uprobe:{shared / 'workload'}:fast_fn",
                "--duration",
                "8",  # the wait for a busy agent and its compile count in it (4 s ran out once)
            ]
        )
        sys.stdout.flush()
        say(up, code=code)

    try:
        c = AsUser(alice, client)
        assert c.read() == {"code": 0}
        assert c.wait() == 0
        lines = [json.loads(x) for x in out.read_text().splitlines()]
        assert lines[-1]["final"] and lines[-1]["probes"][0]["count"] > 1000
        assert lines[-1]["schema_version"] == 1
    finally:
        os.close(fd)
        out.unlink()
        target.kill()
        target.wait()


def test_record_a_command_through_the_agent(agent: Agent, shared: Path, tmp_path: Path) -> None:
    r = subprocess.run(
        [
            *CLI,
            "record",
            "--agent",
            str(agent.path),
            "--probe",
            f"uprobe:{shared / 'workload'}:fast_fn",
            "--",
            str(shared / "workload"),
            "fast",
            "3000",
            "exit",
            "7",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 7, r.stderr
    last = json.loads(r.stdout.splitlines()[-1])
    assert last["final"] and last["probes"][0]["count"] == 3000


def test_a_probe_the_kernel_refuses_through_the_agent_stops_record(
    agent: Agent, shared: Path
) -> None:
    """As record does locally: another tool's uprobe on held_fn makes the kernel refuse
    the agent's link there; record names it on stderr and runs nothing (it ran the
    command unprobed and exited 0)."""
    from tests.system.ebpf.test_cli_probes import HOLDER

    binary = shared / "workload"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(binary), "held_fn"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        args = [*CLI, "record", "--agent", str(agent.path), "--probe", f"uprobe:{binary}:*_fn"]
        command = ["--", str(binary), "held", "3", "1000"]
        going = subprocess.run(
            [*args, "--keep-going", *command], capture_output=True, text=True, timeout=120
        )
        assert going.returncode == 0, going.stderr
        rows = json.loads(going.stdout.splitlines()[-1])["probes"]
        if not [p for p in rows if p["state"] == "error"]:
            return  # a kernel that lets both attach: nothing is refused
        line = f"adaptyst-top: uprobe:{binary}:*_fn: held_fn: the kernel refused the probe: "
        assert any(x.startswith(line) for x in going.stderr.splitlines()), going.stderr
        stopped = subprocess.run([*args, *command], capture_output=True, text=True, timeout=120)
        assert stopped.returncode == 1, stopped.stderr
        said = stopped.stderr.splitlines()
        assert said[0].startswith(line) and said[-1] == (
            "adaptyst-top: not running the command with probes the kernel refused "
            "(--keep-going does)"
        ), said
        assert stopped.stdout == ""  # the command never ran
    finally:
        holder.communicate("")


def test_doctor_as_a_user_says_what_the_agent_lets_them_do(
    agent: Agent, users: tuple[User, User]
) -> None:
    alice, _ = users
    from adaptyst_top.runtime.remote.check import check_agent

    def client(up: int, _down: int) -> None:
        there, absent = check_agent(str(agent.path)), check_agent(str(agent.path) + ".none")
        say(up, there=there.to_json(), absent=absent.to_json())

    c = AsUser(alice, client)
    got = c.read()
    assert got["there"] == {
        "name": "agent",
        "status": "ok",
        "detail": f"agent at {agent.path}: you may probe your own processes (--pid, -- CMD)",
        "fix": "",
    }
    absent = got["absent"]
    assert isinstance(absent, dict) and absent["status"] == "missing"
    assert "no agent at" in absent["detail"] and "docs/install.md" in absent["fix"]
    assert c.wait() == 0
    # The whole report: eBPF is not the user's, and needs no fix where the agent answers.
    done = subprocess.run(
        [*CLI, "doctor", "--no-smoke", "--agent", str(agent.path)],
        capture_output=True, text=True, timeout=120, user=alice.uid, group=alice.gid,
        extra_groups=[],
    )  # fmt: skip
    lines = {line.split()[0]: line for line in done.stdout.splitlines()}
    assert lines["agent"].split()[1] == "ok", done.stdout
    assert "run as root" not in lines["ebpf"] and "none needed" in lines["ebpf"], done.stdout


@pytest.mark.parametrize("hello_after_the_close", [False, True])
def test_one_user_cannot_crowd_out_the_others(
    agent: Agent, users: tuple[User, User], shared: Path, hello_after_the_close: bool
) -> None:
    most = AgentSettings().max_connections_per_user

    alice, _ = users

    def client(up: int, _down: int) -> None:
        conns = [AgentConnection(str(agent.path)) for _ in range(most)]
        if hello_after_the_close:
            # The agent turns the connection away before the client's hello goes out
            # (seen beside four busy loops): the hello meets a broken pipe.
            send = SocketTransport.send

            def late(link: SocketTransport, data: bytes) -> None:
                link.sock.recv(1, socket.MSG_PEEK)  # the agent's reason is here...
                time.sleep(0.3)  # ...and it has closed the connection
                send(link, data)

            SocketTransport.send = late  # type: ignore[method-assign]
        try:
            AgentConnection(str(agent.path))
            one_more = "connected"
        except OSError as exc:
            one_more = str(exc)
        if hello_after_the_close:
            SocketTransport.send = send  # type: ignore[method-assign]
        say(up, one_more=one_more, held=len(conns))

    c = AsUser(alice, client)
    got = c.read()
    assert f"the most a user may have ({most})" in str(got["one_more"])
    assert c.wait() == 0


def test_list_through_the_agent_for_what_the_user_may_probe(
    agent: Agent, users: tuple[User, User], shared: Path
) -> None:
    alice, _ = users
    mine = workload_as(alice, shared / "workload")
    roots = subprocess.Popen([str(shared / "workload")], stdin=subprocess.PIPE)

    def client(up: int, _down: int) -> None:
        out = []
        for request in (
            {"pid": mine.pid, "pattern": "*_fn"},
            {"pid": roots.pid, "pattern": "*"},
            {"binary": "c", "pattern": "strchr"},
        ):
            full = {"binary": None, "pid": None, "functions": True, "usdt": True, "all": False}
            conn = AgentConnection(str(agent.path))
            try:
                objects, known = conn.list_objects({**full, **request})
                out.append({"objects": objects, "known": known})
            except AgentRefused as exc:
                out.append({"refused": str(exc)})
            conn.close()
        say(up, answers=out)

    try:
        c = AsUser(alice, client)
        own, other, libc = c.read()["answers"]  # type: ignore[misc]
        names = {f["name"] for f in own["objects"][0]["functions"]}
        assert {"fast_fn", "held_fn"} <= names and own["known"]
        assert all("entry" in f for f in own["objects"][0]["functions"])
        assert own["objects"][0]["usdt"] == []  # the glob matches no USDT probe name
        assert other == {
            "refused": f"PID {roots.pid} belongs to root; you may probe your own processes"
        }
        (strchr,) = libc["objects"][0]["functions"]
        assert strchr["name"] == "strchr" and "entry" in strchr
        assert c.wait() == 0
    finally:
        mine.kill()
        mine.wait()
        roots.kill()
        roots.wait()


def test_a_stop_asked_from_a_signal_handler_ends_serving_at_once_and_starts_no_thread(
    tmp_path: Path,
) -> None:
    """The agent's signal handler only asks (a flag, a shutdown): a handler that started
    a thread could land while the main thread starts a client's and wait for ever on
    threading's lock. The main thread, asleep in accept(), leaves serve_forever() at
    once, and stops the rest itself."""
    import threading

    from adaptyst_top.agent.core.server import ACCEPT_WAKE_S
    from adaptyst_top.agent.core.server import Agent as RealAgent

    agent = RealAgent(tmp_path / "agent.sock")
    threads_started: list[set[threading.Thread]] = []

    def handler(_signum: int, _frame: object) -> None:
        # Threads that appeared, not a count: the timer that sent the signal may end
        # while the handler runs, and a count would call that a thread started.
        before = set(threading.enumerate())
        agent.request_stop()
        threads_started.append(set(threading.enumerate()) - before)

    main = threading.get_ident()
    old = signal.signal(signal.SIGUSR1, handler)
    timer = threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGUSR1))
    try:
        timer.start()
        t0 = time.monotonic()
        agent.serve_forever()
        took = time.monotonic() - t0
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, old)
        agent.stop()
    assert threads_started == [set()]
    assert took < ACCEPT_WAKE_S  # woken by the shutdown, not by accept's timeout
    assert not (tmp_path / "agent.sock").exists()
