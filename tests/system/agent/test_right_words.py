"""Each odd target or input gets its true one-line reason: a kernel thread, a bare --, a
spec without a target, a process that exec'd another program, doctor without root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.as_user import run_as
from tests.support.bpf_objects import none_left
from tests.support.marks import IS_ROOT, requires_root
from tests.unit.cli.test_right_words import CLI, cli  # noqa: F401

EXECS = r"""
#include <stdio.h>
#include <unistd.h>
__attribute__((noinline)) int before(int x) { __asm__ volatile(""); return x + 1; }
int main(void) {
    int s = 0;
    for (int i = 0; i < 50; i++) s += before(i);
    fflush(stdout);
    sleep(1);
    execl("/bin/sleep", "sleep", "2", (char *)0);
    return s;
}
"""


@pytest.mark.ebpf
@requires_root
def test_a_target_that_execs_another_program_ends_its_rows(tmp_path: Path) -> None:
    src = tmp_path / "execs.c"
    src.write_text(EXECS)
    prog = tmp_path / "execs"
    subprocess.run(["gcc", "-O0", "-o", str(prog), str(src)], check=True)
    out = tmp_path / "rec.jsonl"
    r = cli(
        "record",
        "--interval",
        "0.3",
        "--out",
        str(out),
        "--probe",
        f"uprobe:{prog}:before",
        "--",
        str(prog),
    )
    assert r.returncode == 0, r.stderr
    snaps = [json.loads(line) for line in out.read_text().splitlines()]
    last = snaps[-1]["probes"][0]
    assert last["count"] == 50 and last["state"] == "ended"
    assert "exec'd /usr/bin/sleep" in last["error"] or "exec'd /bin/sleep" in last["error"]
    warned = [w for s in snaps for w in s.get("warnings", []) if "exec'd" in w]
    assert len(warned) == 1
    assert none_left()


@pytest.mark.skipif(not IS_ROOT, reason="switching users needs root")
def test_doctor_as_an_ordinary_user_reports_instead_of_crashing() -> None:
    from adaptyst_top.collectors.doctor import run_doctor

    run_doctor(run_smoke=False)  # every module loaded while we may still read them
    code, data = run_as(
        65534, lambda: json.dumps([c.to_json() for c in run_doctor(run_smoke=True)]).encode()
    )
    assert code == 0, data.decode()
    caps = {c["name"]: c for c in json.loads(data)}
    assert caps["cpu"]["status"] == "ok"
    # Denied for want of privileges (and, when the install is in a folder only root may
    # read, bcc missing for this user too: reported as such, worst first).
    assert caps["ebpf"]["status"] in ("denied", "missing") and caps["ebpf"]["fix"]
    parts = {p["name"]: p["status"] for p in caps["ebpf"]["parts"]}
    assert parts["privileges"] == "denied"


def _cli_as_nobody(argv: list[str]) -> tuple[int, str]:
    """The CLI's main() as uid 65534, in a forked child: (status, what it wrote to stderr)."""
    import tempfile

    from adaptyst_top.cli.main import main

    def call() -> bytes:
        with tempfile.TemporaryFile() as err:
            os.dup2(err.fileno(), 2)
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            try:
                status = main(argv)
            except SystemExit as exc:  # argparse's way out
                status = int(exc.code or 0)
            sys.stderr.flush()
            err.seek(0)
            return json.dumps([status, err.read().decode(errors="replace")]).encode()

    code, data = run_as(65534, call)
    assert code == 0, data.decode()
    status, stderr = json.loads(data)
    return int(status), str(stderr)


@pytest.mark.skipif(not IS_ROOT, reason="switching users needs root")
@pytest.mark.parametrize(
    ("argv", "status", "words"),
    [
        (["record", "--probe", "uprobe:c:malloc", "--duration", "0.2"], 1, "eBPF unavailable"),
        # It said "--profile: [Errno 1] loading sampler.bpf.o: Operation not permitted"
        # (before that, bcc's "Failed to compile BPF module").
        (["record", "--profile", "--duration", "0.2", "--", "true"], 1, "eBPF unavailable"),
        (["record", "--interval", "nan"], 2, "finite"),
        (["list", "--pid", "1"], 1, "another user"),
    ],
)
def test_an_ordinary_user_gets_one_line(argv: list[str], status: int, words: str) -> None:
    # Loaded while root may still read them: the child cannot read root's files.
    import adaptyst_top.cli.listing
    import adaptyst_top.cli.record  # noqa: F401

    got, stderr = _cli_as_nobody(argv)
    assert got == status, stderr
    assert len(stderr.strip().splitlines()) == 1 and words in stderr, stderr
    assert "Traceback" not in stderr
