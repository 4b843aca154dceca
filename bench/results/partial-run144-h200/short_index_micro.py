# Device time of the mode's index_add_ on Cora-sized shapes with a fresh index tensor each call.
import sys, torch
import samebits.torch as st
from torch.profiler import profile, ProfilerActivity
dev = "cuda"
E, N = 13264, 2708
g = torch.Generator().manual_seed(0)
# Cora-like: one hub with 169 sources, the rest uniform
idx_host = torch.randint(0, N, (E,), generator=g)
idx_host[:169] = 7
for F in (64, 16, 7, 4, 1):
    x = torch.randn(E, F, device=dev)
    st.enable("run_to_run")
    for _ in range(3):
        torch.zeros(N, F, device=dev).index_add_(0, idx_host.to(dev), x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            torch.zeros(N, F, device=dev).index_add_(0, idx_host.to(dev), x)
        torch.cuda.synchronize()
    st.disable()
    print(f"== F={F}: 20 calls, fresh index each")
    for ev in sorted(prof.key_averages(), key=lambda e: -e.device_time_total)[:5]:
        print(f"  {ev.key[:90]:<90} calls {ev.count:4d}  avg {ev.device_time_total / ev.count:8.2f} us")
    # the default, for comparison
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            torch.zeros(N, F, device=dev).index_add_(0, idx_host.to(dev), x)
        torch.cuda.synchronize()
    for ev in sorted(prof.key_averages(), key=lambda e: -e.device_time_total)[:2]:
        print(f"  torch {ev.key[:84]:<84} calls {ev.count:4d}  avg {ev.device_time_total / ev.count:8.2f} us")
