"""bench_train.py's GPU clock sampler: nvidia-smi's SM and memory clocks,
power, temperature and clock event reasons while a variant runs."""
from __future__ import annotations

import functools
import subprocess


class ClockSampler:
    """The GPU's SM and memory clocks, power and temperature, sampled by one
    `nvidia-smi -lms` process while a variant runs, with the clock event
    (throttle) reasons seen: two runs of the same steps that differ by 10% or
    more should say whether the GPU ran slower. Nothing (an empty summary)
    where there is no nvidia-smi or no CUDA device."""

    FIELDS = ("clocks.sm", "clocks.mem", "power.draw", "temperature.gpu", "clocks_event_reasons.active")

    def __init__(self, dev, period_ms=100):
        self.proc = None
        if dev.type != "cuda":
            return
        fields = _clock_fields(dev.index or 0)
        if fields is None:
            return
        cmd = ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits",
               "-i", str(dev.index or 0), "-lms", str(period_ms)]
        try:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            self.proc = None

    def stop(self):
        """Stops sampling; returns the summary (see summarize)."""
        if self.proc is None:
            return {}
        self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return summarize_clocks(out)


@functools.lru_cache(maxsize=None)
def _clock_fields(index):
    """ClockSampler.FIELDS as this driver names them (drivers before 535 call
    the reasons clocks_throttle_reasons), asked once a process; None without
    nvidia-smi."""
    fields = list(ClockSampler.FIELDS)
    try:
        probe = subprocess.run(["nvidia-smi", f"--query-gpu={fields[-1]}", "--format=csv,noheader", "-i", str(index)],
                               capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if probe.returncode != 0:
        fields[-1] = "clocks_throttle_reasons.active"
    return tuple(fields)


def summarize_clocks(text):
    """nvidia-smi's CSV lines (ClockSampler.FIELDS) as the mean and least SM
    clock, the mean memory clock and power, the hottest temperature, the
    samples, and every clock event reason mask seen other than none (0x0) and
    idle (0x1). Lines that do not parse (a header, a field the driver lacks:
    "[N/A]") are skipped."""
    sm, mem, pw, temp, reasons = [], [], [], [], set()
    for line in text.splitlines():
        f = [x.strip() for x in line.split(",")]
        if len(f) != len(ClockSampler.FIELDS):
            continue
        try:
            s, m, p, t = float(f[0]), float(f[1]), float(f[2]), float(f[3])
        except ValueError:
            continue
        sm.append(s), mem.append(m), pw.append(p), temp.append(t)
        try:
            mask = int(f[4], 16)
        except ValueError:
            continue
        if mask not in (0, 1):
            reasons.add(f"{mask:#x}")
    if not sm:
        return {}
    return {"samples": len(sm), "sm_mhz_mean": sum(sm) / len(sm), "sm_mhz_min": min(sm),
            "mem_mhz_mean": sum(mem) / len(mem), "power_w_mean": sum(pw) / len(pw), "temp_c_max": max(temp),
            "event_reasons": sorted(reasons)}
