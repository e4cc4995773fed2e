"""Measuring a batch in a watched subprocess: crashes and hangs cost one candidate each.

This module uses the standard library only, so it can travel by value to a Dask worker
on a device that has the runtime and NumPy but not the compiler (see
:mod:`.dask_measure`), together with the source of :mod:`.runner_main`.

:func:`measure_batch` starts the measuring process, feeds it the job and follows its
progress lines. When the process dies while measuring a candidate, or a candidate runs
past ``timeout``, that candidate gets the error and a fresh process measures the rest.
Results are ``{index: {"costs": [...], "error": None | str}}``.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from typing import Any

PREFIX = "@@tsm "  # the progress lines of runner_main


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


def measure_batch(job: dict[str, Any], command: list[str], timeout: float,
                  startup_timeout: float) -> dict[int, dict[str, Any]]:
    """Measure ``job["candidates"]`` ({index, path}) with ``command`` (runner_main)."""
    results: dict[int, dict[str, Any]] = {}
    pending = [c for c in job["candidates"]]
    while pending:
        if not _session({**job, "candidates": pending}, command, timeout, startup_timeout,
                        results):
            break  # nothing could be measured: startup or the reference failed
        pending = [c for c in pending if c["index"] not in results]
    return results


def _session(job: dict[str, Any], command: list[str], timeout: float, startup_timeout: float,
             results: dict[int, dict[str, Any]]) -> bool:
    """One measuring process; False when it could not measure anything at all."""

    def fail_rest(message: str) -> None:
        for c in job["candidates"]:
            results.setdefault(c["index"], {"costs": [], "error": message})

    with tempfile.TemporaryFile("w+") as errlog:
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=errlog, text=True, start_new_session=True)
        lines: queue.Queue[str | None] = queue.Queue()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith(PREFIX):
                    lines.put(line[len(PREFIX):])
            lines.put(None)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(json.dumps(job))
            proc.stdin.close()
        current: int | None = None
        deadline = time.monotonic() + startup_timeout
        try:
            while True:
                try:
                    line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    kill(proc)
                    if current is None:
                        fail_rest("run: the measuring process timed out before measuring")
                        return False
                    results[current] = {"costs": [], "error": f"run: timed out after "
                                        f"{timeout:g} s"}
                    return True
                if line is None:  # the process ended
                    proc.wait()
                    if current is not None:
                        results[current] = {"costs": [], "error": "run: the measuring process "
                                            f"crashed ({describe_exit(proc.returncode)})"}
                        return True
                    if any(c["index"] not in results for c in job["candidates"]):
                        errlog.seek(0)
                        fail_rest(f"run: the measuring process failed "
                                  f"({describe_exit(proc.returncode)}): {errlog.read()[-1500:]}")
                        return False
                    return True
                msg = json.loads(line)
                deadline = time.monotonic() + timeout
                if "start" in msg:
                    current = int(msg["start"])
                elif "done" in msg:
                    error = msg["error"]
                    costs = [float(c) for c in msg["costs"]]
                    if error is None and not costs:
                        error = "no timing"
                    results[int(msg["done"])] = {
                        "costs": costs if error is None else [],
                        "error": None if error is None else f"run: {error}"}
                    current = None
                elif "fatal" in msg:
                    kill(proc)
                    fail_rest(f"run: {msg['fatal']}")
                    return False
        finally:
            if proc.poll() is None:
                kill(proc)
            reader.join(timeout=5)


def kill(proc: subprocess.Popen[str]) -> None:
    """Kill the measuring process and anything it started (its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def measure_remote(job: dict[str, Any], reference: bytes | None,
                   candidates: list[tuple[int, bytes]], runner_source: str, timeout: float,
                   startup_timeout: float) -> dict[int, dict[str, Any]]:
    """Measure artifacts sent as bytes, on a machine without the compiler (a Dask worker):
    the files and ``runner_main``'s source go to a temporary folder, then as locally."""
    import sys

    with tempfile.TemporaryDirectory(prefix="tsm-measure-") as tmp:
        runner = os.path.join(tmp, "tsm_runner_main.py")
        with open(runner, "w", encoding="utf-8") as f:
            f.write(runner_source)
        ref_path = None
        if reference is not None:
            ref_path = os.path.join(tmp, "reference.so")
            with open(ref_path, "wb") as f:
                f.write(reference)
        items = []
        for index, blob in candidates:
            path = os.path.join(tmp, f"cand{index}.so")
            with open(path, "wb") as f:
                f.write(blob)
            items.append({"index": index, "path": path})
        return measure_batch({**job, "reference": ref_path, "candidates": items},
                             [sys.executable, runner], timeout, startup_timeout)
