"""samebits.torch as a package: every op registered under torch.ops.samebits, the finder's names
imported lazily (and no other module), and import without a GPU."""
import importlib
import os
import subprocess
import sys

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


@pytest.mark.parametrize("name,module", [("trace", "tracing"), ("find_nondeterminism", "finder"),
                                         ("compare_traces", "finder"),
                                         ("calibrate", "calibration")])
def test_finder_names_resolve_to_what_their_module_defines(name, module):
    value = getattr(st, name)
    assert callable(value)
    assert value is getattr(importlib.import_module(f"samebits.torch.{module}"), name)
    assert name in dir(st)


def test_an_unknown_attribute_imports_nothing():
    # A probe for a name samebits.torch lacks (hasattr, `from samebits.torch import x`) must not
    # import the finder's modules: `check` imported before `python -m samebits.torch.check` runs
    # it makes runpy warn.
    code = ("import sys, samebits.torch as st; hasattr(st, 'not_a_name'); "
            "print(sorted(m for m in sys.modules if m.startswith('samebits.torch.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    loaded = eval(out.stdout)  # a list of module names
    assert not {"samebits.torch.check", "samebits.torch.tracing", "samebits.torch.finder",
                "samebits.torch.calibration"} & set(loaded), loaded


def test_check_runs_as_a_module_without_warnings():
    r = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m",
                        "samebits.torch.check", "--help"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert r.returncode == 0 and "usage: python -m samebits.torch.check" in r.stdout, r.stderr
    assert "RuntimeWarning" not in r.stderr


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
