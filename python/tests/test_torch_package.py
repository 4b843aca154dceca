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
