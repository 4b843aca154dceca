# How bad indices are reported (samebits.set_cuda_index_checks): the setting, its context manager
# and the drop-in mode's default; on the CPU a bad index always raises at the call; on CUDA (the
# GPU tests) a deferred check returns at once, writes nothing, and check_index_errors() or the
# next checking op raises it.
import pytest
import torch

import samebits
import samebits.torch as st

CUDA = pytest.mark.skipif(not samebits.cuda_available() or not torch.cuda.is_available(),
                          reason="needs a CUDA device")


@pytest.fixture(autouse=True)
def restore():
    was = samebits.cuda_index_checks()
    yield
    samebits.set_cuda_index_checks(was)


def test_the_default_waits_and_the_setting_round_trips():
    assert samebits.cuda_index_checks() == "wait"
    samebits.set_cuda_index_checks("deferred")
    assert samebits.cuda_index_checks() == "deferred"
    with samebits.index_checks("wait"):
        assert samebits.cuda_index_checks() == "wait"
    assert samebits.cuda_index_checks() == "deferred"


def test_an_unknown_setting_is_refused():
    with pytest.raises(ValueError, match="wait"):
        samebits.set_cuda_index_checks("later")
    assert samebits.cuda_index_checks() == "wait"
    with pytest.raises(ValueError, match="index_checks"):
        st.enable("run_to_run", index_checks="never")
    assert not st.mode.is_enabled()


def test_the_drop_in_mode_defers_and_restores():
    with st.deterministic("run_to_run"):
        assert samebits.cuda_index_checks() == "deferred"
        with st.deterministic("portable", index_checks="wait"):
            assert samebits.cuda_index_checks() == "wait"
        assert samebits.cuda_index_checks() == "deferred"
    assert samebits.cuda_index_checks() == "wait"


@pytest.mark.parametrize("how", ["wait", "deferred"])
def test_the_cpu_raises_at_the_call_either_way(how):
    samebits.set_cuda_index_checks(how)
    out = torch.randn(5, 3)
    before = out.clone()
    with pytest.raises(IndexError):
        st.index_add_(out, 0, torch.tensor([0, 5]), torch.randn(2, 3))
    assert torch.equal(out, before)
    samebits.check_index_errors("cpu")  # nothing pending, nothing to wait for


def _bad_calls(device):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(50, 8, generator=g).to(device)
    src = torch.randn(40, 8, generator=g).to(device)
    bad = torch.randint(0, 50, (40,), generator=g)
    bad[17] = 50
    bad = bad.to(device)
    return {
        "index_add": lambda out: st.index_add_(out, 0, bad, src, level="run_to_run"),
        "index_select": lambda out: st.index_select(x, 0, bad, level="portable"),
        "scatter_add": lambda out: st.scatter_add_(out, 0, bad[:, None].expand(40, 8), src),
    }


@CUDA
@pytest.mark.parametrize("op", ["index_add", "index_select", "scatter_add"])
def test_a_deferred_bad_index_on_cuda_writes_nothing_and_is_raised_once(op):
    samebits.set_cuda_index_checks("deferred")
    out = torch.randn(50, 8, device="cuda")
    before = out.clone()
    try:
        _bad_calls("cuda")[op](out)
    except IndexError:
        pytest.fail("the call waited for its check")
    with pytest.raises(IndexError, match=op):
        samebits.check_index_errors("cuda:0")
    if op != "index_select":  # its output is a new tensor
        assert torch.equal(out, before)
    samebits.check_index_errors(torch.device("cuda"))  # raised once


@CUDA
def test_the_next_checking_call_raises_a_deferred_error():
    samebits.set_cuda_index_checks("deferred")
    out = torch.randn(50, 8, device="cuda")
    _bad_calls("cuda")["index_add"](out)
    torch.cuda.synchronize()
    x = torch.randn(10, 4, device="cuda")
    with pytest.raises(IndexError, match="index_add"):
        st.index_select(x, 0, torch.tensor([1, 2], device="cuda"))
    assert st.index_select(x, 0, torch.tensor([1, 2], device="cuda")).shape == (2, 4)


@CUDA
def test_the_mode_on_cuda_gives_the_bits_of_wait_mode():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(300, 16, generator=g).cuda()
    idx = torch.randint(0, 100, (300,), generator=g).cuda()
    outs = []
    for how in ("wait", "deferred"):
        with st.deterministic("run_to_run", index_checks=how):
            outs.append(torch.zeros(100, 16, device="cuda").index_add_(0, idx, x))
    assert torch.equal(outs[0], outs[1])
