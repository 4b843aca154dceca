# samebits.torch.trace's C++ recorder (samebits._torch_mode.TraceRecorder, python/src/
# trace_recorder.cpp) behind the same context manager as the Python one (tracing.Tracer): the
# file's header and life cycle, the module paths and the optimizer's steps stay here; the ops are
# recorded in C++ from torch's RecordFunction callbacks. The C++ side asks two questions once per
# op or code object, answered here with the Python recorder's own rules: describe() and
# tracing._classify.
#
# Imports torch, the standard library and samebits' extensions.
from __future__ import annotations

from typing import Any

import torch

from .. import _files
from . import tracing
from .mode import _cpp

__all__ = ["CppTracer", "available"]

_COMPOSITE = torch._C.DispatchKey.CompositeImplicitAutograd
_active: list["CppTracer"] = []


def available() -> bool:
    """Whether trace(recorder="auto") takes the C++ recorder: samebits._torch_mode is built
    against this torch, and no other C++ trace is recording."""
    return _cpp is not None and hasattr(_cpp, "TraceRecorder") and not _active


def describe(qualified: str, overload: str) -> tuple[bool, bool, str, list[int] | None]:
    """What the C++ recorder needs of an op ("aten::add", "Tensor"): whether it decomposes above a
    dispatch mode (CompositeImplicitAutograd: its callees are the ops), whether it records
    nothing (a view, or an op of tracing._SKIP), its name as the Python recorder writes it, and,
    for an op that returns nothing, the positions of the arguments it writes."""
    ns, _, name = qualified.partition("::")
    try:
        func = getattr(getattr(getattr(torch.ops, ns), name), overload or "default")
    except (AttributeError, RuntimeError):
        return False, False, f"{ns}.{name}.{overload or 'default'}", None
    decomposes = torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), _COMPOSITE)
    passive, op_name, written = tracing._info(func)
    return decomposes, passive, op_name, (None if written is None else [i for i, _ in written])


class CppTracer:
    """What trace() returns with the C++ recorder; `step` is the trace's step field (advanced by
    every optimizer step, or set by hand), `context` labels the entries."""

    def __init__(self, path: str, *, stats: bool = True, context: str = "") -> None:
        if _cpp is None or not hasattr(_cpp, "TraceRecorder"):
            raise RuntimeError(
                "samebits.torch.trace: the C++ recorder needs samebits._torch_mode built against "
                f"this torch ({torch.__version__}); use recorder='python'"
            )
        self.path = path
        self.stats = stats
        self.context = context
        self._optimizer = ""
        self._rec = _cpp.TraceRecorder(path + ".partial", stats, context, describe,
                                       tracing._classify)
        self._modules = tracing._ModuleStack(changed=self._layer_changed)
        self._step_hooks: list[Any] = []

    @property
    def step(self) -> int:
        return self._rec.step

    @step.setter
    def step(self, value: int) -> None:
        self._rec.step = value

    @property
    def entries(self) -> int:
        return self._rec.entries

    def flush(self) -> None:
        self._rec.flush()

    def __enter__(self) -> "CppTracer":
        with open(self.path + ".partial", "w", encoding="utf-8") as f:
            f.write(tracing._JSON.encode(tracing._header()) + "\n")
        from torch.optim import optimizer

        self._modules.install()
        self._step_hooks = [
            optimizer.register_optimizer_step_pre_hook(self._optimizer_enter),
            optimizer.register_optimizer_step_post_hook(self._advance),
        ]
        try:
            self._rec.start()
        except BaseException:
            self._remove_hooks()
            raise
        _active.append(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self._remove_hooks()
        finally:
            _active.remove(self)
            self._rec.stop()  # writes what is pending, closes the file
        if exc_type is None:
            _files.commit(self.path)  # a failed run leaves only .partial

    def _remove_hooks(self) -> None:
        self._modules.remove()
        for h in self._step_hooks:
            h.remove()
        self._step_hooks = []

    def _layer_changed(self, module_path: str) -> None:
        if not self._optimizer:
            self._rec.set_layer(module_path)

    def _optimizer_enter(self, opt: Any, *args: Any) -> None:
        self._optimizer = "optimizer." + type(opt).__name__
        self._rec.set_layer(self._optimizer)

    def _advance(self, *args: Any) -> None:
        self._optimizer = ""
        self._rec.set_layer(self._modules.current())
        self._rec.step = self._rec.step + 1
