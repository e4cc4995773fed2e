"""A tuning run killed with SIGKILL mid-way resumes from its records: no measured line is
lost, nothing is measured twice, and the rerun finishes the budget."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from autotune_testing import HERE, key_of, needs_llvm, trial_records

from tensorsmith.ir.records import read_records

SCRIPT = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from autotune_testing import matmul, mlp
    from tensorsmith.autotune.measure import LocalRunner
    from tensorsmith.autotune.task import extract_tasks
    from tensorsmith.autotune.tuner import Tuner

    tasks = extract_tasks(matmul(16, 32, 48)) + extract_tasks(mlp())[:1]
    runner = LocalRunner(min_repeat_ms=2.0, hook=sys.argv[3] if len(sys.argv) > 3 else None)
    Tuner(tasks, sys.argv[2], 10, per_round=3, runner=runner).run()
""")

SLOW = "def slow(index, outputs):\n    import time\n    time.sleep(0.4)\n"


def test_sigkill_then_resume(tmp_path) -> None:
    needs_llvm()
    script = tmp_path / "tune.py"
    script.write_text(SCRIPT)
    (tmp_path / "slow.py").write_text(SLOW)
    records = tmp_path / "r.jsonl"
    proc = subprocess.Popen([sys.executable, str(script), str(HERE), str(records),
                             f"{tmp_path / 'slow.py'}:slow"], start_new_session=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        if records.exists() and records.read_text().count("\n") >= 4:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = records.read_text()
    complete = before[: before.rfind("\n") + 1]
    killed_at = complete.count("\n")
    assert 4 <= killed_at < 10

    subprocess.run([sys.executable, str(script), str(HERE), str(records)], check=True,
                   timeout=300)
    after = records.read_text()
    assert after.startswith(complete)  # every line measured before the kill is still there
    recs = trial_records(read_records(records))
    assert len(recs) == 10
    keys = [(r["workload"], key_of(r)) for r in recs]
    assert len(set(keys)) == len(keys)
    assert sum(r["error"] is None for r in recs) >= 8
