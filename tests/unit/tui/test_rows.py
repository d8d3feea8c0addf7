"""Snapshot entries as table cells: what each pane shows for a typed entry."""

from __future__ import annotations

from dataclasses import replace

from adaptyst_top.snapshot import (
    AdviceEntry,
    CommandState,
    DeviceReading,
    Latency,
    Move,
    ProbeEntry,
    TaskEntry,
)
from adaptyst_top.tui.advisor_rows import move_row, task_row
from adaptyst_top.tui.rows import (
    app_name,
    device_row,
    gpu_process_rows,
    probe_row,
)

WARN_NS = 10e6


def entry(**kw: object) -> ProbeEntry:
    base: dict[str, object] = dict(group=0, id=1, spec="uprobe:./a:f*", name="f1", kind="uprobe")
    return ProbeEntry(**{**base, **kw})  # type: ignore[arg-type]


def test_a_latency_row() -> None:
    p = entry(
        state="attached",
        target="/opt/app/bin/solver",
        count=1234,
        rate_hz=56.0,
        latency=Latency(1500.0, 1200.0, 3000.0, 4500.0, 900.0, 2.5e6),
        overhead_ns_per_hit=1546.0,
    )
    cells, sort, style = probe_row(p, WARN_NS)
    assert cells["target"] == "solver" and cells["name"] == "f1" and cells["state"] == "attached"
    assert cells["p99"] == "4.5 µs" and cells["max"] == "2.5 ms"
    assert sort["count"] == 1234 and sort["cost"] == 1546.0 * 56.0
    assert style == ""


def test_keys_tasks_errors_and_states_read_as_a_user_expects() -> None:
    task = entry(kind="usdt", name="adaptyst:task_begin..task_end", key="gemm|opencl:0|12|3")
    assert probe_row(task, WARN_NS)[0]["name"] == "gemm @opencl:0 n~2^12 f3"
    keyed = entry(kind="usdt", name="app:step", key="phase-a")
    assert probe_row(keyed, WARN_NS)[0]["name"] == "phase-a · step"
    kernel = entry(kind="opencl", name="matmul", key="matmul")
    assert probe_row(kernel, WARN_NS)[0]["name"] == "matmul"  # once, not "matmul · matmul"
    # A kernel's Target is where it ran, not the tool's own library that timed it.
    lib = "/x/kinds/_cuda_inject.cpython-311-x86_64-linux-gnu.so"
    cuda = entry(kind="cuda", name="_Z6reducePfS_i", key="_Z6reducePfS_i", target=lib)
    assert probe_row(cuda, WARN_NS)[0]["target"] == "CUDA device"
    assert probe_row(replace(kernel, target=lib), WARN_NS)[0]["target"] == "OpenCL device"
    assert probe_row(replace(task, target="/usr/lib/x.so"), WARN_NS)[0]["target"] == "x.so"
    failed = entry(id=None, state="error", error="no function matches f*")
    cells, _, style = probe_row(failed, WARN_NS)
    assert cells["name"] == "uprobe:./a:f*: no function matches f*" and style == "error"
    assert probe_row(entry(state="detached"), WARN_NS)[2] == "dim"
    slow = entry(state="attached", latency=Latency(p99_ns=2 * WARN_NS))
    assert probe_row(slow, WARN_NS)[2] == "warn"
    count_only = probe_row(entry(kind="usdt", state="attached", count=5), WARN_NS)[0]
    assert count_only["p99"] == count_only["mean"]  # both unknown, shown alike


def test_a_device_row_says_why_a_figure_is_missing() -> None:
    d = DeviceReading("cpu", "cpu", "EPYC", util=0.95, mem_used_bytes=1 << 30, note="no RAPL")
    cells, style = device_row(d, [0.5, 0.95], ascii=True, util_warn=0.9)
    assert cells["energy"] == "- no RAPL" and cells["power"] == "-" and style == "warn"
    assert "95%" in cells["util"] and cells["mem"].startswith("1.0")
    g = DeviceReading("gpu:0", "gpu", "H200", util=0.1, power_w=120.04, energy_j=5.55)
    g.energy_source = "nvml"
    cells, style = device_row(g, [], ascii=False, util_warn=0.9)
    assert cells["power"] == "120.0 W" and cells["energy"] == "5.5 J (nvml)" and style == ""
    # A day of an H200 reads in MJ, not as eight digits of joules.
    for joules, shown in [(4327.3, "4.33 kJ"), (25_920_000.0, "25.9 MJ"), (999.94, "999.9 J")]:
        g.energy_j = joules
        assert device_row(g, [], ascii=False, util_warn=0.9)[0]["energy"] == f"{shown} (nvml)"


def _task(device: str, times: dict[str, tuple[float, str]], **kw: object) -> TaskEntry:
    pred = {d: {"time_s": t, "samples": 9, "source": src} for d, (t, src) in times.items()}
    return TaskEntry("logistic", device, 100, (17, 0), pred, **kw)  # type: ignore[arg-type]


def test_a_task_row_says_each_devices_time_and_marks_predictions() -> None:
    t = _task(
        "cpu",
        {"cpu": (0.0695, "measured"), "opencl:0": (0.0157, "fit")},
        best="opencl:0",
        gain=0.774,
        confidence=0.9,
        state="settled",
    )
    cells, style = task_row(t)
    assert cells["times"] == "opencl:0 ~15.7 ms · cpu 69.5 ms"  # fastest first; ~ predicted
    assert (cells["on"], cells["best"], cells["gain"], cells["state"]) == (
        "cpu", "opencl:0", "+77%", "settled"
    )  # fmt: skip
    assert style == "" and task_row(t, ascii=True)[0]["times"].count(" | ") == 1
    # Where it runs is the best: no gain to claim.
    assert task_row(replace(t, device="opencl:0"))[0]["gain"] == "-"


def test_pending_advice_shows_in_the_task_row_never_as_plus_zero() -> None:
    t = _task("cpu", {"cpu": (0.002, "measured")}, best="cpu", state="learning")
    move = AdviceEntry("logistic", "cpu", "opencl:0", 0.003, 0.25, 0.9, "energy: ...")
    cells, style = task_row(t, move)
    assert (cells["best"], cells["gain"], cells["state"], style) == (
        "opencl:0", "+0.3%", "m: move", "warn"
    )  # fmt: skip
    explore = AdviceEntry("logistic", "cpu", "opencl:0", 0.0, None, 0.0, "explore", explore=True)
    assert task_row(t, explore)[0]["state"] == "explore?"


def test_a_move_row_has_the_gain_predicted_and_the_gain_measured() -> None:
    m = Move("gemm", "cpu", "opencl:0", False, 1, t=75.0, predicted_gain=0.5)
    cells, style = move_row(m)
    assert style == ""
    assert (cells["t"], cells["move"], cells["predicted"], cells["measured"]) == (
        "1:15", "cpu → opencl:0", "+50%", "-"
    )  # fmt: skip
    measured = replace(m, measured_gain=0.47, runs=120)
    assert move_row(measured)[0]["measured"] == "+47%" and move_row(measured)[1] == ""
    lost = replace(m, measured_gain=-0.2, runs=30)
    assert (
        move_row(lost, ascii=True)[0]["move"] == "cpu -> opencl:0" and move_row(lost)[1] == "warn"
    )
    # An exploration is not a choice: said so, dim, and never a lost move in warning.
    explore = replace(lost, explore=True, predicted_gain=None)
    cells, style = move_row(explore)
    assert cells["move"] == "explore cpu → opencl:0" and cells["predicted"] == "to measure"
    assert style == "dim"


def test_a_python_apps_task_probes_name_the_app_not_the_extension() -> None:
    task = entry(
        kind="usdt",
        name="adaptyst:task_begin..task_end",
        key="spmv|cpu|12|0",
        target="/venv/lib/adaptyst_top/placement/_sdt.cpython-311-x86_64-linux-gnu.so",
    )
    demo = CommandState(("/venv/bin/python3", "-m", "adaptyst_top.placement.demo"), 1, None, None)
    script = CommandState(("python3", "-u", "/home/a/solver.py", "--n", "3"), 1, None, None)
    assert probe_row(task, WARN_NS, app_name(demo))[0]["target"] == "demo"
    assert probe_row(task, WARN_NS, app_name(script))[0]["target"] == "solver.py"
    assert probe_row(task, WARN_NS)[0]["target"] == "python app"  # --pid: no command known
    c_app = entry(kind="usdt", name="adaptyst:task_begin..task_end", key="a|cpu|1|0",
                  target="/opt/app/bin/cfd")  # fmt: skip
    assert probe_row(c_app, WARN_NS, "cfd-run")[0]["target"] == "cfd"  # its own binary


def test_a_gpus_processes_are_rows_under_it() -> None:
    g = DeviceReading("gpu:0", "gpu", "H200")
    g.extra = {
        "processes": [
            {"pid": 11, "mem_bytes": 1 << 30, "sm_util": 0.99, "name": "train.py"},
            {"pid": 12, "mem_bytes": 4 << 30, "name": "serve"},
            {"pid": 13, "mem_bytes": None},
            {"pid": 14, "mem_bytes": 2 << 30},
            {"pid": 15, "mem_bytes": 3 << 30},
            {"pid": "x", "mem_bytes": 9},
            "junk",  # a damaged recording: left out
        ],
        "processes_of_others": {"count": 2, "mem_bytes": 6 << 30},
    }
    rows = dict(gpu_process_rows(g))
    assert list(rows) == ["gpu:0/12", "gpu:0/15", "gpu:0/14", "gpu:0/more", "gpu:0/others"]
    assert rows["gpu:0/12"]["name"] == " └ 12 serve" and rows["gpu:0/12"]["mem"] == "4.0 GiB"
    assert rows["gpu:0/more"] == {"name": " └ 2 more", "mem": "1.0 GiB"}
    assert rows["gpu:0/others"] == {"name": " └ 2 of other users", "mem": "6.0 GiB"}
    g.extra = {"processes": "not a list", "processes_of_others": {"count": 0}}
    assert gpu_process_rows(g) == []


def test_the_hot_row_sorts_first_and_sub_microsecond_latencies_read_under_1_us() -> None:
    """By default the probes pane is sorted by total time (calls x mean), most first: of
    xz's 107 lzma_* rows the hot one was row 18, under a page of zero-call rows. A net
    latency under the probe's resolution was shown as 0 ns."""
    from adaptyst_top.tui.rows import SORTABLE

    hot = entry(id=1, name="lzma_code", count=200, latency=Latency(5e5, 4e5, 9e5, 1e6, 1e5, 2e6))
    busy = entry(
        id=2, name="lzma_crc32", count=90_000, latency=Latency(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    )
    idle = entry(id=3, name="lzma_aaa", count=0)
    assert SORTABLE[0] == "total"
    totals = {p.name: probe_row(p, WARN_NS)[1]["total"] for p in (hot, busy, idle)}
    assert sorted(totals, key=totals.__getitem__, reverse=True) == [
        "lzma_code",
        "lzma_crc32",
        "lzma_aaa",
    ]
    cells = probe_row(busy, WARN_NS)[0]
    assert cells["mean"] == cells["p99"] == "<1 µs"
    assert probe_row(hot, WARN_NS)[0]["mean"] == "500 µs"


def test_a_loss_reads_as_times_slower() -> None:
    from adaptyst_top.tui.advisor_rows import pct

    assert pct(-1.64) == "2.6x slower"  # was "-164%"
    assert pct(-0.5) == "1.5x slower"
    assert pct(-0.2) == "-20%" and pct(0.31) == "+31%" and pct(0.004) == "+0.4%"


def test_a_status_line_cut_short_says_so() -> None:
    """The advisor's status line was cut mid-sentence, with nothing to say it went on."""
    from adaptyst_top.tui.widgets.text_line import _whole_words

    text = "advisor running · auto · objective time · 4 settled · 4 tasks, 0 exploring"
    cut = _whole_words(text, 40)
    assert cut == "advisor running · auto · objective time…" and len(cut) <= 40
    assert _whole_words("short", 40) == "short"
    assert _whole_words("x" * 50, 10) == "x" * 9 + "…"  # one word: cut where it must be
