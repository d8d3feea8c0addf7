"""Shared fixtures, and the rule that as root an eBPF test may not skip."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

# CI replays the same examples every run (a failure there is reproducible); a developer's
# run explores new ones.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

IS_ROOT = os.geteuid() == 0


@pytest.fixture(autouse=True, scope="session")
def models_of_this_run(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The advisor's kept models go to a folder of this run (the monitors the tests start
    inherit it): a test never starts from what an earlier run or test learned."""
    from adaptyst_top.runtime.model_store import DIR_ENV

    folder = tmp_path_factory.mktemp("models")
    os.chmod(folder, 0o700)
    old = os.environ.get(DIR_ENV)
    os.environ[DIR_ENV] = str(folder)
    yield folder
    if old is None:
        os.environ.pop(DIR_ENV, None)
    else:
        os.environ[DIR_ENV] = old


# The two tiers. `system`: a test that needs root, a second user, or a service the suite
# starts (sshd, Slurm, Prometheus, a container, a terminal in tmux), or that runs long;
# `make test` runs them all, `make test-fast` (-m "not system") the rest, as any user.
SYSTEM_MODULES = {
    "test_agent",  # root's agent and real users, throughout
    "test_agent_bounds",
    "test_agent_gpu",
    "test_agent_paths",
    "test_agent_restart",
    "test_agent_setuid",
    "test_agent_ssh",
    "test_agent_usdt",
    "test_agent_waits",
    "test_candidates",  # the entry check's verdicts are root's
    "test_cli_probes",  # probes through the command line
    "test_cluster",  # a real Prometheus
    "test_cluster_hostile",
    "test_cluster_limits",  # answers of 100,000 series
    "test_cluster_enter",  # the view in a real terminal
    "test_command_lifecycle",  # record's commands, probed
    "test_containers",  # podman
    "test_dask",  # a Dask scheduler and worker processes
    "test_dask_slurm",  # Dask workers as jobs of a Slurm of its own
    "test_dask_hostile",
    "test_demo_moves",  # the demo workload for a minute
    "test_e2e_tmux",  # the monitor in a real terminal
    "test_install_agent",  # apt and a venv
    "test_metrics",  # Prometheus scrapes of a real agent
    "test_placement_e2e",
    "test_recording_hostile",  # gigabytes decoded
    "test_slurm",  # a Slurm of its own
    "test_task_api_native",  # compilers and eBPF
}
SYSTEM_FIXTURES = {"users", "agent", "shared", "node", "workload"}


def is_system(item: pytest.Item) -> bool:
    module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""  # type: ignore[attr-defined]
    if module in SYSTEM_MODULES or item.get_closest_marker("ebpf"):
        return True
    if SYSTEM_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    # A test that skips without root needs root.
    return any("root" in str(m.kwargs.get("reason", "")) for m in item.iter_markers("skipif"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if is_system(item):
            item.add_marker(pytest.mark.system)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--require-ebpf-if-root",
        action="store_true",
        help="as root, fail the run unless eBPF tests ran and passed (used by `make test`)",
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if IS_ROOT and item.get_closest_marker("ebpf") and report.skipped:
        # As root the real thing is there; a skip would hide a broken setup.
        report.outcome = "failed"
        report.longrepr = f"eBPF test skipped while root: {report.longrepr}"
    if item.get_closest_marker("ebpf") and report.when == "call" and report.passed:
        item.config._ebpf_passed = getattr(item.config, "_ebpf_passed", 0) + 1  # type: ignore[attr-defined]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    wanted = IS_ROOT and config.getoption("--require-ebpf-if-root")
    if wanted and getattr(config, "_ebpf_passed", 0) == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print("\nFAILED: running as root but no eBPF test ran and passed")


@pytest.fixture(scope="session")
def workload_bin(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from .workload import build

    return build(tmp_path_factory.mktemp("workload"))


@pytest.fixture
def workload(workload_bin):  # type: ignore[no-untyped-def]
    from .workload import Workload

    w = Workload(workload_bin)
    yield w
    w.kill()


requires_root = pytest.mark.skipif(not IS_ROOT, reason="eBPF needs root")


@pytest.fixture
def energy_uj_denied(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every RAPL energy_uj read fails as it does for non-root since CVE-2020-8694
    (root reads a mode-0000 file anyway, so the denial is simulated at the read)."""
    from pathlib import Path

    real = Path.read_text

    def deny(self: Path, *a: object, **k: object) -> str:
        if self.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_text", deny)
