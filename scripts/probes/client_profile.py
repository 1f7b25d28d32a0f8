"""Host time of the Python client a batch (run by client_profile.sh): a CUDA
Loader with 64 slots over SOCKET, epochs iterated without touching the
batches, timed, then one epoch under cProfile.

    python3 scripts/probes/client_profile.py SOCKET PYTHON_DIR
"""
import cProfile
import gc
import pstats
import sys
import time

sys.path.insert(0, sys.argv[2])
import gnnloader  # noqa: E402
import torch  # noqa: E402


def epoch(ld):
    """The batches of one epoch, taken and released, touching nothing (no
    synchronize here: the driver spins there, on the thread's CPU time)."""
    n = 0
    for _ in ld:
        n += 1
    return n


def main():
    ld = gnnloader.Loader(sys.argv[1], split="train", batch_size=1024, fanouts=[15, 10, 5], slots=64,
                          device="cuda:0", pyg=False)
    epoch(ld)
    for label in ("gc on", "gc off"):
        if label == "gc off":
            gc.disable()
        t, c = time.perf_counter(), time.thread_time()
        n = epoch(ld)
        wall, cpu = time.perf_counter() - t, time.thread_time() - c
        torch.cuda.synchronize()
        print(f"{label}: {n} batches, {1e3 * wall / n:.3f} ms a batch wall, "
              f"{1e3 * cpu / n:.3f} ms of the thread's CPU")
        gc.enable()
    pr = cProfile.Profile()
    pr.enable()
    epoch(ld)
    pr.disable()
    torch.cuda.synchronize()
    pstats.Stats(pr).sort_stats("tottime").print_stats(25)
    ld.close()


if __name__ == "__main__":
    main()
