"""Runs the campaigns in child processes and tallies the outcomes.

Outcomes: ``ok`` (ran, and agrees with the reference), ``clean`` (a TensorsmithError, or a
RecordWarning where a record is skipped), ``internal`` (any other exception: a bug),
``wrong`` (ran, and disagrees with the reference), ``crash`` (the child died of a signal
or exited mid-case), ``hang`` (no outcome within the timeout). The cases of a batch run
in one child; after a crash or hang the batch's remaining cases run in a fresh one.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

CAMPAIGN_NAMES = ("onnx", "artifact", "records", "misuse", "indices")
OUTCOMES = ("ok", "clean", "internal", "wrong", "crash", "hang")
BAD = frozenset({"internal", "wrong", "crash", "hang"})
#: Seeds of campaign run ``--seed S``: S * SEED_STRIDE + case number, so runs of
#: different seeds never share a case, and a case's seed alone replays it.
SEED_STRIDE = 1_000_000
BATCH = 20
PACKAGE_PARENT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Result:
    campaign: str
    seed: int
    outcome: str
    detail: str


def case_seeds(seed: int, cases: int) -> list[int]:
    return [seed * SEED_STRIDE + i for i in range(cases)]


def run_batch(cases: list[tuple[str, int]], timeout: float) -> list[Result]:
    """Every case's result: the remaining cases rerun in a new child after a crash/hang."""
    results: dict[int, Result] = {}
    while len(results) < len(cases):
        pending = [i for i in range(len(cases)) if i not in results]
        done = _run_child([cases[i] for i in pending], timeout)
        if not done:
            raise RuntimeError("the fuzz worker reported nothing: it does not start")
        results.update({pending[j]: r for j, r in done.items()})
    return [results[i] for i in range(len(cases))]


def _run_child(cases: list[tuple[str, int]], timeout: float) -> dict[int, Result]:
    """Results of the cases one child got through, up to and including a crash or hang."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(PACKAGE_PARENT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "fuzz.worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=stderr, env=env, text=True)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(cases))
        proc.stdin.close()
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
        results, current = _collect(lines, cases, timeout)
        if current is not None and current not in results:
            proc.kill()
        code = proc.wait()
        if current is not None and current not in results:
            stderr.seek(0)
            results[current] = _died(cases[current], code, stderr.read().decode(errors="replace"))
    return results


def _pump(stream: Iterable[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _collect(lines: queue.Queue[str | None], cases: list[tuple[str, int]], timeout: float
             ) -> tuple[dict[int, Result], int | None]:
    """Results reported, and the case begun but not finished (None if every one finished)."""
    results: dict[int, Result] = {}
    current: int | None = None
    while True:
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            if current is not None:
                results[current] = Result(*cases[current], "hang", f"no outcome in {timeout} s")
            return results, current
        if line is None:
            return results, current
        msg = json.loads(line)
        if "begin" in msg:
            current = msg["begin"]
        else:
            results[msg["i"]] = Result(*cases[msg["i"]], msg["outcome"], msg["detail"])


def _died(case: tuple[str, int], code: int, stderr: str) -> Result:
    tail = " | ".join(stderr.strip().splitlines()[-3:])[-300:]
    how = f"signal {-code}" if code < 0 else f"exit status {code}"
    return Result(*case, "crash", f"{how}: {tail}")


def run_cases(cases: list[tuple[str, int]], jobs: int = 2, timeout: float = 60.0
              ) -> list[Result]:
    """Cases in batches of BATCH, ``jobs`` children at a time."""
    batches = [cases[i:i + BATCH] for i in range(0, len(cases), BATCH)]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        done = pool.map(lambda b: run_batch(b, timeout), batches)
        return [r for batch in done for r in batch]


def summary(results: list[Result]) -> str:
    """A table of cases and outcomes per campaign, then every case that is not ok/clean."""
    campaigns = sorted({r.campaign for r in results}, key=_campaign_order)
    rows = [["campaign", "cases", *OUTCOMES]]
    for name in [*campaigns, "total"]:
        counts = Counter(r.outcome for r in results if name in (r.campaign, "total"))
        rows.append([name, str(sum(counts.values())), *(str(counts[o]) for o in OUTCOMES)])
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    lines = ["  ".join(c.rjust(w) if k else c.ljust(w) for k, (c, w) in
                       enumerate(zip(row, widths))) for row in rows]
    bad = [r for r in results if r.outcome in BAD]
    lines += ["", f"{len(bad)} case(s) not ok or clean" + (":" if bad else "")]
    lines += [f"  {r.outcome:8} --replay {r.campaign}:{r.seed}  {r.detail}" for r in bad]
    return "\n".join(lines)


def _campaign_order(name: str) -> int:
    return CAMPAIGN_NAMES.index(name) if name in CAMPAIGN_NAMES else len(CAMPAIGN_NAMES)


def _replay_case(text: str) -> tuple[str, int]:
    campaign, _, seed = text.partition(":")
    if campaign not in CAMPAIGN_NAMES or not seed.lstrip("-").isdigit():
        raise argparse.ArgumentTypeError(f"expected CAMPAIGN:SEED, got {text!r}")
    return campaign, int(seed)


def main(argv: list[str] | None = None) -> int:
    """The fuzz session: every campaign (or the replayed cases); status 1 on a bad case."""
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__)
    parser.add_argument("--cases", type=int, default=50, help="cases per campaign")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--campaign", action="append", choices=CAMPAIGN_NAMES,
                        help="run only this campaign (repeatable)")
    parser.add_argument("--jobs", type=int, default=2, help="child processes at a time")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    parser.add_argument("--replay", action="append", type=_replay_case, default=[],
                        metavar="CAMPAIGN:SEED", help="run this one case (repeatable)")
    args = parser.parse_args(argv)
    cases = args.replay or [(c, s) for c in (args.campaign or CAMPAIGN_NAMES)
                            for s in case_seeds(args.seed, args.cases)]
    results = run_cases(cases, args.jobs, args.timeout)
    print(summary(results))
    if args.replay:
        for r in results:
            print(f"{r.campaign}:{r.seed}: {r.outcome} {r.detail}")
    return 1 if any(r.outcome in BAD for r in results) else 0
