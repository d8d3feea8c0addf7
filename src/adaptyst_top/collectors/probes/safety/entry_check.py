"""The entry check itself, run in a child process (entry_safety.policy_for_this_boot):
each encoding class's functions in entry_check.c called unprobed, then probed, and the
results compared. Apart from entry_safety because it needs the probe engine, which
needs entry_safety's verdicts."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine
from adaptyst_top.collectors.probes.helpers.build import (
    HelperBuildError,
    HelperProcess,
    build_helper,
)
from adaptyst_top.collectors.probes.safety.entry_safety import (
    CHECK_CALLS,
    CHECKS,
    EntryPolicy,
    Verdict,
    cpu_flags,
    save_cached,
)


def verify(binary: Path | None = None, calls: int = CHECK_CALLS) -> dict[str, Verdict]:
    """Run each class's functions unprobed and probed; compare (a few seconds, as root)."""
    binary = binary or build_helper("entry_check")
    flags = cpu_flags()
    verdicts: dict[str, Verdict] = {}
    runnable: dict[str, tuple[str, ...]] = {}
    for cls, (fns, needs) in CHECKS.items():
        missing = [f for f in needs if f not in flags]
        if missing:
            # Code of this class cannot run on this CPU at all; nothing to protect.
            verdicts[cls] = Verdict("unverifiable", f"this CPU lacks {', '.join(missing)}")
        else:
            runnable[cls] = fns
    target = HelperProcess(binary)
    try:
        names = [f for group in runnable.values() for f in group]
        expected = {f: target.ask(f"{f} {calls}") for f in names}
        with ProbeEngine(pid=target.proc.pid, entry_policy=EntryPolicy.trusting()) as engine:
            groups = {f: engine.add(f"uprobe:{binary}:chk_{f}") for f in names}
            if not engine.wait(120):
                raise HelperBuildError("attaching the entry check probes timed out")
            got = {f: target.ask(f"{f} {calls}") for f in names}
            engine.read()
            hits = {
                f: sum(s[0] for r in g.rows for s in r.stats.values()) for f, g in groups.items()
            }
            errors = {f: g.error for f, g in groups.items() if g.state == "error"}
        for cls, group in runnable.items():
            bad = [f for f in group if f in errors or got[f] != expected[f] or hits[f] < calls]
            if not bad:
                verdicts[cls] = Verdict("verified", f"{calls} probed calls gave unprobed results")
            elif any(f in errors for f in bad):
                verdicts[cls] = Verdict("unverifiable", errors[next(f for f in bad if f in errors)])
            elif any(got[f] != expected[f] for f in bad):
                verdicts[cls] = Verdict("failed", f"probed results differed in chk_{bad[0]}")
            else:
                verdicts[cls] = Verdict("unverifiable", f"the probe missed calls of chk_{bad[0]}")
    finally:
        target.close()
    return verdicts


def main() -> int:
    """Verify, cache, print the verdicts as JSON (run as a child process)."""
    try:
        verdicts = verify()
    except (HelperBuildError, OSError, RuntimeError) as exc:
        print(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, file=sys.stderr)
        return 1
    try:
        save_cached(verdicts)
    except OSError as exc:
        print(f"entry check not cached: {exc}", file=sys.stderr)
    print(json.dumps({k: asdict(v) for k, v in verdicts.items()}))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
