"""How a samebits.torch call reaches its kernel.

Each op is a torch.library custom op (registered here by `op`); the public function routes a call:
- through torch's dispatcher whenever something traces or intercepts it (torch.compile, a dispatch
  or function mode such as FakeTensorMode or the finder's trace, functorch, tensor subclasses);
- otherwise straight to the kernel function when no autograd is to be recorded;
- otherwise through a torch.autograd.Function that runs the same kernel and the same
  setup_context and backward that torch.library.register_autograd was given.
The dispatcher's Python path costs tens of microseconds per call; the other two run the same
functions, so every path gives the same bits.
"""
import functools
import inspect

import torch
from torch import Tensor
from torch.library import custom_op

_C = torch._C
_PLAIN = (Tensor, torch.nn.Parameter)  # subclasses (FakeTensor, DTensor...) take the dispatcher
DISPATCHER, DIRECT, EAGER_AUTOGRAD = 0, 1, 2
_AUTOGRAD = {}  # op name -> (setup_context, backward)


# Bound once: route runs on every call.
_dispatch_stack = _C._len_torch_dispatch_stack
_function_mode = _C._is_torch_function_mode_enabled
_functorch = _C._are_functorch_transforms_active
_grad_enabled = _C.is_grad_enabled
_compiling = torch.compiler.is_compiling


def route(args, kwargs):
    # is_compiling first: under torch.compile it is True and the C queries are never traced.
    if _compiling() or _dispatch_stack() or _function_mode() or _functorch():
        return DISPATCHER
    grad = _grad_enabled()
    needs_grad = False
    for a in args:
        if isinstance(a, Tensor):
            if type(a) not in _PLAIN:
                return DISPATCHER
            if grad and a.requires_grad:
                needs_grad = True
    if kwargs:
        for a in kwargs.values():
            if isinstance(a, Tensor):
                if type(a) not in _PLAIN:
                    return DISPATCHER
                if grad and a.requires_grad:
                    needs_grad = True
    return EAGER_AUTOGRAD if needs_grad else DIRECT


class _Eager(torch.autograd.Function):
    """args: the op's positional arguments (defaults filled in), then a _Call."""

    @staticmethod
    def forward(ctx, *args):
        call, args = args[-1], args[:-1]
        out = call.fn(*args, **call.kwargs)
        setup, ctx.samebits_backward = _AUTOGRAD[call.name]
        setup(ctx, args, call.kwargs, out)
        return out

    @staticmethod
    def backward(ctx, *grads):
        # needs_input_grad has one more entry (the _Call): the backward sees the op's own.
        full = ctx.needs_input_grad
        ctx.needs_input_grad = full[:-1]
        try:
            result = ctx.samebits_backward(ctx, *grads)
        finally:
            ctx.needs_input_grad = full
        return (*result, None) if isinstance(result, tuple) else (result, None)


class _Call:
    __slots__ = ("fn", "name", "kwargs")

    def __init__(self, fn, name, kwargs):
        self.fn, self.name, self.kwargs = fn, name, kwargs


def op(name, mutates_args):
    """Registers fn as the custom op samebits::name; returns the public function (routed as the
    module says). `.op` is the custom op."""
    def register(fn):
        custom = custom_op("samebits::" + name, mutates_args=mutates_args)(fn)
        params = inspect.signature(fn).parameters.values()
        positional = [(p.name, p.default) for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
        keyword = {p.name: p.default for p in params if p.kind is p.KEYWORD_ONLY}

        @functools.wraps(fn)
        def call(*args, **kwargs):
            how = route(args, kwargs)
            if how == DIRECT:
                return fn(*args, **kwargs)
            if how == EAGER_AUTOGRAD and name in _AUTOGRAD:
                kwargs = dict(kwargs)
                full = list(args)
                for pname, default in positional[len(args):]:
                    full.append(kwargs.pop(pname, default))
                kw = dict(keyword)
                kw.update(kwargs)
                return _Eager.apply(*full, _Call(fn, name, kw))
            return custom(*args, **kwargs)
        call.op = custom
        return call
    return register


def register_autograd(name, backward, setup_context):
    """torch.library.register_autograd for samebits::name, also used by the eager path."""
    torch.library.register_autograd("samebits::" + name, backward, setup_context=setup_context)
    _AUTOGRAD[name] = (setup_context, backward)
