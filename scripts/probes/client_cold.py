"""What building a batch costs the thread when the caches are cold, as they
are after a training step (an experiment aid; session 20). A Loader over
SOCKET takes one batch; then Loader._build of that batch is timed alone in
a loop (warm), and after each of: a 16 MB sweep over memory, a small torch
forward and backward (20 layers), a 1 ms sleep.

    python3 scripts/probes/client_cold.py SOCKET [DEVICE [PYTHON_DIR]]

On the 2-core development machine (CPU slots, torch 1.13), two runs: 11-26
us warm, 21-50 after the sweep, 116-129 after the forward and backward,
36-40 after the sleep. On an H200 machine's host (16 cores, torch 2.11): 24
warm, 64 after the forward and backward, 43 after the sleep (CUDA slots).
"""
import sys
import time

sys.path.insert(0, sys.argv[3] if len(sys.argv) > 3 else "python")
import torch  # noqa: E402
from client_ops import first_batch  # noqa: E402 (this directory)


def main():
    ld, it, m = first_batch(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "cpu")
    big = torch.randn(4_000_000)
    net = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(20)])
    inp = torch.randn(64, 256)

    def step():
        net(inp).sum().backward()
    for label, before in [("warm", None), ("after a 16 MB sweep", lambda: big.mul_(1.0001)),
                          ("after a torch forward and backward", step), ("after a 1 ms sleep", lambda: time.sleep(0.001))]:
        total, n = 0.0, 300
        for _ in range(n):
            if before is not None:
                before()
            t = time.perf_counter()
            ld._build(m)
            total += time.perf_counter() - t
        print(f"{label:36s} _build {1e6 * total / n:7.1f} us", flush=True)
    it.close()
    ld.close()


if __name__ == "__main__":
    main()
