"""`record` and `list` as a user runs them: the installed command line, a real target."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.bpf_objects import none_left
from tests.support.cli import CLI
from tests.support.marks import requires_root


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.ebpf
@requires_root
def test_record_command_final_snapshot_and_exit_status(workload_bin: Path) -> None:
    proc = run(
        "record",
        "--interval",
        "0.3",
        "--probe",
        f"uprobe:{workload_bin.name}:held_fn",  # the command's own name resolves
        "--probe",
        f"usdt:{workload_bin}:adaptyst_test:task_begin..task_end@arg1",
        "--",
        str(workload_bin),
        "held",
        "30",
        "1000",
        "task",
        "spmv",
        "20",
        "500",
        "exit",
        "7",
    )
    assert proc.returncode == 7, proc.stderr
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    final = lines[-1]
    assert final["final"] is True and final["target_ended"] is True
    assert set(final) >= {"t", "probes", "devices", "tasks", "advice"}
    by = {(p["name"], p["key"]): p for p in final["probes"]}
    # Attached before the command started: not one call missed.
    assert by[("held_fn", None)]["count"] == 50  # 30 direct + 20 inside the tasks
    assert by[("adaptyst_test:task_begin..task_end", "spmv")]["count"] == 20
    for p in final["probes"]:
        assert p["state"] == "ended"
        assert set(p) >= {
            "spec",
            "name",
            "kind",
            "key",
            "state",
            "count",
            "rate_hz",
            "mean_ns",
            "p50_ns",
            "p95_ns",
            "p99_ns",
            "max_ns",
            "overhead_ns_per_hit",
        }
    assert final["devices"][0]["id"] == "cpu"
    assert "ready" in proc.stderr  # the command's stdout went to stderr
    assert none_left()


@pytest.mark.ebpf
@requires_root
def test_record_duration_with_pid(workload_bin: Path) -> None:
    from tests.support.workload import Workload

    w = Workload(workload_bin)
    try:
        proc = run(
            "record",
            "--pid",
            str(w.pid),
            "--interval",
            "0.2",
            "--duration",
            "0.6",
            "--probe",
            f"uprobe:{workload_bin}:fast_fn",
        )
        assert proc.returncode == 0, proc.stderr
        lines = [json.loads(x) for x in proc.stdout.splitlines()]
        assert 2 <= len(lines) <= 5
        assert lines[-1]["probes"][0]["state"] == "attached"
        assert [round(x["t"], 1) for x in lines] == sorted(round(x["t"], 1) for x in lines)
    finally:
        w.kill()


@pytest.mark.parametrize(
    ("args", "words", "status"),
    [
        (["record", "--pid", "4194000", "--probe", "uprobe:c:malloc"], "no such process", 1),
        (["record", "--probe", "uprobe:c"], "bad probe spec", 1),
        (["record", "--probe", "uprobe:c:x", "--", "/no/such/cmd"], "No such file", 127),
        (["record", "--probe", "uprobe:c:x", "--", "no-such-cmd"], "command not found", 127),
        (["record", "--probe", "uprobe:/etc/passwd:x", "--duration", "1"], "not an ELF", 1),
    ],
)
def test_record_errors_are_one_line(args: list[str], words: str, status: int) -> None:
    proc = run(*args)
    assert proc.returncode == status
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and words in err[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_list_binary_json(workload_bin: Path) -> None:
    proc = run("list", "--binary", str(workload_bin), "--json")
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)["objects"][0]
    funcs = {f["name"]: f for f in obj["functions"]}
    assert funcs["held_fn"]["size"] > 0 and funcs["held_fn"]["address"] > 0
    usdt = {(u["provider"], u["name"]): u for u in obj["usdt"]}
    assert len(usdt[("adaptyst_test", "task_begin")]["arguments"]) == 2
    assert usdt[("adaptyst_test", "tick")]["semaphore"] is None
    assert obj["stripped"] is False


def test_list_stripped_binary_says_so(workload_bin: Path, tmp_path: Path) -> None:
    stripped = tmp_path / "stripped"
    subprocess.run(["strip", "-o", str(stripped), str(workload_bin)], check=True)
    proc = run("list", "--binary", str(stripped))
    assert proc.returncode == 0
    assert "stripped" in proc.stdout.splitlines()[0]


def test_list_pid_and_errors(workload_bin: Path) -> None:
    from tests.support.workload import Workload

    w = Workload(workload_bin)
    try:
        proc = run("list", "--pid", str(w.pid), "--json", "held_f*")
        objs = json.loads(proc.stdout)["objects"]
        assert objs[0]["path"] == str(workload_bin.resolve())
        assert [f["name"] for f in objs[0]["functions"]] == ["held_fn"]
    finally:
        w.kill()
    assert "no such process" in run("list", "--pid", "4194000").stderr
    assert "no such file" in run("list", "--binary", "/no/such").stderr


def test_list_binary_by_library_name() -> None:
    # Like tplist -l c: a short name resolves through the library cache.
    proc = run("list", "--binary", "c", "--json", "--functions", "strcoll")
    obj = json.loads(proc.stdout)["objects"][0]
    assert "libc.so" in obj["path"] and [f["name"] for f in obj["functions"]] == ["strcoll"]
    assert "no such library" in run("list", "--binary", "no_such_lib_xyz").stderr


def test_a_closed_pipe_ends_quietly() -> None:
    # `adaptyst-top list --binary c | head -1`: no traceback, the status of a SIGPIPE.
    proc = subprocess.run(
        f"set -o pipefail; {shlex.join(CLI)} list --binary c | head -1",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout.startswith("/") and proc.stderr == ""
    assert proc.returncode == 141


@pytest.mark.ebpf
@requires_root
def test_the_last_line_of_a_record_keeps_the_measured_overhead(workload_bin: Path) -> None:
    """The target's CPU time cannot be read once it has exited: the last interval's share
    was taken as 100% ("probe overhead 100% ... exceeds the budget") after 0.2% all run
    long. The last share measured stands, and nothing is warned."""
    proc = run(
        "record", "--interval", "0.3", "--probe", f"uprobe:{workload_bin}:held_fn",
        "--", str(workload_bin), "held", "20", "100000",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    shares = [line["overhead"]["share"] for line in lines if line.get("overhead")]
    measured = [s for s in shares if s is not None]
    assert measured and max(measured) < lines[-1]["overhead"]["budget"], shares
    assert lines[-1]["final"] and lines[-1]["overhead"]["share"] == measured[-1]
    warned = [w for line in lines for w in line.get("warnings", []) if "exceeds" in w]
    assert warned == []


HOLDER = """
import sys
from adaptyst_top.collectors.probes.bpf.program import Slot
from adaptyst_top.collectors.probes.elf.elf_info import read_elf
from adaptyst_top.collectors.probes.bpf.module_object import load_module

path, name = sys.argv[1], sys.argv[2]
offset = next(s.file_offset for s in read_elf(path).functions if s.name == name)
obj = load_module("uprobe.bpf.o", [Slot(0, "uprobe-entry")], False, None, None)
# With a semaphore of its own (a USDT tool's way): the kernel takes no second probe at
# this place with another. Its offset lies in the read-only ELF header, which no process
# maps writable: nothing is ever written there.
obj.attach_uprobe("at_entry", path, offset, -1, ref_ctr_offset=8)
print("held", flush=True)
sys.stdin.read()
obj.cleanup()
"""


@pytest.mark.ebpf
@requires_root
def test_a_probe_the_kernel_refuses_stops_record_unless_keep_going(workload_bin: Path) -> None:
    """Another tool holds held_fn with a uprobe of its own, with a semaphore (the kernel
    refuses a second uprobe at one place whose semaphore differs): it refuses our link. record said nothing, ran the command unprobed and
    exited 0; now it names the probe on stderr and exits 1, or records with --keep-going."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(workload_bin), "held_fn"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        args = ["record", "--interval", "0.3", "--probe", f"uprobe:{workload_bin}:*_fn"]
        command = ["--", str(workload_bin), "held", "3", "1000"]
        going = run(*args, "--keep-going", *command)
        assert going.returncode == 0, going.stderr
        rows = json.loads(going.stdout.splitlines()[-1])["probes"]
        errors = [p["error"] for p in rows if p["state"] == "error"]
        line = (
            f"adaptyst-top: uprobe:{workload_bin}:*_fn: held_fn: the kernel refused the probe: "
            "Invalid argument"
        )
        assert errors == [line.split("*_fn: ", 1)[1]]
        assert line in going.stderr.splitlines()  # said, not only inside the JSON
        stopped = run(*args, *command)
        assert stopped.returncode == 1, stopped.stderr
        assert stopped.stderr.splitlines() == [
            line,
            "adaptyst-top: not running the command with probes the kernel refused "
            "(--keep-going does)",
        ]
        assert stopped.stdout == ""  # the command never ran
    finally:
        holder.communicate("")
    assert none_left()
