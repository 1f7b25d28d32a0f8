"""bench_train.py's interleaved variant, train_mixed: a feed that hands out
training only's batches and loaderd's in blocks, in turn (MixedFeed), and
the figures of each side from the steps' start times (mixed_figures, which
bench_train_model's epoch loop calls); and the steps lined up with the
daemon's fills (read_fills, fill_overlap: --step-trace and loaderd's
--fill-trace, bench-train.sh FILL_TRACE=1)."""
from __future__ import annotations

import itertools


class MixedFeed:
    """train_mixed: training only's and loaderd's batches in one loop, in
    turn, `block` steps from each (first the preloaded ones, then loaderd's),
    until loaderd's epoch ends. The same model trains on both, in the same
    seconds, so a drift of the host or the GPU over a run (training only moves
    10% between adjacent epochs) lands on both alike. `sources` lists each
    step's feed, for _steps to time each side apart."""

    def __init__(self, loaderd, preloaded, block):
        if block < 1:
            raise ValueError(f"train_mixed: block {block}, want >= 1")
        self.loaderd, self.preloaded, self.block = loaderd, preloaded, block
        self.sources = []

    def __len__(self):
        """loaderd's batches, and a whole block of preloaded ones before each
        of its blocks (the last one may be short)."""
        n = len(self.loaderd)
        return n + self.block * (-(-n // self.block))

    def __iter__(self):
        ld, pre = iter(self.loaderd), _cycle(self.preloaded)
        left = len(self.loaderd)
        while left > 0:
            for name, it in (("train_only", pre), ("loaderd", ld)):
                for _ in range(self.block if name == "train_only" else min(self.block, left)):
                    try:
                        item = next(it)
                    except StopIteration:  # loaderd's epoch ended early, or nothing to cycle
                        return
                    self.sources.append(name)
                    yield item
            left -= self.block

    @property
    def client_times(self):
        """loaderd's feed's client_times (GNNLOADER_BENCH_CLIENT_TIMES)."""
        return getattr(self.loaderd, "client_times", None)

    def close(self):
        try:
            self.loaderd.close()
        finally:
            self.preloaded.close()


def _cycle(feed):
    """feed's batches, over and over."""
    while True:
        n = 0
        for b in feed:
            n += 1
            yield b
        if n == 0:
            return


def timed_steps(steps, sources, block, skip):
    """(i, its feed, its place in its block) of each of the first `steps`
    steps whose time counts: not the first `skip` of its block (the switch
    from the other feed), nor its block's last (the next step is the other
    feed's), nor the run's last (its end is the GPU's drain)."""
    for i, src in enumerate(sources[:steps]):
        k = i % block
        if k < skip or k == block - 1 or i + 1 >= len(sources) or sources[i + 1] != src:
            continue
        yield i, src, k


def mixed_figures(starts, sources, block, skip, cpus=None, ends=None, counters=None):
    """train_mixed's figures: each step's wall time (from its start to the
    next step's) by the feed it came from, leaving out the first `skip` steps
    of every block (the switch from one feed to the other: the GPU's queue of
    the steps before, and loaderd's slots filled while it was idle), each
    block's last (the next step is the other feed's) and the run's last (its
    end is the GPU's drain). ms a batch (median and
    mean) per feed, and loaderd's over training only's; also the means over
    the second half of each block alone (late_ms_mean, ratio_late), which
    shows whether the skip was enough: loaderd's slots refilled while the
    other feed ran, or its fills still running when that feed's turn came,
    would make the early steps differ from the late ones. cpus (the
    trainer's thread's CPU time at each start, as starts) adds each feed's
    CPU ms a step (cpu_ms_mean): the thread's own work, against the wall
    time that also holds its waits (the GPU, the autograd thread; a driver
    that spins while it waits counts as CPU too). ends (each step's end of
    issue) splits each feed's wall time into issuing its steps
    (issue_ms_mean) and the time before the next one (between_ms_mean: the
    feed's own work on the thread, e.g. loaderd's client). block_ratios:
    loaderd's mean over training only's for each block of training only
    and the block of loaderd's after it, in order (how the ratio moves
    over a run: a slow start, a drift, one block off). counters: more
    readings at each start, {name: values as starts}, each feed's mean rise
    a step as NAME_mean (e.g. the process's CPU, the autograd thread's
    included, and its minor page faults)."""
    per, late, cpu, split = {}, {}, {}, {}
    rises = {}  # feed -> counter name -> each step's rise
    pairs = {}  # the index of a block pair -> {feed: [ms sum, steps]}
    for i, src, k in timed_steps(len(starts) - 1, sources, block, skip):
        ms = 1e3 * (starts[i + 1] - starts[i])
        per.setdefault(src, []).append(ms)
        acc = pairs.setdefault(i // (2 * block), {}).setdefault(src, [0.0, 0])
        acc[0] += ms
        acc[1] += 1
        if cpus:
            cpu.setdefault(src, []).append(1e3 * (cpus[i + 1] - cpus[i]))
        for name, v in (counters or {}).items():
            rises.setdefault(src, {}).setdefault(name, []).append(v[i + 1] - v[i])
        if ends:
            sp = split.setdefault(src, [0.0, 0.0])
            sp[0] += 1e3 * (ends[i] - starts[i])
            sp[1] += 1e3 * (starts[i + 1] - ends[i])
        if k >= block // 2:
            late.setdefault(src, []).append(ms)
    out = {"block": block, "skip": skip}
    for src, ms in per.items():
        ms.sort()
        out[src] = {"steps": len(ms), "ms_median": ms[len(ms) // 2], "ms_mean": sum(ms) / len(ms),
                    "ms_p90": ms[(9 * len(ms)) // 10], "ms_p99": ms[(99 * len(ms)) // 100]}
        if cpu.get(src):
            out[src]["cpu_ms_mean"] = sum(cpu[src]) / len(cpu[src])
        if src in split:
            out[src]["issue_ms_mean"], out[src]["between_ms_mean"] = (v / len(ms) for v in split[src])
        for name, v in rises.get(src, {}).items():
            out[src][name + "_mean"] = sum(v) / len(v)
        if late.get(src):  # the second half of each block alone: what the switch could still reach is over
            out[src]["late_ms_mean"] = sum(late[src]) / len(late[src])
    a, b = out.get("loaderd"), out.get("train_only")
    if a and b:
        out["ratio_mean"] = a["ms_mean"] / b["ms_mean"]
        out["ratio_median"] = a["ms_median"] / b["ms_median"]
        if a.get("late_ms_mean") and b.get("late_ms_mean"):
            out["ratio_late"] = a["late_ms_mean"] / b["late_ms_mean"]
        out["block_ratios"] = [(p["loaderd"][0] / p["loaderd"][1]) / (p["train_only"][0] / p["train_only"][1])
                               for _, p in sorted(pairs.items()) if "loaderd" in p and "train_only" in p]
    return out


def read_fills(path):
    """loaderd's --fill-trace file: (start ns, batches, host ns, held) per
    fill, in order (every trainer's: the bench has one); lines that are not
    fills are skipped."""
    fills = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) >= 5 and p[0] == "fill":
                fills.append(tuple(int(v) for v in p[1:5]))
    fills.sort()
    return fills


def fill_waits(starts_ns, gaps_ms, batches, fills, big_ms=1.0):
    """Where a whole-epoch run's GPU waits are (--step-trace's step_gaps_ms
    against loaderd's --fill-trace): the run's fills are the last ones that
    began before its last step and hold its `batches`, the first of them
    an epoch's first (one batch: a run cut short leaves fills read ahead
    that no step took, and those would be counted instead); a gap over big_ms
    before a fill's first batch is the trainer waiting for that fill (its
    batches are ready together, after its whole sweep), split between the
    epoch's ramp (the fills before the first of the widest) and later ones;
    any other is elsewhere (the host, or the client's work). None when the
    fills do not add up to the run's batches from an epoch's first."""
    mine, total = [], 0
    for f in reversed([f for f in fills if f[0] < starts_ns[-1]]):
        mine.append(f)
        total += f[1]
        if total >= batches:
            break
    if total != batches or not mine or mine[-1][1] != 1:
        return None
    mine.reverse()
    firsts = list(itertools.accumulate((f[1] for f in mine[:-1]), initial=0))  # each fill's first batch
    widest = max(f[1] for f in mine)
    ramp_fills = next(k for k, f in enumerate(mine) if f[1] == widest)
    out = {"fills": len(mine), "ramp_fills": ramp_fills, "ramp": [0, 0.0], "fill_start": [0, 0.0], "elsewhere": [0, 0.0]}
    first_set = set(firsts)
    for i, g in enumerate(gaps_ms):
        if g <= big_ms:
            continue
        b = i + 1  # the gap before step i + 1
        key = "elsewhere" if b not in first_set else ("ramp" if b < firsts[ramp_fills] else "fill_start")
        out[key][0] += 1
        out[key][1] += g
    return out


def fill_overlap(starts_ns, sources, block, skip, fills, gpu_ms_a_batch=0.8):
    """Each step (start to the next step's start, on the wall clock) is
    beside a fill when it meets the fill's window: from the fill's start to
    its host time plus gpu_ms_a_batch for each of its batches (the GPU work
    the fill enqueued: about 0.8 ms a batch of sampling, planning and
    assembly with every row cached). Steps left out as in mixed_figures
    (none when sources is None but the first `skip` and the last). Per feed
    ("all" without sources): steps and mean ms beside a fill and clear of
    one."""
    wins = sorted((t, t + host + int(n * gpu_ms_a_batch * 1e6)) for t, n, host, _ in fills)
    longest = max((e - s for s, e in wins), default=0)
    out, j = {}, 0
    n = len(starts_ns) - 1
    if sources is None:  # one feed, one block
        sources, block = ["all"] * n, max(n, 1)
    for i, src, _ in timed_steps(n, sources, block, skip):
        a, b = starts_ns[i], starts_ns[i + 1]
        while j < len(wins) and wins[j][0] < a - longest:  # windows over before this step (steps come in order)
            j += 1
        beside, k = False, j
        while k < len(wins) and wins[k][0] < b:
            if wins[k][1] > a:
                beside = True
                break
            k += 1
        d = out.setdefault(src, {"beside": [], "clear": []})
        d["beside" if beside else "clear"].append((b - a) / 1e6)
    res = {"gpu_ms_a_batch": gpu_ms_a_batch}
    for src, d in out.items():
        res[src] = {k: {"steps": len(v), "ms_mean": sum(v) / len(v) if v else None} for k, v in d.items()}
    return res
