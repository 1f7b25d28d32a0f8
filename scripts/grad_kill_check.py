#!/usr/bin/env python3
"""A rank killed mid-backward, on 2 GPUs (run on the GPU machine against a
loaderd serving any dataset on --socket):

1. job "kill", ranks 0 and 1 on cuda:0 and cuda:1: one all-reduce each
   (checked), then rank 1 queues 3 s of GPU work (torch.cuda._sleep) and
   calls allreduce, so its "ready" event is recorded behind that work, and is
   killed (SIGKILL) once its AllReduce is sent; rank 0 calls allreduce too.
   Rank 0 must get an error, not hang.
2. job "after", two fresh ranks: 5 all-reduces must give the right sums
   within 60 s: loaderd's GPUs still work for everyone else.
Prints PASS or FAIL per part; exit status 0 only when both pass.

Usage: scripts/grad_kill_check.py --socket /tmp/loaderd.sock
"""
import argparse
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def rank_main(a):
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import torch

    from gnnloader import allreduce as ar
    dev = torch.device("cuda", a.rank)
    torch.cuda.set_device(dev)
    c = ar.GradClient(a.socket, a.job, a.rank, 2, 4 << 20, device=f"cuda:{a.rank}", timeout=120)
    for i in range(a.reps):
        x = torch.full((1 << 20,), float(a.rank + 1 + i), device=dev)
        ar.allreduce(x, client=c)
        torch.cuda.synchronize()
        want = float(1 + 2 + 2 * i)
        if not bool((x == want).all()):
            print(f"rank {a.rank}: WRONG sum {x[0].item()} want {want}", flush=True)
            sys.exit(1)
    print(f"rank {a.rank}: {a.reps} all-reduces right", flush=True)
    if a.stall:
        x = torch.ones(1 << 20, device=dev)
        if a.rank == 1:
            torch.cuda._sleep(6_000_000_000)  # about 3 s of one SM spinning, queued before "ready"
            print("rank 1: sleeping kernel queued, calling allreduce", flush=True)
        try:
            ar.allreduce(x, client=c)
            torch.cuda.synchronize()
            print(f"rank {a.rank}: the stalled all-reduce RETURNED", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"rank {a.rank}: the stalled all-reduce failed: {type(e).__name__}: {e}", flush=True)
    c.close()
    print(f"rank {a.rank}: closed", flush=True)


def spawn(a, rank, job, reps, stall):
    return subprocess.Popen([sys.executable, __file__, "--socket", a.socket, "--role", "rank", "--rank", str(rank),
                             "--job", job, "--reps", str(reps)] + (["--stall"] if stall else []),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_line(p, text, timeout):
    end = time.time() + timeout
    lines = []
    os.set_blocking(p.stdout.fileno(), False)
    while time.time() < end:
        line = p.stdout.readline()
        if line:
            lines.append(line.rstrip())
            if text in line:
                return True, lines
        elif p.poll() is not None:
            break
        else:
            time.sleep(0.01)
    return False, lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--role", default="parent")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--job", default="kill")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--stall", action="store_true")
    a = ap.parse_args()
    if a.role == "rank":
        return rank_main(a)
    ok = True
    r0, r1 = spawn(a, 0, "kill", 1, True), spawn(a, 1, "kill", 1, True)
    sent, lines1 = wait_line(r1, "calling allreduce", 90)
    print("\n".join("  " + l for l in lines1), flush=True)
    if not sent:
        print("1. FAIL: rank 1 never reached the stalled all-reduce", flush=True)
        ok = False
    time.sleep(0.5)  # its AllReduce is on the socket; its ready event is behind the sleeping kernel
    r1.send_signal(signal.SIGKILL)
    r1.wait()
    t0 = time.time()
    done0, lines0 = wait_line(r0, "closed", 60)
    print("\n".join("  " + l for l in lines0), flush=True)
    failed = any("stalled all-reduce failed" in l for l in lines0)
    print(f"1. {'PASS' if done0 and failed else 'FAIL'}: rank 0 after rank 1's SIGKILL: "
          f"{'an error' if failed else 'no error'} {time.time() - t0:.1f} s after the kill", flush=True)
    ok = ok and done0 and failed
    if r0.poll() is None:
        r0.kill()
    t0 = time.time()
    q0, q1 = spawn(a, 0, "after", 5, False), spawn(a, 1, "after", 5, False)
    d0, l0 = wait_line(q0, "closed", 60)
    d1, l1 = wait_line(q1, "closed", max(1, 60 - (time.time() - t0)))
    print("\n".join("  " + l for l in l0 + l1), flush=True)
    good = d0 and d1 and any("right" in l for l in l0) and any("right" in l for l in l1)
    print(f"2. {'PASS' if good else 'FAIL'}: a new job's 5 all-reduces on both GPUs, {time.time() - t0:.1f} s", flush=True)
    for p in (q0, q1):
        if p.poll() is None:
            p.kill()
    sys.exit(0 if ok and good else 1)


if __name__ == "__main__":
    main()
