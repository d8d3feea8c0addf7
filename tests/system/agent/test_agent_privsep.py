"""Privilege separation, attacked as a real user would: while alice makes the agent open
her files as fast as she can, at each fs.suid_dumpable (0, 1, 2; restored after), no
thread of the agent ever has her uid in any of real/effective/saved, she can read
nothing private under /proc/AGENT (mem, environ, maps, auxv, fd/) nor under her own
opener's, every kill of an agent thread she tries gets EPERM, and bob's snapshots keep
coming."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adaptyst_top.agent.core.opener import NotOpened, open_as
from adaptyst_top.runtime.remote.client import AgentConnection
from tests.support.marks import requires_root
from tests.system.agent import test_agent
from tests.system.agent.test_agent import Agent, AsUser, User, children_as, hear, say, workload_as

# serial: sets fs.suid_dumpable; races openers against a scan
pytestmark = [pytest.mark.serial, pytest.mark.ebpf, requires_root]
agent, shared, users = test_agent.agent, test_agent.shared, test_agent.users  # fixtures
ATTACK_S = 4.0
PRIVATE = ("mem", "environ", "maps", "auxv", "fd")
SUID_DUMPABLE = Path("/proc/sys/fs/suid_dumpable")


@pytest.fixture(params=[0, 1, 2])
def suid_dumpable(request: pytest.FixtureRequest) -> Iterator[int]:
    was = SUID_DUMPABLE.read_text().strip()
    SUID_DUMPABLE.write_text(str(request.param))
    try:
        yield int(request.param)
    finally:
        SUID_DUMPABLE.write_text(was)


def _tasks(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def _uids(pid: int, tid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    return [int(x) for x in line.split()[1:4]]
    except OSError:
        pass  # a thread that ended meanwhile
    return []


def _has_memory(pid: int) -> bool:
    """Whether PID has an address space (statm is anyone's to read)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[0]) > 0
    except (OSError, ValueError, IndexError):
        return False


def _follows_an_fd(pid: int) -> bool:
    for n in os.listdir(f"/proc/{pid}/fd"):
        try:
            os.readlink(f"/proc/{pid}/fd/{n}")
            return True
        except OSError:
            pass
        try:
            os.close(os.open(f"/proc/{pid}/fd/{n}", os.O_RDONLY | os.O_CLOEXEC))
            return True
        except OSError:
            pass
    return False


def _what_alice_got(agent_pid: int, uid: int) -> dict[str, object]:
    """One sweep, as alice, over the agent's process and each of its threads, and her
    own openers: hers, yet not dumpable (at suid_dumpable=1 she could else ptrace one,
    take its socket and answer the agent in its name)."""
    found: list[str] = []
    for opener in children_as(agent_pid, uid):
        if opener == os.getpid():
            continue  # the scanner itself, where the openers' parent is the test's process
        for name in ("mem", "fd", "environ"):
            try:
                had = _has_memory(opener)
                if name == "fd":
                    # Her opener's fd folder is hers to list for the moment its euid is
                    # hers and it is not yet undumpable (the kernel owns it so): names
                    # only. A hold is a descriptor she can follow or open.
                    got = _follows_an_fd(opener)
                else:
                    os.close(os.open(f"/proc/{opener}/{name}", os.O_RDONLY))
                    # An opener that exited (a zombie) has no memory to read and opens
                    # empty: only an open over a live address space is a hold.
                    got = had and _has_memory(opener)
            except OSError:
                continue
            if got:
                found.append(f"her opener's /proc/{opener}/{name} opened")
    kills = 0
    for tid in [agent_pid, *_tasks(agent_pid)]:
        base = f"/proc/{agent_pid}" if tid == agent_pid else f"/proc/{agent_pid}/task/{tid}"
        if uid in _uids(agent_pid, tid):
            found.append(f"{tid}: has uid {uid}")
        for name in PRIVATE:
            for flags in (os.O_RDONLY, os.O_RDWR):
                try:
                    fd = os.open(f"{base}/{name}", flags | os.O_CLOEXEC)
                except OSError:
                    continue
                os.close(fd)
                found.append(f"{base}/{name} opened ({flags})")
        try:
            os.kill(tid, 0)
            found.append(f"kill({tid}, 0) allowed")
        except OSError as exc:
            if exc.errno == errno.EPERM:
                kills += 1
            elif exc.errno != errno.ESRCH:
                found.append(f"kill({tid}, 0): {exc}")
    return {"found": found, "kills": kills}


def test_a_user_making_the_agent_open_files_gets_no_hold_on_it(
    suid_dumpable: int, agent: Agent, users: tuple[User, User], shared: Path
) -> None:
    alice, bob = users
    agent_pid = agent.proc.pid
    mine, theirs = workload_as(alice, shared / "workload"), workload_as(bob, shared / "workload")

    def opener(up: int, down: int) -> None:  # alice: the agent opens her files, in a loop
        conn = AgentConnection(str(agent.path))
        say(up, ready=True)
        n = 0
        end = time.monotonic() + ATTACK_S
        while time.monotonic() < end:
            conn.list_objects({"pid": mine.pid, "binary": None, "usdt": True})
            n += 1
        say(up, lists=n)

    def scanner(up: int, down: int) -> None:  # alice: a thread scanner, as fast as it goes
        say(up, ready=True)
        hear(down)
        found: list[object] = []
        sweeps = kills = 0
        end = time.monotonic() + ATTACK_S
        while time.monotonic() < end:
            got = _what_alice_got(agent_pid, alice.uid)
            found.extend(got["found"])  # type: ignore[arg-type]
            kills += int(got["kills"])  # type: ignore[call-overload]
            sweeps += 1
        say(up, found=found[:10], sweeps=sweeps, kills=kills)

    def watcher(up: int, down: int) -> None:  # bob: his snapshots, timed
        conn = AgentConnection(str(agent.path))
        conn.open(theirs.pid, [], 0.02, False, 1000)
        say(up, ready=True)
        hear(down)
        times: list[float] = []
        end = time.monotonic() + ATTACK_S
        while time.monotonic() < end:
            t = time.monotonic()
            conn.snapshot(with_hist=False)
            times.append(time.monotonic() - t)
            time.sleep(0.02)
        say(up, times=times)

    try:
        seen_as_root: list[str] = []
        s, w = AsUser(alice, scanner), AsUser(bob, watcher)
        assert s.read() == {"ready": True} and w.read() == {"ready": True}
        o = AsUser(alice, opener)
        assert o.read() == {"ready": True}
        s.tell()
        w.tell()
        end = time.monotonic() + ATTACK_S
        while time.monotonic() < end:  # root's view, too: every thread's ids
            seen_as_root += [str(t) for t in _tasks(agent_pid) if alice.uid in _uids(agent_pid, t)]
        opened, scanned, watched = o.read(), s.read(), w.read()
        assert o.wait() == s.wait() == w.wait() == 0
        assert int(opened["lists"]) > 5, opened  # type: ignore[call-overload]
        assert seen_as_root == [], seen_as_root
        assert scanned["found"] == [], scanned
        assert int(scanned["kills"]) >= int(scanned["sweeps"]) > 0, scanned  # type: ignore[call-overload]
        times = watched["times"]
        assert isinstance(times, list) and len(times) > 10, watched  # answered throughout
        assert agent.proc.poll() is None
    finally:
        for p in (mine, theirs):
            p.kill()
            p.wait()


def test_no_fresh_opener_is_hers_to_read_while_it_takes_her_ids(users: tuple[User, User]) -> None:
    """At fs.suid_dumpable=1 the change of uid made each fresh opener dumpable for the
    moment before it said not: alice, scanning as fast as she goes, opened the memory of
    about one opener in ten while it started (23 of 239). Root starts openers as fast as
    it can (each open under another group set ends the last and starts one) while she
    scans them; she gets none."""
    from adaptyst_top.agent.core import opener as open_as_user

    alice, _ = users
    parent = os.getpid()

    def scanner(up: int, down: int) -> None:
        say(up, ready=True)
        hear(down)
        found: list[object] = []
        sweeps = 0
        end = time.monotonic() + ATTACK_S
        while time.monotonic() < end:
            found.extend(_what_alice_got(parent, alice.uid)["found"])  # type: ignore[arg-type]
            sweeps += 1
        say(up, found=found[:10], sweeps=sweeps)

    was = SUID_DUMPABLE.read_text().strip()
    SUID_DUMPABLE.write_text("1")
    s = AsUser(alice, scanner)
    try:
        assert s.read() == {"ready": True}
        s.tell()
        started = 0
        end = time.monotonic() + ATTACK_S
        while time.monotonic() < end:
            groups = [alice.gid] if started % 2 else []
            for fd in open_as(alice.uid, alice.gid, groups, ["/etc/passwd"]):
                if fd is not None:
                    os.close(fd)
            started += 1
        scanned = s.read()
    except BaseException:
        s.kill()
        raise
    finally:
        SUID_DUMPABLE.write_text(was)
        open_as_user.end_all()
    assert s.wait() == 0
    assert started > 20, started
    assert scanned["found"] == [], scanned
    assert int(scanned["sweeps"]) > started, scanned  # type: ignore[call-overload]


def test_an_opener_that_hangs_costs_its_user_one_line(
    users: tuple[User, User], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The opener is its user's process: alice stops hers (SIGSTOP, as she may). The agent
    gives up on it after OPEN_TIMEOUT_S with one line, kills and reaps it, and bob's
    opens go on."""
    from adaptyst_top.agent.core import kept_workers
    from adaptyst_top.agent.core import opener as open_as_user

    alice, bob = users
    stopped: list[int] = []
    real_popen = subprocess.Popen

    def stopping_popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        proc = real_popen(*args, **kwargs)
        os.kill(proc.pid, signal.SIGSTOP)
        stopped.append(proc.pid)
        return proc

    open_as_user.end_all()  # a kept opener of alice's would answer without a start
    monkeypatch.setattr(kept_workers.subprocess, "Popen", stopping_popen)
    monkeypatch.setattr(open_as_user, "OPEN_TIMEOUT_S", 0.5)
    with pytest.raises(NotOpened, match="took over"):
        open_as(alice.uid, alice.gid, [alice.gid], ["/etc/passwd"])
    monkeypatch.undo()
    assert stopped and not Path(f"/proc/{stopped[0]}").exists()  # killed and reaped
    fds = open_as(bob.uid, bob.gid, [bob.gid], ["/etc/passwd"])
    assert fds[0] is not None
    os.close(fds[0])


def test_a_descriptor_that_proves_no_read_access_is_refused(tmp_path: Path) -> None:
    """An opener answered in a user's name (ptraced at suid_dumpable=1) sent an O_PATH
    descriptor of a root 0600 file: root reopened it through /proc/self/fd and listed
    it. Only a descriptor opened for reading is taken."""
    from adaptyst_top.agent.core.opener import _checked

    secret = tmp_path / "secret"
    secret.write_bytes(b"\x7fELF")
    secret.chmod(0o600)
    assert _checked(os.open(secret, os.O_PATH)) is None
    assert _checked(os.open(secret, os.O_WRONLY)) is None
    fd = _checked(os.open(secret, os.O_RDONLY))
    assert fd is not None
    os.close(fd)


def test_many_long_paths_are_opened_in_one_call(shared: Path, users: tuple[User, User]) -> None:
    """256 paths near PATH_MAX in one request were refused by the socket (EMSGSIZE: a
    process mapping 60 such files could not be listed); they go in several messages."""
    alice, _ = users
    deep = shared
    while len(str(deep)) < 3800:
        deep = deep / ("d" * 200)
    deep.mkdir(parents=True, mode=0o755)
    (deep / "f").write_bytes(b"x")
    (deep / "f").chmod(0o644)
    try:
        fds = open_as(alice.uid, alice.gid, [alice.gid], [str(deep / "f")] * 256)
        assert len(fds) == 256 and all(fd is not None for fd in fds)
        for fd in fds:
            os.close(fd)  # type: ignore[arg-type]
    finally:
        shutil.rmtree(shared / ("d" * 200))


def test_a_kept_opener_outlives_the_thread_that_started_it_and_its_users_kill(
    users: tuple[User, User],
) -> None:
    """Each client has a thread: an opener that died with the thread that started it
    (PR_SET_PDEATHSIG is per thread) failed the next client's open as 'answered
    wrongly'. One its user kills is replaced at the next open."""
    import threading

    from adaptyst_top.agent.core import opener as open_as_user

    alice, _ = users
    open_as_user.end_all()

    def one() -> None:
        for fd in open_as(alice.uid, alice.gid, [alice.gid], ["/etc/passwd"]):
            if fd is not None:
                os.close(fd)

    t = threading.Thread(target=one)
    t.start()
    t.join()
    (kept,) = open_as_user._openers.values()
    time.sleep(0.2)
    assert kept.proc.poll() is None  # alive after its thread ended
    one()
    assert list(open_as_user._openers.values()) == [kept]  # and used again
    os.kill(kept.proc.pid, signal.SIGKILL)  # as alice may
    kept.proc.wait()
    one()  # a fresh one, no error
    assert list(open_as_user._openers.values()) != [kept]
    open_as_user.end_all()


def test_a_user_keeps_one_opener_whatever_groups_they_ask_under(
    users: tuple[User, User],
) -> None:
    """Openers are per set of ids; a user asking under many group sets (newgrp) kept a
    process for each."""
    from adaptyst_top.agent.core import opener as open_as_user

    alice, _ = users
    open_as_user.end_all()
    for groups in ([alice.gid], [alice.gid, 100], [alice.gid, 100, 27]):
        for fd in open_as(alice.uid, alice.gid, groups, ["/etc/passwd"]):
            if fd is not None:
                os.close(fd)
    assert [k[0] for k in open_as_user._openers] == [alice.uid]
    open_as_user.end_all()
