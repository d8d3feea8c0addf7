"""A process in its own mount namespace, as in a container (Apptainer, Podman): the path
its binary has there does not exist on the host. Specs name it as the process sees it;
the engine opens it under /proc/PID/root; `list --pid` shows the container's view."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from adaptyst_top.agent.core.authorization import Peer, pin_file
from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine
from adaptyst_top.runtime.listing import list_objects
from adaptyst_top.snapshot import ProbeEntry
from adaptyst_top.system.targets import TargetError, mount_root, resolve_target
from tests.support.bpf_objects import none_left
from tests.support.marks import requires_root
from tests.support.workload import Workload

pytestmark = [pytest.mark.ebpf, requires_root]


class Contained(Workload):
    """The test workload copied into a tmpfs mounted in a mount namespace of its own."""

    def __init__(self, binary: Path, inside: Path) -> None:
        self.binary = inside / "app" / "solver"  # the path as the process sees it
        script = (
            f"mount -t tmpfs adt-container {inside} && mkdir {inside}/app && "
            f"cp {binary} {self.binary} && ln -s /etc/shadow {inside}/app/shadow && "
            f"exec {self.binary}"
        )
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "ready"
        self.pid = self.proc.pid


def probed_rows(
    engine: ProbeEngine, w: Workload, specs: list[str], commands: list[str]
) -> dict[str, ProbeEntry]:
    """SPECS attached, COMMANDS run in W: the rows by name."""
    groups = [engine.add(spec) for spec in specs]
    assert engine.wait(120)
    assert all(g.state == "attached" for g in groups), [g.error for g in groups]
    for command in commands:
        w.run(command)
    engine.read()
    return {r.name: r for r in engine.snapshot_rows()}


@pytest.fixture
def contained(workload_bin: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    inside = tmp_path / "container-root"
    inside.mkdir()
    w = Contained(workload_bin, inside)
    yield w
    w.kill()


def test_a_process_in_another_mount_namespace_is_probed_exactly(contained: Contained) -> None:
    b = contained.binary
    assert not b.exists()  # on the host: the file is only in the process's namespace
    root = mount_root(contained.pid)
    assert root == f"/proc/{contained.pid}/root"
    assert resolve_target(str(b), contained.pid) == root + str(b)
    with pytest.raises(TargetError, match="container"):
        resolve_target("app/solver", contained.pid)  # relative: whose cwd?
    with ProbeEngine(pid=contained.pid) as engine:
        specs = [f"uprobe:{b}:fast_fn", f"usdt:{b}:adaptyst_test:tick"]
        rows = probed_rows(engine, contained, specs, ["fast 3000", "tick 700"])
        assert rows["fast_fn"].count == 3000
        assert rows["adaptyst_test:tick"].count == 700
        # The row says where the file is: under the process's root, a container's.
        assert rows["fast_fn"].target.startswith(root)
    assert none_left()


def test_list_shows_the_containers_view(contained: Contained) -> None:
    objects = list_objects(contained.pid, None, "fast*", True, True, False, None)
    main = objects[0]
    assert main["path"] == str(contained.binary)
    assert main["container_root"] == f"/proc/{contained.pid}/root"
    assert [f["name"] for f in main["functions"]] == ["fast_fn"]
    libc = resolve_target("c", contained.pid)  # a library short name: what it maps
    assert libc.startswith(main["container_root"]) and "libc" in libc


def test_the_agent_checks_a_containers_file_without_following_its_links(
    contained: Contained,
) -> None:
    # An absolute link in the container would be followed from the host's root: the
    # agent would read the host's /etc/shadow for a user who cannot.
    # The owner of the test's folders (pytest's are 0700), taken as an ordinary user.
    user = Peer(pid=1, uid=0, gid=0, groups=frozenset({0}), privileged=False)
    assert pin_file(user, str(contained.binary), contained.pid, None) is None  # 0755, as copied
    why = pin_file(user, str(contained.binary.parent / "shadow"), contained.pid, None)
    assert why is not None and "symbolic link" in why


class PodmanContainer(Workload):
    """The test workload in a real Podman container: an image imported from a root with
    the binary at /app/workload (not a path on the host) and the libraries it needs."""

    def __init__(self, binary: Path, tmp: Path) -> None:
        root = tmp / "rootfs"
        (root / "app").mkdir(parents=True)
        shutil.copy(binary, root / "app" / "workload")
        ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True)
        for lib in re.findall(r"(/\S+)", ldd.stdout):
            (root / lib.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(lib, root / lib.lstrip("/"))
        tag = f"adaptyst-top-test-{os.getpid()}"
        self.image, self.name = f"localhost/{tag}:latest", tag
        tar = tmp / "rootfs.tar"
        subprocess.run(["tar", "-C", str(root), "-cf", str(tar), "."], check=True)
        subprocess.run(
            ["podman", "import", "-q", str(tar), self.image], check=True, stdout=subprocess.DEVNULL
        )
        self.binary = Path("/app/workload")  # as the process sees it
        # runc and cgroupfs: this machine's cgroups are hybrid (crun refuses them); the
        # limits: podman's default open-file limit is above what root may set here.
        self.proc = subprocess.Popen(
            [
                "podman",
                "run",
                "--rm",
                "-i",
                "--name",
                self.name,
                "--network",
                "none",
                "--runtime",
                "runc",
                "--cgroup-manager",
                "cgroupfs",
                "--ulimit",
                "nofile=1024:1024",
                "--ulimit",
                "nproc=1024:1024",
                self.image,
                str(self.binary),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "ready"
        pid = subprocess.run(
            ["podman", "inspect", "--format", "{{.State.Pid}}", self.name],
            capture_output=True,
            text=True,
            check=True,
        )
        self.pid = int(pid.stdout.strip())  # on the host

    def kill(self) -> None:
        subprocess.run(["podman", "rm", "-f", "-t", "0", self.name], capture_output=True)
        super().kill()
        subprocess.run(["podman", "rmi", "-f", self.image], capture_output=True)


@pytest.mark.skipif(shutil.which("podman") is None, reason="scripts/setup.sh installs podman")
def test_a_process_in_a_real_podman_container_is_probed_exactly(
    workload_bin: Path, tmp_path: Path
) -> None:
    c = PodmanContainer(workload_bin, tmp_path)
    try:
        assert not c.binary.exists()
        root = mount_root(c.pid)
        assert root == f"/proc/{c.pid}/root"
        with ProbeEngine(pid=c.pid) as engine:
            specs = [
                f"uprobe:{c.binary}:fast_fn",
                f"usdt:{c.binary}:adaptyst_test:tick",
                "uprobe:c:getppid",  # the container's libc, by its short name
            ]
            rows = probed_rows(engine, c, specs, ["fast 2500", "tick 300", "ppid 40"])
            assert rows["fast_fn"].count == 2500
            assert rows["adaptyst_test:tick"].count == 300
            assert rows["getppid"].count == 40
            assert rows["fast_fn"].target.startswith(root)
            assert rows["getppid"].target.startswith(root)
        assert none_left()
    finally:
        c.kill()
