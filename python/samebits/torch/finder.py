# find_nondeterminism(fn, runs=2): runs fn several times under samebits.torch.trace (in this
# process or in fresh ones) and compares the traces: the first op whose output differs and its
# source line, how the difference grows afterwards, and the ops whose output differs although
# every input they were given agreed, which are where the nondeterminism comes from. Those that
# ran while torch.use_deterministic_algorithms(True) was set are silent nondeterminism (custom
# CUDA extensions, sparse kernels, ops torch does not know to refuse).
#
# The comparison follows samebits::trace::diff (src/tools/trace_diff.cpp): entries are compared
# in order by the hash kinds both carry, and the distance is the largest relative difference of
# min, max, mean, L2 norm and the sampled values. Imports only torch and the standard library.
from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .. import _files
from ._runs import check_runs, seed_generators
from .tracing import trace

__all__ = ["find_nondeterminism", "compare_traces", "read_trace", "Report", "Difference"]

# Ops that draw random numbers: when one of them is where runs part, the seed or the generator
# state differs between the runs.
_RANDOM_OPS = (
    "rand",
    "randn",
    "randint",
    "randperm",
    "normal",
    "uniform",
    "bernoulli",
    "dropout",
    "multinomial",
    "exponential",
    "geometric",
    "cauchy",
    "log_normal",
    "random_",
)


def read_trace(path: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the entries of a trace file (C++ or Python)."""
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    if not lines:
        raise ValueError(f"trace '{path}' is empty")
    header = json.loads(lines[0])
    if header.get("samebits_trace") != 1:
        raise ValueError(f"'{path}' is not a samebits trace (format 1)")
    return header, [json.loads(x) for x in lines[1:]]


def _num(v: Any) -> float:
    if isinstance(v, str):
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[v]
    return float(v)


def _rel(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b):
        return 0.0 if math.isnan(a) and math.isnan(b) else math.inf
    if a == b:
        return 0.0
    if math.isinf(a) or math.isinf(b):
        return math.inf
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


def _kinds(e: dict[str, Any]) -> set[str]:
    return {k for k in ("hash", "sum_hash") if e.get(k)}


def same_output(a: dict[str, Any], b: dict[str, Any]) -> bool:
    common = _kinds(a) & _kinds(b)
    return bool(common) and all(a[k] == b[k] for k in common)


def distance(a: dict[str, Any], b: dict[str, Any]) -> float:
    if same_output(a, b):
        return 0.0
    if a.get("nan") != b.get("nan"):
        return math.inf
    d = max(_rel(_num(a[k]), _num(b[k])) for k in ("min", "max", "mean", "l2"))
    for x, y in zip(a.get("samples", []), b.get("samples", [])):
        d = max(d, _rel(_num(x), _num(y)))
    # Different bits, equal statistics (or none recorded): still a difference.
    return d if d > 0 else 5e-324


@dataclass
class Difference:
    """One entry whose output differs between two runs."""

    index: int
    step: int
    op: str
    layer: str
    dtype: str
    shape: list[int]
    source: str
    caller: str
    grad_fn: str
    distance: float
    deterministic_algorithms: bool  # torch.use_deterministic_algorithms(True) was set
    inputs_agreed: bool  # every input entry had the same output in both runs

    @property
    def random(self) -> bool:
        name = self.op.split(".")[1] if self.op.count(".") >= 1 else self.op
        return any(name.startswith(r) or name.startswith("native_" + r) for r in _RANDOM_OPS)

    def where(self) -> str:
        s = self.source or "(no Python source: run by torch itself)"
        if self.caller:
            s += f" (called from {self.caller})"
        if self.grad_fn:
            s += f", backward of {self.grad_fn}"
        return s

    def line(self) -> str:
        shape = "[" + ", ".join(str(x) for x in self.shape) + "]"
        module = f" in {self.layer}" if self.layer else ""
        return f"entry {self.index}, step {self.step}: {self.op} -> {self.dtype}{shape}{module}"


@dataclass
class StepGrowth:
    context: str
    step: int
    entries: int = 0
    differing: int = 0
    max_distance: float = 0.0


@dataclass
class Report:
    """What comparing the runs found; str(report) is the text `samebits.torch.check` prints."""

    runs: int
    traces: list[str]
    entries: list[int]  # per run
    compared: int = 0
    structure: str = ""  # where the runs stopped executing the same ops; empty when they did not
    first: Difference | None = None
    origins: list[Difference] = field(default_factory=list)  # differ while their inputs agreed
    differing: list[Difference] = field(default_factory=list)  # every differing entry, in order
    growth: list[StepGrowth] = field(default_factory=list)

    @property
    def deterministic(self) -> bool:
        return self.first is None and not self.structure and len(set(self.entries)) == 1

    @property
    def silent(self) -> list[Difference]:
        """Ops that were nondeterministic although torch's deterministic mode was on."""
        return [d for d in self.origins if d.deterministic_algorithms]

    def __str__(self) -> str:
        out = [f"{self.runs} runs; entries per run: {', '.join(map(str, self.entries))}"]
        if self.structure:
            out.append(f"the runs executed different ops: {self.structure}")
        if self.first is None:
            if not self.structure:
                out.append(f"no difference: all {self.compared} compared op outputs are identical")
            return "\n".join(out)
        f = self.first
        out.append(f"first difference: {f.line()}")
        out.append(f"  at {f.where()}")
        out.append(f"  relative distance {_sci(f.distance)}")
        out.append(
            f"ops whose output differs although their inputs agreed (sources): {len(self.origins)}"
        )
        for d in self.origins[:20]:
            why = []
            if d.deterministic_algorithms:
                why.append("torch.use_deterministic_algorithms(True) was set: silent nondeterminism")
            if d.random:
                why.append("a random op: the seed or generator state differs between runs")
            out.append(f"  {d.line()}\n    at {d.where()}" + "".join(f"\n    {w}" for w in why))
        if len(self.origins) > 20:
            out.append(f"  ... and {len(self.origins) - 20} more")
        out.append(f"entries that differ: {len(self.differing)} of {self.compared}")
        with_context = any(g.context for g in self.growth)
        out.append(
            f"growth  {'step':>8} {'entries':>8} {'differing':>10} {'max distance':>14}"
            + ("  context" if with_context else "")
        )
        for g in _growth_rows(self.growth):
            out.append(
                f"        {g.step:>8} {g.entries:>8} {g.differing:>10} {_sci(g.max_distance):>14}"
                + (f"  {g.context}" if with_context else "")
            )
        return "\n".join(out)


def _sci(v: float) -> str:
    if math.isinf(v):
        return "inf"
    return "0" if v == 0 else f"{v:.2e}"


def _growth_rows(rows: list[StepGrowth]) -> list[StepGrowth]:
    """Every step while there are few; else log-spaced ones after the first difference."""
    if len(rows) <= 30:
        return rows
    first = next((i for i, g in enumerate(rows) if g.differing), 0)
    keep = [first - 1] if first > 0 else []
    k = 0
    while first + k < len(rows):
        keep.append(first + k)
        k = k + 1 if k < 4 else 2 * k
    if keep[-1] != len(rows) - 1:
        keep.append(len(rows) - 1)
    return [rows[i] for i in keep]


def _structure_same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(a.get(k) == b.get(k) for k in ("step", "layer", "op", "dtype", "shape"))


def compare_traces(paths: list[str]) -> Report:
    """Compares run 1's trace with every other run's; a difference from any of them counts."""
    loaded = [read_trace(p)[1] for p in paths]
    base = loaded[0]
    report = Report(runs=len(paths), traces=list(paths), entries=[len(e) for e in loaded])
    n = min(len(e) for e in loaded)
    for other in loaded[1:]:
        for i in range(n):
            if not _structure_same(base[i], other[i]) or not (_kinds(base[i]) & _kinds(other[i])):
                a, b = base[i], other[i]
                report.structure = (
                    f"entry {i}: run 1 has step {a.get('step')} {a.get('layer')}/{a.get('op')} "
                    f"{a.get('dtype')}{a.get('shape')}, another run step {b.get('step')} "
                    f"{b.get('layer')}/{b.get('op')} {b.get('dtype')}{b.get('shape')}"
                )
                n = i
                break
    if not report.structure and len(set(report.entries)) > 1:
        report.structure = f"one run is longer: only the first {n} entries were compared"
    report.compared = n
    rows: dict[tuple[str, int], StepGrowth] = {}
    differs = [False] * n
    for i in range(n):
        a = base[i]
        d = max(distance(a, o[i]) for o in loaded[1:])
        differs[i] = d > 0
        key = (a.get("context", ""), a.get("step", 0))
        g = rows.get(key)
        if g is None:
            g = rows[key] = StepGrowth(key[0], key[1])
        g.entries += 1
        if d > 0:
            g.differing += 1
            g.max_distance = max(g.max_distance, d)
            inputs = a.get("inputs")
            agreed = inputs is not None and all(0 <= j < i and not differs[j] for j in inputs)
            diff = Difference(
                index=a.get("i", i),
                step=a.get("step", 0),
                op=a.get("op", ""),
                layer=a.get("layer", ""),
                dtype=a.get("dtype", ""),
                shape=a.get("shape", []),
                source=a.get("source", ""),
                caller=a.get("caller", ""),
                grad_fn=a.get("grad_fn", ""),
                distance=d,
                deterministic_algorithms=bool(a.get("deterministic_algorithms")),
                inputs_agreed=agreed or report.first is None,
            )
            if report.first is None:
                report.first = diff
            if diff.inputs_agreed:
                report.origins.append(diff)
            report.differing.append(diff)
    report.growth = list(rows.values())
    return report


def _traced_run(fn: Callable[..., Any], args: tuple, kwargs: dict, path: str, seed: int,
                deterministic: bool | None, stats: bool, context: str,
                recorder: str = "auto") -> None:
    """One run of fn under a trace (in this process or in a fresh one)."""
    was = torch.are_deterministic_algorithms_enabled()
    was_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    if deterministic is not None:
        torch.use_deterministic_algorithms(deterministic)
    try:
        seed_generators(seed)
        with trace(path, stats=stats, context=context, recorder=recorder):
            fn(*args, **kwargs)
    finally:
        torch.use_deterministic_algorithms(was, warn_only=was_warn)


def trace_folder(keep: str | os.PathLike | None, runs: int, what: str) -> tuple[str, list[str]]:
    """The folder and paths of `runs` traces (run1.trace, ...): `keep` when given, a folder that
    must not hold them already (samebits._files.output_folder), else a new temporary folder."""
    names = [f"run{r}.trace" for r in range(1, runs + 1)]
    if keep is None:
        folder = tempfile.mkdtemp(prefix="samebits_traces_")
    else:
        folder = _files.output_folder(keep, names, what)
    return folder, [os.path.join(folder, n) for n in names]


def _check_picklable(fn: Callable[..., Any]) -> None:
    """A fresh process gets fn by name: refuse one it could not import (a lambda, a nested
    function, a function of a script's __main__ run by `python -c`) before anything runs."""
    import pickle

    try:
        pickle.dumps(fn)
    except Exception as e:
        raise ValueError(
            f"find_nondeterminism: fresh_process=True needs fn importable by name (a module-level "
            f"function), and {getattr(fn, '__qualname__', fn)!r} is not ({e})"
        ) from None


def find_nondeterminism(
    fn: Callable[..., Any],
    runs: int = 2,
    fresh_process: bool = False,
    *,
    args: tuple = (),
    kwargs: dict | None = None,
    seed: int = 0,
    deterministic: bool | None = None,
    stats: bool = True,
    trace_dir: str | None = None,
    recorder: str = "auto",
) -> Report:
    """Runs fn(*args, **kwargs) `runs` times, each after seeding Python's, torch's and (when
    loaded) NumPy's generators with `seed`, under samebits.torch.trace, and compares the traces.

    fresh_process=True runs each time in a new Python process (fn must then be importable by
    name: a module-level function), which also catches what changes between processes (hash
    seeds, allocator addresses, lazily tuned kernels). deterministic=True/False sets
    torch.use_deterministic_algorithms for the runs (None leaves it). The traces are kept in
    trace_dir when given (compare them later with `samebits diff`), else in a temporary folder
    that is removed. `recorder` is trace()'s ("auto", "cpp" or "python"). print(report)
    explains what was found."""
    if recorder not in ("auto", "cpp", "python"):
        raise ValueError(
            f"find_nondeterminism: recorder is 'auto', 'cpp' or 'python', not {recorder!r}"
        )
    check_runs("find_nondeterminism", fn, runs, "comparing")
    if deterministic not in (None, True, False):
        raise TypeError(f"find_nondeterminism: deterministic is None, True or False, not "
                        f"{deterministic!r}")
    if fresh_process:
        _check_picklable(fn)
    kwargs = kwargs or {}
    keep = trace_dir is not None
    folder, paths = trace_folder(trace_dir, runs, "find_nondeterminism")
    try:
        for r, path in enumerate(paths, 1):
            job = (fn, args, kwargs, path, seed, deterministic, stats, f"run {r}", recorder)
            if fresh_process:
                import concurrent.futures as cf
                import multiprocessing as mp

                with cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
                    pool.submit(_traced_run, *job).result()
            else:
                _traced_run(*job)
        return compare_traces(paths)
    finally:
        if not keep:
            for p in paths:
                for q in (p, p + ".partial"):
                    if os.path.exists(q):
                        os.remove(q)
            os.rmdir(folder)
