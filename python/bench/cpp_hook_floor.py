# What a per-op hook in C++ would cost on the finder's benchmark step (python/bench/bench_trace.py's
# PyG GraphSAGE step on Cora): a RecordFunction callback pair compiled here (torch's
# cpp_extension), on every op, keeping the inputs and outputs as the dispatcher hands them over,
# that finds the leaf ops (no op called inside them) and, in the third mode, reduces each
# floating-point output of a leaf with one torch kernel (a stand-in for samebits' digest: one
# launch an output, with torch's own host cost per launch, which is higher). Beside it, the empty
# TorchDispatchMode that samebits.torch.trace builds on.
#   python python/bench/cpp_hook_floor.py [--device cuda] [--rounds 5] [--steps 3]
# (the extension builds in about a minute the first time; samebits itself is not needed)
import argparse
import contextlib
import sys
import time
from pathlib import Path

import torch
from torch.utils.cpp_extension import load_inline

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python" / "bench"))
import bench_trace  # noqa: E402  (make_step, time_modes, PassThrough)

SOURCE = r"""
#include <torch/extension.h>
#include <ATen/record_function.h>
#include <atomic>
#include <vector>

namespace {
thread_local std::vector<char> open_ops; // per op in flight: whether an op ran inside it
thread_local bool reducing = false;      // inside our own reduction: not an op of the step
std::atomic<long> leaves{0}, launches{0};
bool reduce_outputs = false;
at::CallbackHandle handle = 0;

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction&) {
  if (reducing)
    return nullptr;
  if (!open_ops.empty())
    open_ops.back() = 1;
  open_ops.push_back(0);
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  if (reducing || open_ops.empty())
    return;
  const bool had_child = open_ops.back() != 0;
  open_ops.pop_back();
  if (had_child)
    return;
  ++leaves;
  if (!reduce_outputs)
    return;
  for (const c10::IValue& v : fn.outputs()) {
    if (!v.isTensor())
      continue;
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || t.numel() == 0 || !t.is_floating_point())
      continue;
    reducing = true;
    at::Tensor s = t.detach().reshape(-1).sum();
    reducing = false;
    ++launches;
  }
}
} // namespace

void start(bool reduce) {
  reduce_outputs = reduce;
  handle = at::addGlobalCallback(at::RecordFunctionCallback(on_start, on_end)
                                     .needsInputs(true)
                                     .needsOutputs(true)
                                     .scopes({at::RecordScope::FUNCTION}));
}
void stop() { at::removeCallback(handle); }
std::vector<long> counts() { return {leaves.load(), launches.load()}; }
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3)
    o = ap.parse_args()
    t0 = time.perf_counter()
    ext = load_inline("samebits_hook_floor", cpp_sources=[SOURCE],
                      functions=["start", "stop", "counts"], extra_cflags=["-O2"])
    print(f"extension built in {time.perf_counter() - t0:.0f} s")
    device = torch.device(o.device)
    step = bench_trace.make_step(device)

    def hook(reduce):
        @contextlib.contextmanager
        def wrap():
            ext.start(reduce)
            try:
                yield
            finally:
                ext.stop()
        return wrap

    modes = [("unhooked", contextlib.nullcontext),
             ("an empty TorchDispatchMode", bench_trace.PassThrough),
             ("C++ callbacks, leaf ops found", hook(False)),
             ("C++ callbacks, one reduction per leaf output", hook(True))]
    before = ext.counts()
    times = bench_trace.time_modes(step, device, modes, o.rounds, o.steps)
    leaves, launches = (a - b for a, b in zip(ext.counts(), before))
    base = times["unhooked"]
    print(f"{device}, torch {torch.__version__}, median of {o.rounds} x {o.steps} steps; "
          f"{leaves} leaf ops and {launches} reductions seen over all hooked steps")
    for name, ms in times.items():
        print(f"  {name:<48} {ms:8.2f} ms  {ms / base:6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
