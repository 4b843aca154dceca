"""samebits.torch's routing of a call (_dispatch.route): the dispatcher for anything that traces or
wraps tensors, the autograd.Function where a grad is to be recorded, the kernel directly otherwise.
Every combination of argument kinds, positions (positional or keyword) and grad mode is generated
and checked against the rule written out here."""
import itertools

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from samebits.torch import _dispatch as d


class _Sub(torch.Tensor):
    """A tensor subclass (as FakeTensor or DTensor are): its calls go through the dispatcher."""


def _make(kind):
    if kind == "none":
        return 3
    if kind == "plain":
        return torch.randn(2)
    if kind == "leaf":
        return torch.randn(2, requires_grad=True)
    if kind == "param":
        return torch.nn.Parameter(torch.randn(2))
    if kind == "frozen":
        return torch.nn.Parameter(torch.randn(2), requires_grad=False)
    return torch.randn(2).as_subclass(_Sub)


KINDS = ("none", "plain", "leaf", "param", "frozen", "sub")


def _expected(kinds, grad):
    if "sub" in kinds:
        return d.DISPATCHER
    if grad and any(k in ("leaf", "param") for k in kinds):
        return d.EAGER_AUTOGRAD
    return d.DIRECT


@pytest.mark.parametrize("grad", [True, False])
@pytest.mark.parametrize("kinds", list(itertools.product(KINDS, repeat=2)))
@pytest.mark.parametrize("second_as_keyword", [False, True])
def test_route_follows_the_rule(kinds, grad, second_as_keyword):
    a, b = (_make(k) for k in kinds)
    args, kwargs = ((a,), {"other": b, "level": "run_to_run"}) if second_as_keyword else ((a, b), {})
    with torch.set_grad_enabled(grad):
        assert d.route(args, kwargs) == _expected(kinds, grad)


def test_a_dispatch_mode_routes_everything_to_the_dispatcher():
    class Seen(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Seen():
        assert d.route((torch.randn(2),), {}) == d.DISPATCHER
    assert d.route((torch.randn(2),), {}) == d.DIRECT
