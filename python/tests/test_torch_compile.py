"""torch.compile(fullgraph=True) traces samebits.torch ops (through their fake kernels) with no
graph break, forward and backward, and the compiled model gives the eager model's bits. The
aot_eager backend runs the same tracing (dynamo, fake kernels, AOT autograd) as inductor without
generating code, which on CI's two cores takes minutes."""
import pytest
import torch

import samebits
import samebits.torch as st
from conftest import DEVICES


class TinyGNN(torch.nn.Module):
    """A mean-aggregating graph layer, a linear layer and a scatter readout: samebits ops only
    where torch would accumulate."""

    def __init__(self, f_in, f_out, gen):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(f_in, f_out, generator=gen) * 0.3)
        self.bias = torch.nn.Parameter(torch.randn(f_out, generator=gen) * 0.1)

    def forward(self, x, rowptr, col, batch, num_graphs: int):
        h = st.aggregate(x, rowptr, col, "mean")
        h = torch.relu(st.addmm(self.bias, h, self.weight))
        h = st.cumsum(h, 1)
        pooled = st.index_add(h.new_zeros(num_graphs, h.shape[1]), 0, batch, h)
        return st.sum(pooled * pooled)


def _graph(gen, n=12, f=5):
    deg = torch.randint(0, 4, (n,), generator=gen)
    rowptr = torch.cat([torch.zeros(1, dtype=torch.int64), deg.cumsum(0)])
    col = torch.randint(0, n, (int(rowptr[-1]),), generator=gen)
    x = torch.randn(n, f, generator=gen)
    batch = torch.randint(0, 3, (n,), generator=gen)
    return x, rowptr, col, batch


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_forward_backward_same_bits(device, gen):
    x, rowptr, col, batch = (t.to(device) for t in _graph(gen))
    model = TinyGNN(5, 4, gen).to(device)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")

    def run(m):
        m.zero_grad()
        loss = m(x, rowptr, col, batch, 3)
        loss.backward()
        return loss.detach(), model.weight.grad.clone(), model.bias.grad.clone()

    eager = run(model)
    got = run(compiled)
    for a, b in zip(eager, got):
        assert samebits.content_hash(a) == samebits.content_hash(b)
