"""Where the client's work a batch lands with and without
Loader(receive_thread=True), on the CPU (an experiment aid, run by hand
against a running loaderd): each step holds the GIL for FORWARD ms of
Python work, then waits BACKWARD ms with the GIL released (as a CUDA
trainer's thread waits for autograd's backward), then holds it OPT ms
more. Prints, a batch, the time the loop spends taking the next batch
(what the client costs the training thread) and the thread's CPU.

    python3 scripts/probes/receive_thread_cpu.py SOCKET [FORWARD BACKWARD OPT]
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gnnloader  # noqa: E402


def busy(ms):
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


def run(sock, rt, fwd, bwd, opt, epochs=3):
    with gnnloader.Loader(sock, split="train", batch_size=64, fanouts=[15, 10, 5], slots=16, pyg=False,
                          receive_thread=rt) as ld:
        for _ in ld:  # warm: every slot's views made
            pass
        take = cpu = 0.0
        n = 0
        for _ in range(epochs):
            it = iter(ld)
            while True:
                t, c = time.perf_counter(), time.thread_time()
                try:
                    b = next(it)
                except StopIteration:
                    break
                take += time.perf_counter() - t
                cpu += time.thread_time() - c
                n += 1
                busy(fwd)
                time.sleep(bwd / 1e3)
                busy(opt)
                del b
        return 1e3 * take / n, 1e3 * cpu / n, n


def main():
    sock = sys.argv[1]
    fwd, bwd, opt = (float(a) for a in (sys.argv[2:5] if len(sys.argv) > 4 else (1.5, 1.5, 0.5)))
    for rt in (False, True, False, True):
        take, cpu, n = run(sock, rt, fwd, bwd, opt)
        print(f"receive_thread={rt!s:5}: {n} batches, taking a batch {take:.3f} ms ({cpu:.3f} ms of the thread's CPU)")


if __name__ == "__main__":
    main()
