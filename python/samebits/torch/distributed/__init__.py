"""Same bits on any number of ranks (issue 27): torch.distributed all-reduce, a gradient
accumulator and a DDP communication hook.

The numerics are the C++ library's (include/samebits/distributed.hpp): values become int64 at a
power-of-two scale 2^s (samebits._core.to_fixed), the integers are summed exactly by the process
group (an integer SUM is associative, so neither order nor world size matters), and the sums come
back as floats (from_fixed). This module only moves tensors and picks scales (integer logic).

    acc = GradientAccumulator(model)              # before wrapping: hooks on the parameters
    ddp = DistributedDataParallel(model)
    ddp.register_comm_hook(acc, hook)
    for step ...:
        for micro-batch j of this rank's share of the step's global batch:
            with (ddp.no_sync() if j is not the last else nullcontext()):
                loss_fn(ddp(x_j), y_j).backward()  # the micro-batch's mean loss, NOT divided by
        opt.step(); opt.zero_grad()                #   the number of micro-batches

Each parameter's gradient becomes the mean over all micro-batches of all ranks (the hook divides
the integer sum by the global number of micro-batches), with the same bits for every world size
that splits the same micro-batches (and equal, for one rank, to GradientAccumulator.reduce()
without DDP). A loss divided by the per-rank number of micro-batches would change each micro-
batch's gradient bits with the world size, so the division is the hook's.

The scale of a parameter is known before its first micro-batch of a step is converted: 2^s with
s = fixed_scale(M, headroom_log2, contributions_log2), M the previous step's global max-abs of
that parameter's micro-batch gradients (a MAX all-reduce, identical on every rank). On the first
step (no M yet) the accumulator keeps the micro-batch gradients as they are and converts them at
reduce time with the exact M of the step and no headroom. A gradient beyond 2^headroom_log2 times
M, or not finite, is counted; the counts travel with the integers and raise OverflowError naming
the parameter. At most 2^contributions_log2 micro-batches per step (world-wide) may be summed.
"""
import contextlib
from typing import Optional

import torch
import torch.distributed as dist

from ... import _core, _level_name, get_determinism
from ..._errors import InvalidArgument, OverflowError

__all__ = ["all_reduce", "GradientAccumulator", "ReduceState", "hook"]


def _stream(t):
    return torch._C._cuda_getCurrentRawStream(t.get_device()) if t.is_cuda else 0


def _world(group):
    if not (dist.is_available() and dist.is_initialized()):
        return 1
    return dist.get_world_size(group)


def _max_all_reduce(t, group):
    if _world(group) > 1:
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)


def _sum_all_reduce(t, group):
    if _world(group) > 1:
        dist.all_reduce(t, op=dist.ReduceOp.SUM, group=group)


def _level(level):
    name = _level_name(level)
    return name if name is not None else get_determinism()[0].value


def _fixed_sum(x, group, name):
    """The one-shot portable sum of a contiguous float tensor, in place."""
    m = torch.zeros(1, dtype=torch.float64, device=x.device)
    _core.max_abs_finite(x, m, _stream(x))
    _max_all_reduce(m, group)
    s = _core.fixed_scale(float(m.item()), 0, _core.CONTRIBUTIONS_LOG2)
    n = x.numel()
    buf = torch.zeros(n + 1, dtype=torch.int64, device=x.device)
    _core.to_fixed(x.view(-1), s, buf[:n], buf[n:], False, _core.CONTRIBUTIONS_LOG2, _stream(x))
    _sum_all_reduce(buf, group)
    bad = int(buf[n].item())
    if bad:
        raise OverflowError(f"all_reduce: {name} has {bad} non-finite value(s) over the "
                            f"{_world(group)} ranks; the portable all-reduce sums finite values only")
    _core.from_fixed(buf[:n], s, 1, x.view(-1), _stream(x))


def _block_sum(x, group):
    """run_to_run: rank r sums block r of every rank's tensor in rank order, then all gather."""
    w = _world(group)
    n = x.numel()
    block = (n + w - 1) // w
    send = torch.zeros(w * block, dtype=x.dtype, device=x.device)
    send[:n].copy_(x.view(-1))
    recv = torch.empty(w, block, dtype=x.dtype, device=x.device)
    dist.all_to_all_single(recv.view(-1), send, group=group)
    mine = torch.empty(block, dtype=x.dtype, device=x.device)
    _core.sum_ranks(recv, mine, _stream(x))
    parts = [torch.empty(block, dtype=x.dtype, device=x.device) for _ in range(w)]
    dist.all_gather(parts, mine, group=group)
    x.view(-1).copy_(torch.cat(parts)[:n])


def all_reduce(tensor, group=None, level=None, name="tensor"):
    """Sums `tensor` (float32/float64) over the group's ranks in place, like
    torch.distributed.all_reduce(tensor, SUM), at a samebits level (None: the thread's mode):
    portable: the fixed-point sum (same bits for every world size and backend; payload one int64
    per element plus one; one more MAX all-reduce of a double picks the scale); run_to_run: the
    rank-ordered block sum (same bits on every run for one world size); not_guaranteed: the
    process group's own sum."""
    if tensor.dtype not in (torch.float32, torch.float64):
        raise InvalidArgument(f"all_reduce: {name} must be float32 or float64, got {tensor.dtype}")
    level = _level(level)
    if tensor.numel() == 0:
        return tensor
    x = tensor if tensor.is_contiguous() else tensor.contiguous()
    if level == "portable":
        _fixed_sum(x, group, name)
    elif level == "run_to_run":
        if _world(group) > 1:
            _block_sum(x, group)
    else:
        _sum_all_reduce(x, group)
    if x is not tensor:
        tensor.copy_(x)
    return tensor


class _Slot:
    """One parameter's accumulator: int64 sums, its scale, the micro-batches seen."""

    def __init__(self, name, param):
        self.name = name
        self.param = param
        self.q = torch.zeros(param.numel(), dtype=torch.int64, device=param.device)
        self.overflow = torch.zeros(1, dtype=torch.int64, device=param.device)
        self.local_max = torch.zeros(1, dtype=torch.float64, device=param.device)
        self.count = 0
        self.kept = []            # first step: the gradients themselves
        self.reference = None     # previous step's global max-abs
        self.s = None


class GradientAccumulator:
    """Captures every micro-batch's gradient of `module`'s parameters (tensor hooks, called by
    each backward before autograd accumulates .grad) and sums them exactly as int64. reduce()
    (or the DDP hook) sums the integers over the ranks and writes the mean into the gradients."""

    def __init__(self, module, group=None, headroom_log2=None, contributions_log2=None):
        self.group = group
        self.headroom_log2 = _core.HEADROOM_LOG2 if headroom_log2 is None else headroom_log2
        self.contributions_log2 = (_core.CONTRIBUTIONS_LOG2 if contributions_log2 is None
                                   else contributions_log2)
        self._slots = {}
        self._handles = []
        for name, p in module.named_parameters():
            if not p.requires_grad:
                continue
            if p.dtype not in (torch.float32, torch.float64):
                raise InvalidArgument(f"GradientAccumulator: {name} is {p.dtype}; float32 or "
                                      "float64 parameters only")
            slot = _Slot(name, p)
            self._slots[id(p)] = slot
            self._handles.append(p.register_hook(self._capture(slot)))

    def _capture(self, slot):
        def capture(grad):
            g = grad.detach().contiguous().view(-1)
            m = torch.empty(1, dtype=torch.float64, device=g.device)
            _core.max_abs_finite(g, m, _stream(g))
            torch.maximum(slot.local_max, m, out=slot.local_max)  # exact
            slot.count += 1
            if slot.reference is None:
                slot.kept.append(g.clone())
            else:
                if slot.s is None:
                    slot.s = _core.fixed_scale(slot.reference, self.headroom_log2,
                                               self.contributions_log2)
                _core.to_fixed(g, slot.s, slot.q, slot.overflow, True, self.contributions_log2,
                               _stream(g))
            return grad
        return capture

    def remove(self):
        for h in self._handles:
            h.remove()
        self._handles = []

    def reduce(self, params=None, out=None):
        """Sums the accumulated micro-batches of `params` (default: all) over the group and writes
        each mean into out[i] (default: the parameter's .grad); then starts the next step.
        Two collectives: a MAX of one double per parameter, a SUM of the integers, the overflow
        counts and the micro-batch counts."""
        slots = [self._slots[id(p)] for p in (params if params is not None
                                              else [s.param for s in self._slots.values()])]
        if not slots:
            return
        dev = slots[0].param.device
        maxes = torch.cat([s.local_max for s in slots])
        _max_all_reduce(maxes, self.group)
        maxes = maxes.tolist()
        for s, m in zip(slots, maxes):
            if s.reference is None:  # first step: the exact max of this step, no headroom
                s.s = _core.fixed_scale(m, 0, self.contributions_log2)
                for g in s.kept:
                    _core.to_fixed(g, s.s, s.q, s.overflow, True, self.contributions_log2,
                                   _stream(g))
                s.kept = []
            elif s.s is None:  # no micro-batch on this rank: the scale all ranks use
                s.s = _core.fixed_scale(s.reference, self.headroom_log2, self.contributions_log2)
        k = len(slots)
        counts = torch.tensor([s.count for s in slots], dtype=torch.int64, device=dev)
        payload = torch.cat([s.q for s in slots] + [s.overflow for s in slots] + [counts])
        _sum_all_reduce(payload, self.group)
        n = payload.numel() - 2 * k
        tail = payload[n:].tolist()
        for i, s in enumerate(slots):
            bad, c = tail[i], tail[k + i]
            if bad:
                raise OverflowError(
                    f"GradientAccumulator: {s.name}: {bad} gradient value(s) beyond 2^"
                    f"{self.headroom_log2} times the previous step's max-abs "
                    f"({s.reference if s.reference is not None else maxes[i]:g}) or not finite; "
                    "raise headroom_log2")
            if c > (1 << self.contributions_log2):
                raise OverflowError(f"GradientAccumulator: {s.name} received {c} micro-batches in "
                                    f"one step, more than 2^{self.contributions_log2}; raise "
                                    "contributions_log2")
        off = 0
        for i, s in enumerate(slots):
            numel = s.q.numel()
            c = tail[k + i]
            target = out[i] if out is not None else s.param.grad
            if c > 0 and target is not None:
                flat = target.view(-1) if target.is_contiguous() else None
                dst = flat if flat is not None else torch.empty(numel, dtype=target.dtype,
                                                                device=target.device)
                _core.from_fixed(payload[off:off + numel], s.s, c, dst, _stream(dst))
                if flat is None:
                    target.copy_(dst.view_as(target))
            off += numel
            s.reference = maxes[i]
            s.s = None
            s.count = 0
            s.q.zero_()
            s.overflow.zero_()
            s.local_max.zero_()


class ReduceState:
    """The state of `hook` without an accumulator: all-reduce the bucket at `level` and divide
    by the world size (DDP's mean), e.g. ReduceState("run_to_run")."""

    def __init__(self, level="run_to_run", group=None):
        self.level = _level_name(level)
        self.group = group


def hook(state, bucket):
    """DDP communication hook (model.register_comm_hook(state, hook)). With a GradientAccumulator
    as state: the accumulator's integers of the bucket's parameters are summed over the ranks and
    the mean over all micro-batches is written into the bucket. With a ReduceState: the bucket is
    all-reduced at its level and divided by the world size."""
    buf = bucket.buffer()
    if isinstance(state, GradientAccumulator):
        params = bucket.parameters()
        views, off = [], 0
        for p in params:
            views.append(buf[off:off + p.numel()])
            off += p.numel()
        state.reduce(params, out=views)
    else:
        all_reduce(buf, group=state.group, level=state.level, name="DDP bucket")
        buf.div_(_world(state.group))
    fut = torch.futures.Future()
    fut.set_result(buf)
    return fut
