"""The Python client's per-batch host costs on a CUDA device, each timed over
many calls (an experiment aid, run by hand on a GPU machine):
a zero-copy view through __cuda_array_interface__ (what CudaSlots.view did
for every region of every batch) against a slice of a tensor made once per
slot, and the device context and current-stream lookups around each wait.

    python3 scripts/probes/client_views.py
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from gnnloader.cuda import _CudaArray  # noqa: E402


def per_call_us(fn, n=20000):
    for _ in range(200):
        fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return 1e6 * (time.perf_counter() - t) / n


def main():
    dev = torch.device("cuda", 0)
    buf = torch.empty(64 << 20, dtype=torch.uint8, device=dev)
    ptr = buf.data_ptr()
    base = torch.as_tensor(_CudaArray(ptr, (64 << 20,), "|u1"), device=dev)
    rows = {
        "as_tensor(__cuda_array_interface__), float32 [N]": lambda: torch.as_tensor(_CudaArray(ptr + 4096, (100000,), "<i4"), device=dev).view(torch.float32),
        "slot tensor .narrow().view(float32)": lambda: base.narrow(0, 4096, 400000).view(torch.float32),
        "torch.empty(0, dtype).element_size()": lambda: torch.empty(0, dtype=torch.float32).element_size(),
        "with torch.cuda.device(dev)": lambda: torch.cuda.device(dev).__enter__() and None,
        "torch.cuda.current_stream(dev).cuda_stream": lambda: torch.cuda.current_stream(dev).cuda_stream,
        "torch.cuda.current_device()": torch.cuda.current_device,
    }

    def ctx():
        with torch.cuda.device(dev):
            pass
    rows["with torch.cuda.device(dev): pass"] = ctx
    del rows["with torch.cuda.device(dev)"]
    for name, fn in rows.items():
        print(f"{per_call_us(fn):8.2f} us  {name}")


if __name__ == "__main__":
    main()
