"""Run node cases in worker processes, so that one crash or hang fails one case.

A compiled case is native code: a bad kernel can segfault or loop forever, and in-process
that would end the whole run (pytest session included). A :class:`CaseRunner` owns one
worker process that builds the cases once (about 10 s) and then runs them one after
another, imports, LLVM and the C runtime warm. A worker that dies fails its case as
``crash``; one that overruns the timeout is killed and its case fails as ``timeout``; the
next case gets a fresh worker. Workers are spawned, not forked, so a runner can live
inside a pytest-xdist worker (whose I/O threads a fork would copy mid-flight).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import import_module
from multiprocessing.connection import Connection
from typing import Any

from .check import run_case

DEFAULT_BACKEND = "tensorsmith.frontend.onnx.backend:TensorsmithBackend"
DEFAULT_CASES = "onnx_conformance.cases:load_cases"


@dataclass(frozen=True)
class Outcome:
    name: str
    passed: bool
    reason: str
    seconds: float
    frozen: tuple[str, ...] = ()


def load_backend(spec: str) -> Any:
    """``"package.module:name"`` -> the object (workers import what they run by name)."""
    module, _, attr = spec.partition(":")
    return getattr(import_module(module), attr)


def _serve(conn: Connection, backend_spec: str, cases_spec: str) -> None:
    backend = load_backend(backend_spec)
    cases = load_backend(cases_spec)()
    conn.send("ready")
    while True:
        name = conn.recv()
        if name is None:
            return
        start = time.perf_counter()
        if name not in cases:
            conn.send((name, False, "not a node case of this onnx", 0.0, ()))
            continue
        verdict = run_case(cases[name], backend)
        conn.send((name, verdict.passed, verdict.reason, time.perf_counter() - start,
                   verdict.frozen))


class CaseRunner:
    """One isolated worker; :meth:`start` then :meth:`submit`/:meth:`collect`, or
    :meth:`run` for one case at a time."""

    def __init__(self, backend_spec: str = DEFAULT_BACKEND, cases_spec: str = DEFAULT_CASES,
                 startup: float = 300.0) -> None:
        self.backend_spec = backend_spec
        self.cases_spec = cases_spec
        self.startup = startup
        self.conn: Connection | None = None
        self.process: Any = None
        self.case: str | None = None
        self.started = 0.0
        self._ready = False

    def start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, self.backend_spec,
                                                        self.cases_spec), daemon=True)
        self.process.start()
        child.close()
        self._ready = False

    def _ensure_ready(self) -> None:
        if self.process is None or not self.process.is_alive():
            self.close()
            self.start()
        if not self._ready:
            assert self.conn is not None
            if not self.conn.poll(self.startup):
                raise RuntimeError(f"the case worker did not start within {self.startup} s")
            if self.conn.recv() != "ready":
                raise RuntimeError("the case worker sent an unexpected greeting")
            self._ready = True

    def submit(self, name: str) -> None:
        self._ensure_ready()
        assert self.conn is not None
        self.case, self.started = name, time.perf_counter()
        self.conn.send(name)

    def poll(self, timeout: float) -> Outcome | None:
        """The outcome of the submitted case once there is one (None while running)."""
        assert self.conn is not None and self.case is not None
        name = self.case
        elapsed = time.perf_counter() - self.started
        if self.conn.poll(0):
            try:
                got = self.conn.recv()
            except (EOFError, OSError):
                return self._dead(name, elapsed)
            self.case = None
            return Outcome(*got)
        if not self.process.is_alive():
            return self._dead(name, elapsed)
        if elapsed > timeout:
            self.close()
            self.case = None
            return Outcome(name, False, f"timeout: no result after {timeout:g} s", elapsed)
        return None

    def _dead(self, name: str, elapsed: float) -> Outcome:
        self.process.join(5)
        code = self.process.exitcode
        what = (f"signal {signal.Signals(-code).name}" if code and code < 0
                else f"exit code {code}")
        self.close()
        self.case = None
        return Outcome(name, False, f"crash: the worker died ({what})", elapsed)

    def run(self, name: str, timeout: float = 120.0) -> Outcome:
        self.submit(name)
        while True:
            assert self.conn is not None
            multiprocessing.connection.wait([self.conn, self.process.sentinel], 0.5)
            outcome = self.poll(timeout)
            if outcome is not None:
                return outcome

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(BrokenPipeError, OSError):
                self.conn.send(None)
            with contextlib.suppress(OSError):
                self.conn.close()
        if self.process is not None:
            self.process.join(2)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
        self.conn = self.process = None
        self._ready = False


def run_isolated(names: Iterable[str], backend_spec: str = DEFAULT_BACKEND, jobs: int = 2,
                 timeout: float = 120.0, progress: Callable[[Outcome], None] | None = None,
                 cases_spec: str = DEFAULT_CASES) -> dict[str, Outcome]:
    """Run the named cases on ``jobs`` runners; every name gets an Outcome (a name given
    twice runs twice and keeps its last outcome)."""
    todo = list(names)[::-1]
    runners = [CaseRunner(backend_spec, cases_spec) for _ in range(max(1, min(jobs,
                                                                                 len(todo))))]
    for r in runners:
        r.start()
    results: dict[str, Outcome] = {}
    try:
        while todo or any(r.case for r in runners):
            for r in runners:
                if r.case is None and todo:
                    r.submit(todo.pop())
            busy = [r for r in runners if r.case]
            waits = [x for r in busy for x in (r.conn, r.process.sentinel)]
            multiprocessing.connection.wait(waits, 0.5)
            for r in busy:
                outcome = r.poll(timeout)
                if outcome is not None:
                    results[outcome.name] = outcome
                    if progress is not None:
                        progress(outcome)
    finally:
        for r in runners:
            r.close()
    return results
