# python -m samebits.torch.check [options] script.py args...: runs a script several times, each
# in a fresh Python process under samebits.torch.trace, and reports where the runs part: the first
# op whose output differs with its source line, the ops that were nondeterministic by themselves
# (silent ones too, under torch.use_deterministic_algorithms(True)) and how the difference grows.
# Exit status: 0 the runs agree, 1 they differ, 2 a run failed.
from __future__ import annotations

import argparse
import os
import runpy
import shutil
import subprocess
import sys


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m samebits.torch.check",
        description="Run a script several times in fresh processes under samebits.torch.trace "
        "and name the op whose output first differs.",
    )
    p.add_argument("--runs", type=int, default=2, help="how many runs (at least 2; default 2)")
    p.add_argument("--seed", type=int, default=0, help="seed for Python, torch and NumPy")
    p.add_argument(
        "--deterministic",
        action="store_true",
        help="set torch.use_deterministic_algorithms(True) for the runs",
    )
    p.add_argument("--no-stats", action="store_true", help="record hashes only (cheaper)")
    p.add_argument("--keep", metavar="DIR", help="keep the traces in DIR (for `samebits diff`)")
    p.add_argument(
        "--recorder",
        choices=("auto", "cpp", "python"),
        default="auto",
        help="who records: torch's C++ callbacks (cpp), a TorchDispatchMode (python), or auto: "
        "cpp where samebits._torch_mode is built against this torch (default)",
    )
    p.add_argument("--record", metavar="TRACE", help=argparse.SUPPRESS)  # one run (internal)
    p.add_argument("--context", default="", help=argparse.SUPPRESS)
    p.add_argument("script", help="the Python script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    return p


def _record(o: argparse.Namespace) -> int:
    """Runs the script once in this process under a trace, as `python script.py args` would."""
    import torch

    from ._runs import seed_generators
    from .tracing import trace

    if o.deterministic:
        torch.use_deterministic_algorithms(True)
    sys.argv = [o.script] + o.args
    sys.path.insert(0, os.path.dirname(os.path.abspath(o.script)))
    seed_generators(o.seed)
    with trace(o.record, stats=not o.no_stats, context=o.context, recorder=o.recorder):
        try:
            runpy.run_path(o.script, run_name="__main__")
        except SystemExit as e:  # the script's own exit: a failure only when it says so
            if e.code not in (None, 0):
                raise
    return 0


def main(argv: list[str] | None = None) -> int:
    o = _parser().parse_args(argv)
    if o.record:
        return _record(o)
    if o.runs < 2:
        print("samebits.torch.check: --runs must be at least 2", file=sys.stderr)
        return 2
    if os.path.isdir(o.script):
        print(f"samebits.torch.check: {o.script} is a directory, not a script", file=sys.stderr)
        return 2
    if not os.path.isfile(o.script):
        print(f"samebits.torch.check: no such script: {o.script}", file=sys.stderr)
        return 2
    from .finder import compare_traces, trace_folder

    try:
        folder, paths = trace_folder(o.keep or None, o.runs, "samebits.torch.check --keep")
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    # The runs import this package from where this process did.
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    try:
        for r, path in enumerate(paths, 1):
            cmd = [sys.executable, "-m", "samebits.torch.check", "--record", path]
            cmd += ["--seed", str(o.seed), "--context", f"run {r}"]
            cmd += ["--deterministic"] * o.deterministic + ["--no-stats"] * o.no_stats
            cmd += ["--recorder", o.recorder]
            cmd += [o.script] + o.args
            print(f"run {r} of {o.runs}: {' '.join(cmd[3:])}", file=sys.stderr, flush=True)
            rc = subprocess.run(cmd, env=env).returncode
            if rc != 0:
                print(f"samebits.torch.check: run {r} failed (exit status {rc})", file=sys.stderr)
                return 2
        report = compare_traces(paths)
        print(report)
        if o.keep:
            print(f"traces kept in {folder}: samebits diff {paths[0]} {paths[1]}")
        return 0 if report.deterministic else 1
    finally:
        if not o.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
