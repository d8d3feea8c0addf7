"""`make install-agent`, as an admin runs it on a node whose first `python3` is not the
distribution's: twice, into a fresh PREFIX; the venv is on the distribution's python3, with
no bcc, every user can run it, its `doctor` as root sees eBPF,
and an agent started as the installed unit says probes a user's own program in /tmp."""

from __future__ import annotations

import json
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.bpf_objects import none_left
from tests.support.marks import requires_root
from tests.support.paths import REPO
from tests.support.spin import BUSY_LOOP, spin
from tests.system.agent.test_agent import with_the_units_capabilities

pytestmark = [pytest.mark.ebpf, requires_root]
UNIT = "adaptyst-top-agent.service"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path]]:
    """(PREFIX, unit folder, config folder) after two runs of the install."""
    base = Path(tempfile.mkdtemp(prefix="adt-install-"))
    base.chmod(0o755)  # every user runs PREFIX/bin/adaptyst-top
    prefix, units, conf = base / "prefix", base / "units", base / "conf"
    # A python3 first in PATH that is not the distribution's (a module, conda, pyenv):
    # the install must not use it.
    decoy = tmp_path_factory.mktemp("decoy")
    (decoy / "python3").write_text("#!/bin/sh\necho 'the decoy python3 was used' >&2\nexit 3\n")
    (decoy / "python3").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{decoy}:{os.environ['PATH']}",
        "UNITDIR": str(units),
        "CONFDIR": str(conf),
    }
    env.pop("PYTHON", None)
    runs = [
        subprocess.run(
            ["make", "-s", "-C", str(REPO), "install-agent", f"PREFIX={prefix}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        for _ in range(2)
    ]
    try:
        for r in runs:
            assert r.returncode == 0, r.stdout + r.stderr
        assert f"ok: {prefix} (on " in runs[1].stdout  # the second run keeps the venv
        assert "kept as it is" in runs[1].stdout
        # The admin is told what users run.
        assert f"users run {prefix}/bin/adaptyst-top" in runs[1].stdout
        yield prefix, units, conf
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_venv_is_on_the_distributions_python_with_no_bcc(
    installed: tuple[Path, Path, Path],
) -> None:
    prefix, _, conf = installed
    cfg = dict(line.split(" = ", 1) for line in (prefix / "pyvenv.cfg").read_text().splitlines())
    assert os.path.realpath(cfg["executable"]) == os.path.realpath("/usr/bin/python3")
    # Nothing of bcc: the programs were compiled with the package, libbpf loads them.
    r = subprocess.run([str(prefix / "bin/python"), "-I", "-c", "import bcc"], capture_output=True)
    assert r.returncode != 0
    r = subprocess.run(
        [str(prefix / "bin/adaptyst-top"), "doctor", "--json"], capture_output=True, text=True
    )
    caps = {c["name"]: c for c in json.loads(r.stdout)}
    # eBPF works (a real uprobe's smoke test) from the programs the install built: libbpf
    # loads them, no compiler and no kernel headers asked for.
    parts = {p["name"]: p["status"] for p in caps["ebpf"]["parts"]}
    assert caps["ebpf"]["status"] == "ok", caps["ebpf"]
    assert parts["libbpf"] == parts["btf"] == parts["smoke-test"] == "ok", parts
    assert "kernel-headers" not in parts and "bcc" not in parts, parts
    # The commented config states the code's defaults.
    text = "\n".join(
        line[2:] for line in (conf / "agent.toml").read_text().splitlines() if " = " in line
    )
    code = (
        "import sys, tomllib, dataclasses;"
        "from adaptyst_top.runtime.remote.settings import AgentSettings;"
        "c = tomllib.loads(sys.stdin.read());"
        "d = dataclasses.asdict(AgentSettings()); d.pop('cpu_power_model');"
        "c.pop('cpu_power_model', None); assert c == d, c"  # unset: an example shown
    )
    r = subprocess.run([str(prefix / "bin/python"), "-c", code], input=text, text=True)
    assert r.returncode == 0


def test_the_units_documentation_is_what_the_install_wrote(
    installed: tuple[Path, Path, Path],
) -> None:
    prefix, units, _ = installed
    unit = (units / "adaptyst-top-agent.service").read_text()
    (line,) = [ln for ln in unit.splitlines() if ln.startswith("Documentation=")]
    docs = line.split("=", 1)[1].split()
    assert docs and all(d.startswith(f"file://{prefix}/") for d in docs), docs
    for d in docs:
        assert Path(d.removeprefix("file://")).is_file(), d


def test_a_prefix_users_cannot_reach_is_refused_in_one_line(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    r = subprocess.run(
        ["make", "-s", "-C", str(REPO), "install-agent", f"PREFIX={private}/adt"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode != 0
    said = [ln for ln in r.stderr.splitlines() if ln.startswith("install-agent:")]
    assert len(said) == 1 and f"{private} is mode 700" in said[0], r.stderr
    assert not (private / "adt").exists()
    # Nor one another user could have planted: theirs, or writable by others.
    for mode, uid, why in (
        (0o755, 65534, "belongs to uid 65534"),
        (0o777, 0, "writable by others"),
    ):
        planted = tmp_path / f"planted-{mode:o}-{uid}"
        planted.mkdir()
        planted.chmod(mode)
        os.chown(planted, uid, -1)
        r = subprocess.run(
            ["make", "-s", "-C", str(REPO), "install-agent", f"PREFIX={planted}/adt"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        said = [ln for ln in r.stderr.splitlines() if ln.startswith("install-agent:")]
        assert r.returncode != 0 and len(said) == 1 and why in said[0], r.stderr
        assert not (planted / "adt").exists()


@pytest.fixture
def user() -> Iterator[pwd.struct_passwd]:
    name = f"adt-i-{uuid.uuid4().hex[:6]}"
    subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", name], check=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], check=False)


def test_the_unit_probes_a_users_program_in_tmp(
    installed: tuple[Path, Path, Path],
    user: pwd.struct_passwd,
    workload_bin: Path,
) -> None:
    prefix, units, _ = installed
    unit = (units / UNIT).read_text()
    (exec_start,) = [
        x[len("ExecStart=") :] for x in unit.splitlines() if x.startswith("ExecStart=")
    ]
    # The unit's sandbox leaves the agent the users' view of the files they name (its
    # mount namespace is a read-only replica that takes the host's mounts as they come).
    for setting in ("PrivateTmp=", "TemporaryFileSystem=", "RootDirectory="):
        assert setting not in unit
    run_dir = Path(tempfile.mkdtemp(prefix="adt-run-"))
    run_dir.chmod(0o755)
    mine = Path(tempfile.mkdtemp(prefix="adt-user-"))  # the user's own folder in /tmp
    os.chown(mine, user.pw_uid, user.pw_gid)
    prog = mine / "prog"
    shutil.copy(workload_bin, prog)
    os.chown(prog, user.pw_uid, user.pw_gid)
    sock = run_dir / "agent.sock"
    agent = subprocess.Popen(
        [*with_the_units_capabilities(), *shlex.split(exec_start), "--socket", str(sock)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not _answers(sock):
            assert agent.poll() is None, agent.communicate()[1]
            assert time.monotonic() < deadline
            time.sleep(0.05)
        cli = str(prefix / "bin/adaptyst-top")
        r = launch(cli, sock, user, f"uprobe:{prog}:fast_fn", [str(prog), "fast", "3000"])
        assert r[0] == [3000], r
        # Its exec, seen by the agent mid-way, once read as not dumpable and ended the
        # probes (13 of 20 runs beside a busy suite): every run counts every call.
        hogs = [spin(BUSY_LOOP) for _ in range(2)]
        try:
            runs = [
                launch(cli, sock, user, "uprobe:c:getppid", [str(prog), "ppid", "30"])
                for _ in range(10)
            ]
        finally:
            for h in hogs:
                h.kill()
                h.wait()
        for counts, warnings in runs:
            assert counts == [30], (counts, warnings)
            assert not any("dumpable" in w for w in warnings), warnings
    finally:
        agent.terminate()
        agent.wait(60)
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.rmtree(mine, ignore_errors=True)
    assert none_left()


def launch(
    cli: str, sock: Path, user: pwd.struct_passwd, spec: str, command: list[str]
) -> tuple[list[int], list[str]]:
    """USER's `record --agent SOCK -- COMMAND exit 7`: the counts and warnings at its end."""
    r = subprocess.run(
        [cli, "record", "--agent", str(sock), "--probe", spec, "--", *command, "exit", "7"],
        user=user.pw_uid,
        group=user.pw_gid,
        extra_groups=[],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 7, r.stderr
    last = json.loads(r.stdout.splitlines()[-1])
    assert last["final"], last
    return [p["count"] for p in last["probes"]], [
        w for w in last.get("warnings", []) if "exited" not in w
    ]


def _answers(path: Path) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        s.close()
