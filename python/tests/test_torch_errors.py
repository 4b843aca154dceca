"""Bad inputs to samebits.torch ops raise the samebits exception for them (a ValueError or an
IndexError) with the C++ message, and leave the output untouched; edge shapes (0-size,
non-contiguous) behave as torch does."""
import pytest
import torch

import samebits
import samebits.torch as st
from conftest import DEVICES, needs_cuda


def test_out_of_range_index_raises_index_error_and_writes_nothing(gen):
    x, src = torch.randn(5, 3, generator=gen), torch.randn(4, 3, generator=gen)
    bad = torch.tensor([0, 1, 5, 2])
    for call in (lambda y: st.index_add_(y, 0, bad, src),
                 lambda y: st.scatter_add_(y, 0, bad[:, None].expand(4, 3), src),
                 lambda y: st.scatter_reduce_(y, 0, bad[:, None].expand(4, 3), src, "amax"),
                 lambda y: st.index_add(y, 0, -bad, src)):
        y = x.clone()
        with pytest.raises(IndexError, match="out of range") as e:
            call(y)
        assert isinstance(e.value, samebits.IndexOutOfRange)
        assert torch.equal(y, x)
    with pytest.raises(IndexError):
        st.index_select(x, 0, bad)
    with pytest.raises(IndexError):
        st.gather(x, 0, bad[:, None].expand(4, 3))
    with pytest.raises(IndexError):
        st.bincount(torch.tensor([1, -1, 2]))
    with pytest.raises(IndexError):
        st.aggregate(x, torch.tensor([0, 2, 3]), torch.tensor([0, 7, 1]), "sum")
    with pytest.raises(IndexError):
        st.segment_csr(x, torch.tensor([0, 4, 2, 5]), "sum")


def test_wrong_dtype_raises_value_error():
    x = torch.randn(5, 3)
    with pytest.raises(ValueError, match="index_add"):
        st.index_add(x, 0, torch.tensor([0.0, 1.0]), torch.randn(2, 3))  # float index
    with pytest.raises(ValueError, match="index_add"):
        st.index_add(x, 0, torch.tensor([0, 1]), torch.randn(2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="not supported"):
        st.cumsum(torch.randn(4, dtype=torch.complex64), 0)
    with pytest.raises(ValueError):
        st.mm(torch.randn(2, 3), torch.randn(3, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="reduce"):
        st.scatter_reduce(x, 0, torch.zeros(2, 3, dtype=torch.int64), torch.randn(2, 3), "max")


def test_wrong_shape_raises_value_error():
    x = torch.randn(5, 3)
    with pytest.raises(ValueError):
        st.index_add(x, 0, torch.tensor([0, 1, 2]), torch.randn(2, 3))
    with pytest.raises(ValueError):
        st.index_add(x, 0, torch.tensor([0, 1]), torch.randn(2, 4))
    with pytest.raises(ValueError):
        st.mm(torch.randn(2, 3), torch.randn(4, 2))
    with pytest.raises(ValueError):
        st.gather(x, 0, torch.zeros(2, 3, 1, dtype=torch.int64))
    with pytest.raises(ValueError, match="at most 4"):
        st.sum(torch.randn(1, 1, 1, 1, 2))
    with pytest.raises(ValueError, match="lengths and offsets"):
        st.segment_reduce(x, "sum")


def test_overlapping_outputs_raise_value_error():
    base = torch.zeros(1, 3)
    expanded = base.expand(4, 3)  # one row seen four times: an output that would race on itself
    with pytest.raises(ValueError, match="reach|overlap|twice"):
        st.index_add_(expanded, 0, torch.tensor([0, 1]), torch.randn(2, 3))
    assert torch.equal(base, torch.zeros(1, 3))
    x = torch.randn(6, 3)
    with pytest.raises(ValueError, match="overlap|share"):
        st.index_add_(x[:4], 0, torch.tensor([0, 1]), x[2:4])  # source inside the output
    with pytest.raises(ValueError, match="overlap|share"):
        st.scatter_add_(x[:3], 0, torch.zeros(2, 3, dtype=torch.int64), x[1:3])
    # Column blocks of one buffer share no element: they are separate tensors.
    st.index_add_(x[:, :1], 0, torch.tensor([0, 1]), x[:2, 1:2])


def test_bad_level_raises_value_error():
    with pytest.raises(ValueError, match="portable"):
        st.sum(torch.randn(3), level="bitwise")


@pytest.mark.parametrize("device", DEVICES)
def test_zero_size_inputs_behave_as_torch(device):
    x = torch.randn(4, 3, device=device)
    empty_idx = torch.zeros(0, dtype=torch.int64, device=device)
    assert torch.equal(st.index_add(x, 0, empty_idx, torch.zeros(0, 3, device=device)), x)
    assert st.index_select(x, 0, empty_idx).shape == (0, 3)
    assert st.sum(torch.zeros(0, device=device)).item() == 0.0
    assert torch.equal(st.mm(torch.randn(2, 0, device=device), torch.randn(0, 3, device=device)),
                       torch.zeros(2, 3, device=device))
    assert st.cumsum(torch.zeros(0, 5, device=device), 1).shape == (0, 5)
    assert torch.equal(st.bincount(empty_idx, minlength=3), torch.zeros(3, dtype=torch.int64,
                                                                       device=device))
    assert st.aggregate(torch.zeros(0, 2, device=device), torch.zeros(1, dtype=torch.int64,
                                                                      device=device),
                        empty_idx, "sum").shape == (0, 2)


@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous_inputs_give_the_contiguous_bits(device, gen):
    x = torch.randn(8, 6, generator=gen).to(device)
    idx = torch.randint(0, 6, (5,), generator=gen).to(device)
    src_t = torch.randn(6, 5, generator=gen).to(device).t()  # [5, 6], transposed
    out_view = torch.zeros(6, 12, device=device)[:, ::2]      # strided output
    st.index_add_(out_view, 0, idx, src_t, level="portable")
    expected = st.index_add(torch.zeros(6, 6, device=device), 0, idx, src_t.contiguous(),
                            level="portable")
    assert samebits.content_hash(out_view) == samebits.content_hash(expected)
    assert samebits.content_hash(st.cumsum(x.t(), 1, level="portable")) == \
        samebits.content_hash(st.cumsum(x.t().contiguous(), 1, level="portable"))
    assert samebits.content_hash(st.mm(x.t(), x, level="portable")) == \
        samebits.content_hash(st.mm(x.t().contiguous(), x, level="portable"))


@needs_cuda
def test_wrong_device_raises_value_error():
    x = torch.randn(5, 3, device="cuda")
    with pytest.raises(ValueError, match="device"):
        st.index_add(x, 0, torch.tensor([0, 1]), torch.randn(2, 3, device="cuda"))
    with pytest.raises(ValueError, match="device"):
        st.mm(x, torch.randn(3, 2))


@needs_cuda
def test_cuda_runs_on_the_current_stream(gen):
    x = torch.randn(1000, 64, generator=gen).cuda()
    idx = torch.randint(0, 1000, (5000,), generator=gen).cuda()
    src = torch.randn(5000, 64, generator=gen).cuda()
    reference = st.index_add(x, 0, idx, src, level="portable")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        outs = [st.index_add(x, 0, idx, src, level="portable") for _ in range(4)]
    torch.cuda.current_stream().wait_stream(stream)
    for out in outs:
        assert torch.equal(out, reference)
