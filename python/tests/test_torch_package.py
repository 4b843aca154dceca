"""samebits.torch as a package: every op registered under torch.ops.samebits, the lazily imported
finder names, and import without a GPU."""
import importlib

import pytest
import torch

import samebits.torch as st

OPS = ["index_add", "index_add_", "scatter_add", "scatter_add_", "scatter_reduce",
       "scatter_reduce_", "segment_reduce", "segment_csr", "aggregate", "csr_transpose",
       "index_select", "gather", "cumsum", "cumsum_", "bincount", "histc", "sum", "mm", "addmm"]


@pytest.mark.parametrize("name", OPS)
def test_every_op_is_a_samebits_custom_op_with_a_level_keyword(name):
    schema = getattr(torch.ops.samebits, name).default._schema
    if name != "csr_transpose":
        assert any(a.name == "level" and a.kwarg_only for a in schema.arguments), str(schema)


def test_public_functions_expose_their_custom_op():
    for name in ("index_add", "scatter_reduce", "aggregate", "mm"):
        assert getattr(st, name).op._qualname == f"samebits::{name}"


def test_unknown_attribute_raises_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'not_a_samebits_name'"):
        st.not_a_samebits_name  # noqa: B018


def test_lazy_names_resolve_to_what_their_module_defines():
    # The finder's modules are optional: a name resolves only where its module is present.
    for name, module in (("trace", "trace"), ("find_nondeterminism", "check")):
        try:
            mod = importlib.import_module(f"samebits.torch.{module}")
        except ImportError:
            continue
        if hasattr(mod, name):
            assert getattr(st, name) is getattr(mod, name)


def test_dispatch_modes_see_the_custom_op():
    # A TorchDispatchMode (the finder's trace, FakeTensorMode) must see samebits ops: with one
    # active, calls go through the dispatcher instead of the eager shortcut.
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    x, idx, src = torch.zeros(4, 2), torch.tensor([0, 3, 3]), torch.ones(3, 2)
    with Record() as rec:
        out = st.index_add(x, 0, idx, src)
    assert "samebits.index_add.default" in rec.ops
    assert torch.equal(out, x.index_add(0, idx, src))
