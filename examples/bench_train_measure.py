"""bench_train.py's measurement helpers: the daemon's counters and memory,
GPU memory, cudaHostRegister through torch's libcudart, per-step timers, and
the pinned H2D memcpy bandwidth (the PCIe bound)."""
from __future__ import annotations

import os
import resource
import re
import subprocess
import sys
import time
import urllib.request

import torch


# -- measurement helpers -------------------------------------------------------

def scrape(url):
    """The daemon's counters (Prometheus text) as {name: value}."""
    if not url:
        return {}
    try:
        text = urllib.request.urlopen(url, timeout=5).read().decode()
    except Exception as e:  # noqa: BLE001
        print(f"metrics: {e}", file=sys.stderr)
        return {}
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)$", line)
        if m and (m.group(2) is None or m.group(1).startswith(("gnnloader_batches_served_total", "gnnloader_gpu_"))):
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
            ph = re.search(r'phase="(\w+)"', m.group(2) or "")
            if ph:  # gnnloader_gpu_fill_seconds_total by phase (--gpu-timing)
                k = m.group(1) + ":" + ph.group(1)
                out[k] = out.get(k, 0.0) + float(m.group(3))
    return out


def daemon_stage_ms(before, after):
    """Per-batch daemon stage times between two scrapes."""
    def d(k):
        return after.get(k, 0.0) - before.get(k, 0.0)
    n = max(d("gnnloader_sample_seconds_count"), 1)
    g = max(d("gnnloader_gather_seconds_count"), 1)
    return {"sample_ms": 1e3 * d("gnnloader_sample_seconds_sum") / n,
            "gather_fill_ms": 1e3 * d("gnnloader_gather_seconds_sum") / g,
            "slot_wait_ms": 1e3 * d("gnnloader_slot_wait_seconds_sum") / g,
            "release_wait_ms": 1e3 * d("gnnloader_release_wait_seconds_sum") / g,
            "gather_bytes": d("gnnloader_gather_bytes_total"),
            "swept_batches": d("gnnloader_swept_batches_total"), "fills": d("gnnloader_fills_total"), "filled_batches": d("gnnloader_gather_seconds_count"),
            "rows_looked_up": d("gnnloader_gpu_rows_looked_up_total"),
            "cache_hit_bytes": d("gnnloader_gpu_cache_hit_bytes_total"),
            "pcie_read_bytes": d("gnnloader_gpu_pcie_read_bytes_total"),
            # the daemon process's CPU a batch and its collections (the Go
            # collector's and the process collector's series)
            "cpu_ms": 1e3 * d("process_cpu_seconds_total") / g,
            "gc_cycles": d("go_gc_duration_seconds_count"),
            # GPU ms a batch of each fill phase (zeros unless loaderd runs with --gpu-timing)
            "gpu_fill_ms": {ph: round(1e3 * d("gnnloader_gpu_fill_seconds_total:" + ph) / g, 3)
                            for ph in ("plan", "read", "assemble", "sample", "sample_wait", "host_wait")}}


def proc_mem(pid):
    """VmRSS, VmHWM, RssAnon, RssShmem, VmPin of a process (bytes)."""
    out = {}
    if not pid:
        return out
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem", "VmPin", "VmLck"):
                    out[k] = int(v.split()[0]) * 1024
    except OSError:
        pass
    return out


def host_cpu():
    """The host's CPU jiffies from /proc/stat's "cpu" line: (busy, steal,
    total), or None where there is no /proc/stat."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal [guest guest_nice]:
    # guest time is counted in user already.
    v += [0] * (8 - len(v))
    total = sum(v[:8])
    return total - v[3] - v[4] - v[7], v[7], total


def host_cpu_share(before, after):
    """What the host's CPUs did between two host_cpu() readings: busy and
    steal (time the hypervisor gave this VM's CPUs to others; a launch-bound
    training step slows with it) as shares of all CPU time."""
    if not before or not after or after[2] <= before[2]:
        return {}
    d = after[2] - before[2]
    return {"busy": (after[0] - before[0]) / d, "steal": (after[1] - before[1]) / d}


def gpu_apps():
    """Per-process GPU memory from nvidia-smi (MiB), {pid: MiB}."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=20)
        return {int(a): int(b) for a, b in (l.split(",") for l in r.stdout.strip().splitlines() if "," in l)}
    except Exception:  # noqa: BLE001
        return {}


def gpu_free(dev):
    if dev.type != "cuda":
        return 0
    torch.cuda.synchronize(dev)
    return torch.cuda.mem_get_info(dev)[0]


_CUDART = None


def _cudart():
    """The CUDA runtime library torch has loaded (ctypes), or None."""
    global _CUDART
    if _CUDART is None:
        import ctypes
        paths = []
        try:
            with open("/proc/self/maps") as f:
                paths = sorted({ln.split()[-1] for ln in f if "libcudart.so" in ln})
        except OSError:
            pass
        for path in paths:
            try:
                lib = ctypes.CDLL(path)
                lib.cudaHostRegister.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
                lib.cudaHostUnregister.argtypes = [ctypes.c_void_p]
                _CUDART = lib
                break
            except (OSError, AttributeError):
                continue
        if _CUDART is None:
            _CUDART = False
    return _CUDART or None


def host_register(ptr, nbytes, read_only=False):
    """cudaHostRegister (ctypes on torch's libcudart); True when it worked.
    A failure's error is cleared (cudaGetLastError) so torch's next launch
    check does not see it."""
    lib = _cudart()
    if lib is None:
        print("cudaHostRegister: no libcudart mapped", file=sys.stderr)
        return False
    flags = 0x08 if read_only else 0  # cudaHostRegisterReadOnly
    rc = lib.cudaHostRegister(ptr, nbytes, flags)
    if rc != 0:
        lib.cudaGetLastError()
        print(f"cudaHostRegister({nbytes} bytes, flags {flags}) failed: error {rc}", file=sys.stderr)
        return False
    return True


def host_unregister(ptr):
    lib = _cudart()
    if lib is not None and lib.cudaHostUnregister(ptr) != 0:
        lib.cudaGetLastError()


class Timer:
    """Per-step CUDA-event (or wall, on the CPU) time of the training step."""

    def __init__(self, dev):
        self.cuda = dev.type == "cuda"
        self.pairs, self.cpu = [], []

    def start(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def stop(self, s):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            self.pairs.append((s, e))
        else:
            self.cpu.append(1e3 * (time.perf_counter() - s))

    def ms(self):
        if self.cuda:
            torch.cuda.synchronize()
            return [a.elapsed_time(b) for a, b in self.pairs]
        return self.cpu

    def gaps(self):
        """GPU time from each step's end to the next one's start (CUDA
        only; after ms()): what the stream did between steps (the feed's
        waits, e.g. for a slot's ready word) or idled waiting for the host."""
        if not self.cuda:
            return []
        return [b.elapsed_time(c) for (_, b), (c, _) in zip(self.pairs, self.pairs[1:])]


def gap_figures(gaps, big_ms=1.0):
    """Summary of Timer.gaps: ms a batch, median, the largest, and the gaps
    over big_ms (how many, their share of the total, the first indices)."""
    if not gaps:
        return {}
    s = sorted(gaps)
    big = [(i + 1, g) for i, g in enumerate(gaps) if g > big_ms]
    total = sum(gaps)
    return {"gap_ms": total / len(gaps), "gap_median_ms": s[len(s) // 2], "gap_max_ms": s[-1],
            "gaps_big": len(big), "gaps_big_share": sum(g for _, g in big) / total if total > 0 else 0.0,
            "gaps_big_at": [i for i, _ in big[:12]]}


def thread_switches():
    """The calling thread's voluntary and involuntary context switches so far
    (getrusage RUSAGE_THREAD; zeros where the platform lacks it)."""
    try:
        ru = resource.getrusage(resource.RUSAGE_THREAD)
    except (AttributeError, OSError, ValueError):
        return {"voluntary": 0, "involuntary": 0}
    return {"voluntary": ru.ru_nvcsw, "involuntary": ru.ru_nivcsw}


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def pcie_bound(dev, nbytes=1 << 30, reps=10):
    """Pinned H2D memcpy bandwidth (GB/s): the best of reps copies of 1 GiB,
    so a copy slowed by the rest of the machine does not lower the bound (the
    median of 5 once read 51.7 GB/s on an H100 that gave 55.0 minutes before)."""
    if dev.type != "cuda":
        return None
    h = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    d = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    d.copy_(h, non_blocking=True)
    torch.cuda.synchronize()
    best = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        d.copy_(h, non_blocking=True)
        b.record()
        b.synchronize()
        best.append(nbytes / (a.elapsed_time(b) / 1e3) / 1e9)
    del h, d
    return max(best)


class ProfileWindow:
    """GNNLOADER_BENCH_PROFILE=START:COUNT:DIR profiles the GPU kernels of
    steps START .. START+COUNT of each variant's epoch (torch.profiler) and
    writes the kernels with their GPU time, ordered by it, to DIR/NAME.txt:
    which of a step's kernels slow down beside loaderd (an experiment aid;
    the profiler's own overhead makes these steps no timing figure)."""

    def __init__(self, name):
        self.prof = None
        self.start = self.count = 0
        spec = os.environ.get("GNNLOADER_BENCH_PROFILE", "")
        if not spec:
            return
        start, count, self.dir = spec.split(":", 2)
        self.start, self.count, self.name = int(start), int(count), name

    def before(self, step):
        if self.count and step == self.start:
            self.steps = 0
            from torch.profiler import ProfilerActivity, profile
            self.cuda = torch.cuda.is_available()  # on a CPU build: the CPU ops, to try the window out
            # The host side too: which runtime calls (launches, allocations,
            # waits) the trainer's thread spends its time in.
            self.prof = profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU] if self.cuda else [ProfilerActivity.CPU])
            self.prof.__enter__()

    def after(self, step):
        if self.prof is None:
            return
        self.steps += 1
        if step + 1 == self.start + self.count:
            self.finish()

    def finish(self):
        if self.prof is None:
            return
        if self.cuda:
            torch.cuda.synchronize()
        prof, self.prof = self.prof, None
        prof.__exit__(None, None, None)
        rows, host = [], []
        for e in prof.key_averages():
            # The GPU table: kernels and copies only. With the host side
            # profiled too, an op (aten::mm) also carries its kernels' time.
            if self.cuda and str(getattr(e, "device_type", "")).endswith("CUDA"):
                t = getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)
                if t > 0:
                    rows.append((t, e.count, e.key))
            if e.self_cpu_time_total > 0:
                host.append((e.self_cpu_time_total, e.count, e.key))
        if not self.cuda:
            rows, host = host, []
        steps = max(self.steps, 1)  # fewer than COUNT where the epoch ended first
        os.makedirs(self.dir, exist_ok=True)
        # '@' (train_only@2) is a character some file transfers refuse.
        with open(os.path.join(self.dir, self.name.replace("@", "-") + ".txt"), "w") as f:
            for what, rs, n_rows in [("GPU" if self.cuda else "CPU", rows, 40), ("host (the ops' own CPU time)", host, 25)]:
                if not rs:
                    continue
                rs.sort(reverse=True)
                total = sum(t for t, _, _ in rs)
                f.write(f"{self.name}: {steps} steps from step {self.start}; {what} time {total / 1e3 / steps:.3f} ms a step\n")
                for t, n, key in rs[:n_rows]:
                    f.write(f"{t / 1e3 / steps:8.3f} ms/step {n // steps:4d}x  {key[:110]}\n")
