"""The learner as the monitor's advisor (learned_advisor.py): an interval's runs are one
observation; a device never run warm gets a look of a few runs, a faster one measured
gets the task, and what it shows carries the posterior's spread."""

from __future__ import annotations

import math

import pytest

from adaptyst_top.placement.learned_advisor import (
    LOOK_RUNS,
    LOOK_WAIT,
    MAX_DEVICES,
    MOVE_MIN_GAIN,
    LearnedAdvisor,
)
from adaptyst_top.placement.learned_view import learned_entries
from adaptyst_top.snapshot import TaskEntry

CTX = (16, 2)
SIZE = 70_000


def on_cpu(adv: LearnedAdvisor, intervals: int = 3, time_s: float = 0.002) -> None:
    for _ in range(intervals):
        adv.observe("spmv", "cpu", CTX, time_s, 50, 0.1, size=SIZE)
        adv.set_current("spmv", "cpu")


def test_a_device_never_run_is_looked_at_then_the_faster_one_gets_the_task() -> None:
    adv = LearnedAdvisor(["cpu", "opencl:0"])
    on_cpu(adv)
    look = adv.decide("spmv")
    assert look is not None and look.explore and look.suggested == "opencl:0"
    assert look.runs == LOOK_RUNS and "explore" in look.why
    adv.accepted(look)
    assert learned_entries(adv)[0].state == "exploring"
    adv.observe("spmv", "opencl:0", CTX, 0.0005, LOOK_RUNS, 0.01, size=SIZE)
    adv.set_current("spmv", "opencl:0")  # the look's runs were most of the interval's
    assert adv.tasks["spmv"].current == "cpu"
    move = adv.decide("spmv")
    assert move is not None and not move.explore and move.suggested == "opencl:0"
    assert move.time_gain == pytest.approx(0.75, abs=0.05)
    assert 0.5 < move.confidence <= 1.0
    adv.accepted(move)
    assert adv.tasks["spmv"].current == "opencl:0"
    (t,) = learned_entries(adv)
    assert isinstance(t, TaskEntry) and t.device == "opencl:0" and t.best == "opencl:0"
    assert t.state == "settled" and t.executions == 3 * 50 + LOOK_RUNS


def test_what_it_shows_carries_the_spread_and_the_prediction_over_sizes() -> None:
    adv = LearnedAdvisor(["cpu", "opencl:0"], objective="energy")
    for size, t in ((1_000, 1e-4), (10_000, 1e-3), (SIZE, 7e-3)):
        for _ in range(3):
            adv.observe("spmv", "cpu", (size.bit_length(), 2), t, 20, t * 40, size=size)
    (entry,) = learned_entries(adv)
    cpu = entry.predicted["cpu"]
    assert cpu["source"] == "measured" and cpu["time_s"] == pytest.approx(7e-3, rel=0.1)
    assert 1.0 < cpu["time_factor"] < 1.5 and cpu["energy_factor"] > 1.0
    assert cpu["energy_j"] == pytest.approx(7e-3 * 40, rel=0.1)
    (curve,) = entry.curves
    assert curve.device == "cpu" and len(curve.points) == 3 and curve.fit is None
    sizes = [n for n, _, _ in curve.band]
    assert sizes == sorted(sizes) and sizes[0] < 1_000 and sizes[-1] > SIZE
    assert all(math.isfinite(s) and s > 0 and f >= 1.0 for _, s, f in curve.band)
    assert entry.state == "learning"  # PoCL may win and has no warm run yet
    assert entry.to_json()["curves"][0]["band"]  # carried in the snapshot's JSON


def test_advice_offered_and_not_taken_charges_nothing() -> None:
    """Suggest mode: the same advice every interval until the user takes it. Looks are
    counted and charged when taken, never for advice left."""
    adv = LearnedAdvisor(["cpu", "opencl:0"])
    on_cpu(adv)
    for _ in range(50):
        a = adv.decide("spmv")
        assert a is not None and a.explore
    assert adv.learner.looking == {} and adv.learner.spent == {}


def test_a_look_that_never_comes_back_is_given_up() -> None:
    adv = LearnedAdvisor(["cpu", "opencl:0"])
    on_cpu(adv)
    look = adv.decide("spmv")
    assert look is not None
    adv.accepted(look)
    for _ in range(LOOK_WAIT - 1):
        assert adv.decide("spmv") is None  # its answer first
    again = adv.decide("spmv")
    assert again is not None and again.suggested == "opencl:0"
    assert adv.learner.looking == {}


def test_no_look_where_the_device_cannot_win() -> None:
    """A 5 us call is not looked at on a device whose warm runs take 0.1 ms at least."""
    adv = LearnedAdvisor(["cpu", "opencl:0"], floors_s={"opencl:0": 1e-4})
    on_cpu(adv, time_s=5e-6)
    assert adv.decide("spmv") is None
    (t,) = learned_entries(adv)
    assert t.state == "settled" and "opencl:0" not in t.predicted


def test_devices_within_the_noise_do_not_trade_the_task() -> None:
    adv = LearnedAdvisor(["cpu", "opencl:0"], seed=3)
    on_cpu(adv)
    look = adv.decide("spmv")
    assert look is not None
    adv.accepted(look)
    moves = 0
    for i in range(200):
        adv.observe("spmv", "opencl:0", CTX, 0.002 * (1 - MOVE_MIN_GAIN / 2), 3, size=SIZE)
        adv.observe("spmv", "cpu", CTX, 0.002 * (1.0 + 0.01 * (i % 3 - 1)), 50, size=SIZE)
        adv.set_current("spmv", "cpu")
        a = adv.decide("spmv")
        if a is not None and not a.explore:
            moves += 1
        if a is not None and a.explore:
            adv.accepted(a)
    assert moves == 0


@pytest.mark.parametrize(
    "time_s, count", [(math.nan, 5), (math.inf, 5), (-1.0, 5), (0.0, 5), (1e-3, 0)]
)
def test_a_figure_that_is_no_run_teaches_nothing(time_s: float, count: int) -> None:
    adv = LearnedAdvisor(["cpu", "opencl:0"])
    on_cpu(adv)
    before = adv.predictions("spmv")["cpu"]
    adv.observe("spmv", "cpu", CTX, time_s, count, math.nan, size=SIZE)
    after = adv.predictions("spmv")["cpu"]
    assert after.time_s == before.time_s and math.isfinite(after.rel_err)
    for t in learned_entries(adv):
        assert all(math.isfinite(v["time_s"]) for v in t.predicted.values())


def test_device_names_an_application_reports_are_bounded() -> None:
    adv = LearnedAdvisor(["cpu"])
    for i in range(3 * MAX_DEVICES):
        adv.observe("t", f"fake:{i}", (10, 0), 1e-3, 2, size=1024)
    assert len(adv.devices) == MAX_DEVICES and adv.learner.devices is adv.devices


def test_kept_models_place_a_task_before_it_runs() -> None:
    adv = LearnedAdvisor(["cpu", "opencl:0"])
    for _ in range(4):
        adv.observe("spmv", "cpu", CTX, 0.004, 10, size=SIZE)
        adv.observe("spmv", "opencl:0", CTX, 0.001, 10, size=SIZE)
    warm = LearnedAdvisor(["cpu", "opencl:0"])
    assert warm.from_json(adv.to_json()) is None
    assert warm.unplaced() == ["spmv"] and warm.remembered("spmv") == "opencl:0"
    assert warm.remembered("gemm") is None


def test_a_node_with_one_device_and_a_task_run_once_is_no_crash() -> None:
    """One interval of one run is cold and teaches nothing: nothing is known anywhere,
    and there is nowhere else to look."""
    adv = LearnedAdvisor(["cpu"])
    adv.observe("solve", "cpu", (20, 0), 0.2, 1, size=2**20)
    adv.set_current("solve", "cpu")
    assert adv.decide("solve") is None
    (t,) = learned_entries(adv)
    assert t.state == "settled" and t.predicted == {}


def test_a_looks_runs_over_two_intervals_never_make_it_the_tasks_device() -> None:
    adv = LearnedAdvisor(["cpu", "gpu"])
    for _ in range(2):
        adv.observe("t", "cpu", (20, 0), 1e-3, 2, size=2**20)
        adv.set_current("t", "cpu")
    look = adv.decide("t")
    assert look is not None and look.explore
    adv.accepted(look)
    for runs in (2, 1):  # the look's three runs, two intervals; the task's own elsewhere
        adv.observe("t", "gpu", (20, 0), 2e-3, runs, size=2**20)
        adv.set_current("t", "gpu")  # most of the interval's runs were the look's
        assert adv.tasks["t"].current == "cpu"
        a = adv.decide("t")
        assert a is None or a.suggested != "cpu"  # no move "back" from where it never went
    assert adv.tasks["t"].exploring == "" and adv.learner.looking == {}


def test_a_look_under_one_input_is_back_when_the_input_changed_meanwhile() -> None:
    adv = LearnedAdvisor(["cpu", "gpu"])
    for _ in range(2):
        adv.observe("t", "cpu", (20, 1), 1e-3, 5, size=2**20)
        adv.set_current("t", "cpu")
    look = adv.decide("t")
    assert look is not None
    adv.accepted(look)
    adv.observe("t", "gpu", (20, 2), 5e-4, LOOK_RUNS, size=2**20)  # a sparser input now
    adv.set_current("t", "cpu")
    assert adv.learner.looking == {}
    adv.observe("t", "cpu", (20, 1), 1e-3, 5, size=2**20)  # the first input again
    adv.set_current("t", "cpu")
    again = adv.decide("t")
    assert again is not None and again.suggested == "gpu"  # its own look is not blocked


@pytest.mark.parametrize(
    "key", ["t|cpu|-1|0", "t|cpu|64|0", "t|cpu|9999999999|0", "t|cpu|1_0|0", "t|cpu|٣|0"]
)
def test_a_size_bucket_no_task_api_writes_is_no_task_run(key: str) -> None:
    from adaptyst_top.placement.task_keys import parse_key

    assert parse_key(key) is None
    assert parse_key("t|cpu|63|15") == ("t", "cpu", 63, 15)


def test_kept_models_are_bounded_to_what_the_store_reads_back() -> None:
    from adaptyst_top.placement.learned_advisor import MAX_SAVED

    adv = LearnedAdvisor(["cpu", "gpu"])
    for i in range(60):  # 60 tasks x 10 inputs x 2 devices: more models than a file holds
        for fb in range(10):
            for d in ("cpu", "gpu"):
                t = 1e-3 if d == "cpu" else 2e-3  # the CPU the faster: what is remembered
                adv.observe(f"t{i}", d, (62, fb), t, 2, size=2**62)
    assert len(adv.learner.models) == 1200 > MAX_SAVED
    kept = adv.to_json()
    assert len(kept["learner"]["models"]) <= MAX_SAVED
    assert "t59|9" in kept["learner"]["first"] and "t0|0" not in kept["learner"]["first"]
    warm = LearnedAdvisor(["cpu", "gpu"])
    assert warm.from_json(kept) is None and warm.remembered("t59") == "cpu"


def test_conf_is_the_posterior_probability_of_a_gain_in_the_objectives_terms() -> None:
    """Under the energy objective two devices as fast as each other, one drawing a
    quarter of the joules: sure of the gain, though their times say nothing."""
    adv = LearnedAdvisor(["cpu", "gpu"], objective="energy")
    for _ in range(6):
        adv.observe("t", "cpu", (20, 0), 1e-3, 5, 0.1, size=2**20)
        adv.observe("t", "gpu", (20, 0), 1e-3, 5, 0.025, size=2**20)
        adv.set_current("t", "cpu")
    best, gain, confidence = adv.standing("t")
    assert best == "gpu" and gain == pytest.approx(0.75, abs=0.05)
    assert confidence is not None and confidence > 0.95
    p = adv.learner.p_better("t|0", 2**20, "cpu", "gpu")
    assert p is not None and p < 0.05


def test_with_its_task_probe_removed_the_advisor_says_idle_not_running() -> None:
    """Issue 74's newcomer: after `d` removed the demo's only spec the advisor froze and
    said "running"."""
    from adaptyst_top.placement.loop import TASK_PROBE_NAME, PlacementLoop
    from adaptyst_top.placement.task_keys import task_key
    from adaptyst_top.snapshot import Latency, ProbeEntry, Snapshot

    loop = PlacementLoop(LearnedAdvisor(["cpu", "opencl:0"]), None)

    def snap(t: float, count: int, probed: bool) -> Snapshot:
        row = ProbeEntry(
            group=0, id=0, spec="usdt:app:adaptyst:task_begin..task_end", name=TASK_PROBE_NAME,
            kind="usdt",
            key=task_key("spmv", "cpu", 1 << 20), state="attached", count=count,
            latency=Latency(mean_ns=2e6),
        )  # fmt: skip
        return Snapshot(t=t, host="h", probes=[row] if probed else [])

    loop.update(snap(1.0, 10, True))
    part = loop.update(snap(2.0, 20, True))
    assert part.tasks and part.advisor is not None and part.advisor.state == "running"
    part = loop.update(snap(3.0, 20, False))
    assert part.advisor is not None and part.advisor.state == "idle"
    assert "no task probe" in part.advisor.detail


def test_the_retired_advisor_is_not_in_the_package() -> None:
    """The advisor the learner replaced is a baseline of the evaluations only
    (experiments/placement/baseline/): nothing of it ships, and no module of the package
    reaches for it."""
    import importlib.util
    from pathlib import Path

    import adaptyst_top

    retired = ("advisor", "model", "stream", "task_view", "task_state", "exploration")
    for name in (*retired, "priors", "transfer"):
        assert importlib.util.find_spec(f"adaptyst_top.placement.{name}") is None, name
    package = Path(adaptyst_top.__file__).parent
    for source in package.rglob("*.py"):
        text = source.read_text()
        assert "from experiments" not in text and "import experiments" not in text, source
