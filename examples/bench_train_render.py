"""bench_train.py --render: the issue-6 table (markdown) from the JSON files
bench_train.py writes (scripts/bench-train.sh prints it at the end)."""
from __future__ import annotations

import json
import os
import statistics

from bench_train_mixed import fill_overlap, fill_waits, read_fills

# A zero-copy read's ceiling as a share of the pinned memcpy rate, measured
# by scripts/probes/zcread.cu on H100s (docs/benchmarks.md, "What bounds a
# zero-copy read": 51.0 of 55.0 GB/s).
ZERO_COPY_CEILING = 0.927



def median(xs):
    """The median of a non-empty list (the mean of the middle two for an even count)."""
    ps = sorted(xs)
    h = len(ps) // 2
    return ps[h] if len(ps) % 2 else (ps[h - 1] + ps[h]) / 2

def variant_kind(name):
    """The variant a run name measures: "train_only@2" (a second run of
    train_only, e.g. after loaderd, to see the baseline drift) is
    train_only; a phase label ("cache:loader") is kept."""
    return name.split("@", 1)[0]


def run_index(name):
    """K of a run named NAME@K (1 for NAME alone)."""
    _, _, k = name.partition("@")
    return int(k) if k.isdigit() else 1


def render(paths):
    """The issue-6 table (markdown) from bench JSON files and meta.json."""
    runs, meta, source = {}, {}, {}
    for path in paths:
        try:
            with open(path) as f:
                d = json.load(f)
        except (OSError, ValueError) as e:
            print(f"<!-- {path}: {e} -->")
            continue
        if "meta" in d:
            meta = d["meta"]
            continue
        runs.update(d.get("variants", {}))
        source.update((n, path) for n in d.get("variants", {}))
        for k in ("dataset", "row_bytes", "gpu", "table"):
            if k in d and k not in meta:
                meta[k] = d[k]
    f1 = lambda v, n=1: "-" if v is None else f"{v:.{n}f}"  # noqa: E731
    gb = lambda b: "-" if b is None else f"{b / 1e9:.2f} GB"  # noqa: E731
    ds = meta.get("dataset", {})
    print(f"dataset: {ds.get('num_nodes')} nodes, {ds.get('num_edges')} stored edges, "
          f"{ds.get('batches')} train batches of 1024; build {f1(meta.get('build_s'))} s; "
          f"GPU {meta.get('gpu', '-')}")
    pc = runs.get("pcie", {}).get("GBps")
    rb = meta.get("row_bytes", 512)
    print()
    print("| run | epoch s | batches | batches/s | ms/batch | sample ms | gather ms | train ms | overlap | "
          "feature GB/s | valid acc |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in runs.items():
        if name == "pcie" or "batches" not in r:
            if "error" in r or "skipped" in r:
                print(f"| {name} | {r.get('error') or r.get('skipped')} |||||||||| ")
            continue
        d = r.get("daemon", {})
        samp = d.get("sample_ms")
        kind = variant_kind(name)
        if kind.endswith("cpu"):
            gat = r.get("cpu_gather_ms")
        elif kind.endswith(("resident", "train_only", "train_fresh", "train_slots", "train_busy", "train_paced",
                            "train_spin")):
            gat = None
        else:
            gat = d.get("gather_fill_ms")
        train = None if kind.endswith("loader") else r.get("step_ms")
        stages = [v for v in (samp, gat, train) if v]
        ov = (sum(stages) - r["ms_per_batch"]) / sum(stages) if stages else None
        part = " (partial)" if r.get("partial") or r["batches"] < ds.get("batches", 0) else ""
        # Two decimals for the epoch and a batch: runs 0.05 s or 0.05 ms apart
        # must not print alike.
        print(f"| {name}{part} | {f1(r['wall_s'], 2)} | {r['batches']} | {f1(r['batches_per_s'])} | {f1(r['ms_per_batch'], 2)} | "
              f"{f1(samp)} | {f1(gat)} | {f1(train)} | {'-' if ov is None else f'{100 * ov:.0f}%'} | "
              f"{f1(r.get('feature_GBps'))} | {f1(r.get('valid_acc', None) and 100 * r['valid_acc'])} |")
    lo, ld, res, cpu, tro = (runs.get(k, {}) for k in ("loader", "loaderd", "resident", "cpu", "train_only"))
    print()
    if pc and lo.get("batches"):
        byts = lo["nodes_per_batch"] * rb * lo["batches"]
        bound = byts / (pc * 1e9)
        print(f"- PCIe bound: {byts / 1e9:.1f} GB of feature rows in {lo['batches']} batches / {pc:.1f} GB/s pinned "
              f"memcpy = {bound:.2f} s; loader only {lo['wall_s']:.2f} s = {100 * bound / lo['wall_s']:.1f}% of the bound "
              f"(target 90%)")
    if ld.get("wall_s") and res.get("wall_s"):
        print(f"- loaderd epoch / resident epoch = {ld['wall_s'] / res['wall_s']:.2f} (target <= 1.05)")
    if ld.get("wall_s") and tro.get("wall_s"):
        print(f"- loaderd epoch / training-only epoch = {ld['wall_s'] / tro['wall_s']:.2f} (target <= 1.10); "
              f"training only {tro['ms_per_batch']:.2f} ms a batch ({tro['step_ms']:.2f} ms of GPU time a step)")
        read = (lo.get("daemon") or {}).get("pcie_read_bytes", 0)
        if pc and read and lo.get("batches") and not lo["daemon"].get("cache_hit_bytes"):
            # The floor of that ratio without a cache: the bytes the sweeps
            # read a batch, at the memcpy rate and at a zero-copy read's
            # measured ceiling (ZERO_COPY_CEILING of it), against a step.
            ms = read / lo["batches"] / (pc * 1e9) * 1e3
            print(f"  - its floor without a GPU cache: the sweeps read {read / lo['batches'] / 1e6:.1f} MB a batch, "
                  f"{ms:.2f} ms at the memcpy rate, {ms / ZERO_COPY_CEILING:.2f} ms at a zero-copy read's ceiling: "
                  f"{max(1, ms / ZERO_COPY_CEILING / tro['ms_per_batch']):.2f}x training only, with nothing slowing the read")
    trf = runs.get("train_fresh", {})
    if ld.get("wall_s") and trf.get("wall_s"):
        # Against the same steps on another epoch's batches, each once: the
        # shapes new at an epoch's rate, as loaderd's (train_only's 32 cycled
        # batches repeat theirs, and a step on a new shape costs more).
        print(f"- loaderd epoch / training-only epoch on another epoch's batches (train_fresh) = "
              f"{ld['wall_s'] / trf['wall_s']:.2f} (target <= 1.10); training only {trf['ms_per_batch']:.2f} ms a batch"
              + (f", {trf['fresh_batches_stored']} batches stored for its {trf['batches']} steps"
                 if trf.get("fresh_batches_stored") is not None else ""))
    # Repeated runs (name@k): each loaderd@k against train_only@k when both
    # ran, and the baseline's spread, so a machine whose steps drift during
    # the run shows it next to the ratio.
    reps = sorted({n.split("@", 1)[1] for n in runs if "@" in n and ":" not in n})
    pairs = [ld["wall_s"] / tro["wall_s"]] if ld.get("wall_s") and tro.get("wall_s") else []
    for k in reps:
        a, b = runs.get(f"loaderd@{k}", {}), runs.get(f"train_only@{k}", {})
        which = f"loaderd@{k}"
        if not a.get("wall_s"):  # the baseline alone again: against the one loaderd run
            a, which = ld, "loaderd"
        if a.get("wall_s") and b.get("wall_s"):
            print(f"  - {which} {a['ms_per_batch']:.2f} / train_only@{k} {b['ms_per_batch']:.2f} ms a batch "
                  f"= {a['wall_s'] / b['wall_s']:.2f}")
            if which != "loaderd":
                pairs.append(a["wall_s"] / b["wall_s"])
    if len(pairs) > 1:  # each loaderd run against the baseline run just before it
        print(f"  - over {len(pairs)} paired runs: median {median(pairs):.2f} (target <= 1.10), "
              f"{min(pairs):.2f}-{max(pairs):.2f}")
    tros = [r["ms_per_batch"] for n, r in runs.items() if ":" not in n and variant_kind(n) == "train_only" and r.get("ms_per_batch")]
    if len(tros) > 1:
        lds = [r["ms_per_batch"] for n, r in runs.items() if ":" not in n and variant_kind(n) == "loaderd" and r.get("ms_per_batch")]
        line = (f"  - training only over {len(tros)} runs: {min(tros):.2f}-{max(tros):.2f} ms a batch "
                f"({100 * (max(tros) / min(tros) - 1):.0f}% apart)")
        if lds:  # the verdict that holds whichever run of the baseline is taken
            line += (f"; loaderd ({len(lds)} run(s), {min(lds):.2f}-{max(lds):.2f} ms) is "
                     f"{min(lds) / max(tros):.2f}-{max(lds) / min(tros):.2f}x training only")
        print(line)
    mixed = [(n, r["mixed"]) for n, r in runs.items() if isinstance(r, dict) and r.get("mixed")]
    for name, m in mixed:
        a, b = m.get("loaderd"), m.get("train_only")
        if not (a and b):
            continue
        tail = lambda x: f", p90 {x['ms_p90']:.3f}, p99 {x['ms_p99']:.3f}" if "ms_p90" in x else ""  # noqa: E731
        print(f"- {name}: blocks of {m['block']} steps in turn, the first {m['skip']} of each left out: loaderd "
              f"{a['ms_mean']:.3f} ms a batch (median {a['ms_median']:.3f}{tail(a)}, {a['steps']} steps), training only "
              f"{b['ms_mean']:.3f} (median {b['ms_median']:.3f}{tail(b)}, {b['steps']} steps): loaderd / training only = "
              f"{m['ratio_mean']:.3f} (medians {m['ratio_median']:.3f}"
              + (f"; second half of each block {a['late_ms_mean']:.3f} / {b['late_ms_mean']:.3f} = {m['ratio_late']:.3f}"
                 if m.get("ratio_late") else "") + "; target <= 1.10)")
        fresh = runs[name].get("fresh_batches_stored")
        if fresh is not None:  # train_mixed_fresh: its training only's batches, each new until they run out
            print(f"  - training only over {fresh} batches of another epoch (seed {runs[name].get('train_only_seed')}), "
                  f"each once before any repeats; {b['steps']} of its steps timed")
        if "cpu_ms_mean" in a and "cpu_ms_mean" in b:  # the trainer's thread: its own work, the rest of a step waits
            segs = runs[name].get("allocator_steps", {}).get("segments_allocated")
            print(f"  - the trainer's thread, CPU ms a step: loaderd {a['cpu_ms_mean']:.3f}, training only "
                  f"{b['cpu_ms_mean']:.3f}" + (f"; segments from cudaMalloc during the steps: {segs}" if segs is not None else ""))
        if "proc_cpu_ms_mean" in a and "proc_cpu_ms_mean" in b:
            print(f"  - the trainer process's CPU ms a step (the autograd thread's included): loaderd "
                  f"{a['proc_cpu_ms_mean']:.3f}, training only {b['proc_cpu_ms_mean']:.3f}; minor page faults a step: "
                  f"loaderd {a.get('minflt_mean', 0):.1f}, training only {b.get('minflt_mean', 0):.1f}")
        if "issue_ms_mean" in a and "issue_ms_mean" in b:
            print(f"  - wall ms a step, issuing it + before the next: loaderd {a['issue_ms_mean']:.3f} + "
                  f"{a['between_ms_mean']:.3f}, training only {b['issue_ms_mean']:.3f} + {b['between_ms_mean']:.3f}")
        if m.get("block_ratios"):
            print("  - each block pair's ratio, in order: " + " ".join(f"{r:.2f}" for r in m["block_ratios"]))
    by_phase = {}  # each phase's runs apart (its daemon may differ: EXTRA's flags, its build), and each baseline
    for n, m in mixed:
        if m.get("ratio_mean"):
            lab, _, run = n.rpartition(":")
            kind = variant_kind(run)
            if kind != "train_mixed":
                lab = f"{kind} in {lab}" if lab else kind
            by_phase.setdefault(lab, []).append(m["ratio_mean"])
    for lab, ratios in by_phase.items():
        if len(ratios) > 1:
            ratios.sort()
            print(f"  - over {len(ratios)} interleaved runs{' of ' + lab if lab else ''}: median {median(ratios):.3f} "
                  f"(target <= 1.10), {ratios[0]:.3f}-{ratios[-1]:.3f}")
    print_fill_overlap(runs, source)
    print_host_probe(runs)
    if ld.get("wall_s") and cpu.get("wall_s"):
        print(f"- CPU-gather epoch / loaderd epoch = {cpu['wall_s'] / ld['wall_s']:.2f} (target >= 3)")
    if ld.get("valid_acc") is not None and res.get("valid_acc") is not None:
        print(f"- valid accuracy: loaderd {100 * ld['valid_acc']:.2f}%, resident {100 * res['valid_acc']:.2f}% "
              f"(difference {100 * (ld['valid_acc'] - res['valid_acc']):+.2f} points; chance "
              f"{100 / max(ds.get('num_classes', 1), 1):.2f}%)")
    labels = sorted({k.split(":", 1)[0] for k in runs if ":" in k})
    for lab in labels:
        for v in ("loader", "loaderd"):
            o, base = runs.get(f"{lab}:{v}", {}), runs.get(v, {})
            if o.get("ms_per_batch") and base.get("ms_per_batch"):
                line = (f"- (d) {lab} {v}: {o['ms_per_batch']:.1f} ms/batch over {o['batches']} batches, against "
                        f"{base['ms_per_batch']:.1f} in the main run ({o['ms_per_batch'] / base['ms_per_batch']:.2f}x)")
                # Against each whole-epoch baseline there is: training only
                # on 32 cycled batches, and on another epoch's batches each
                # once (train_fresh: new shapes at an epoch's rate), the main
                # run's and this phase's own.
                for tb, whose in ((tro, "the main run's training only"), (trf, "the main run's train_fresh"),
                                  (runs.get(f"{lab}:train_only", {}), "this phase's training only"),
                                  (runs.get(f"{lab}:train_fresh", {}), "this phase's train_fresh")):
                    if v == "loaderd" and tb.get("ms_per_batch"):
                        line += f"; {o['ms_per_batch'] / tb['ms_per_batch']:.2f}x {whose} ({tb['ms_per_batch']:.2f} ms)"
                print(line)
    # Within each EXTRA phase, each whole loaderd epoch against the baseline
    # epoch of the same index (loaderd@k with train_fresh@k, else
    # train_only@k), and the median over the pairs: one daemon, one trainer
    # process, its runs in turn, so the baseline's drift shows beside the ratio.
    for lab in [""] + labels:  # "": the main phase, its runs unprefixed
        pre = f"{lab}:" if lab else ""
        pairs = []
        for n in sorted((n for n in runs if variant_kind(n) == f"{pre}loaderd"), key=run_index):
            suffix = n[len(f"{pre}loaderd"):]
            a = runs[n]
            for base in ("train_fresh", "train_only"):
                b = runs.get(f"{pre}{base}{suffix}", {})
                if a.get("wall_s") and b.get("wall_s"):
                    pairs.append((n[len(pre):], f"{base}{suffix}", a["ms_per_batch"], b["ms_per_batch"]))
                    break
        if len(pairs) > 1:
            ratios = [x / y for _, _, x, y in pairs]
            print(f"- {lab or 'main'}: whole epochs in turn, " + "; ".join(f"{a} {x:.2f} / {b} {y:.2f} ms = {x / y:.3f}"
                                                                 for a, b, x, y in pairs)
                  + f"; median {median(ratios):.3f} (target <= 1.10), {min(ratios):.3f}-{max(ratios):.3f}")
    ca = runs.get("cache:loader", {})
    cd = ca.get("daemon", {})
    if ca.get("feature_GBps") and cd.get("rows_looked_up"):
        hit = cd.get("cache_hit_bytes", 0) / (cd["rows_looked_up"] * rb)
        base = lo.get("feature_GBps")
        line = (f"- GPU cache ({meta.get('cache', '20%')} of the feature bytes): {100 * hit:.1f}% of rows looked up were "
                f"hits; {cd.get('cache_hit_bytes', 0) / 1e9:.1f} GB from the cache, {cd.get('pcie_read_bytes', 0) / 1e9:.1f} GB "
                f"over PCIe; loader only delivered {ca['feature_GBps']:.1f} GB/s")
        if base:
            line += f" = {ca['feature_GBps'] / base:.2f}x the no-cache loader's {base:.1f} GB/s (target >= 1.5x)"
        if pc:
            line += f"; PCIe ceiling {pc:.1f} GB/s"
        print(line)
    for name, r in runs.items():
        d = r.get("daemon", {}) if isinstance(r, dict) else {}
        if d.get("filled_batches"):
            fills = f" ({d['filled_batches'] / d['fills']:.2f} batches a fill)" if d.get("fills") else ""
            print(f"- {name}: {d.get('swept_batches', 0):.0f} of {d['filled_batches']:.0f} batches filled in multi-batch sweeps{fills}")
            ph = d.get("gpu_fill_ms") or {}
            hc = r.get("host_cpu") or {}
            if hc:
                print(f"  - host CPUs: {100 * hc['busy']:.0f}% busy, {100 * hc['steal']:.1f}% stolen by the hypervisor"
                      + (f"; the daemon's CPU {d['cpu_ms']:.2f} ms a batch, {d.get('gc_cycles', 0):.0f} collections"
                         if d.get("cpu_ms") is not None else ""))
            if any(ph.values()):  # the daemon ran with --gpu-timing
                print(f"  - GPU ms a batch: " + ", ".join(f"{k} {v:.2f}" for k, v in ph.items()))
        if isinstance(r, dict) and r.get("issue_ms") is not None and r.get("mean_loss") is not None:
            print(f"  - {name} trainer's thread: {r['issue_ms']:.2f} ms issuing a step ({r['issue_cpu_ms']:.2f} ms of CPU), "
                  f"{r['between_ms']:.2f} ms between steps ({r.get('between_cpu_ms', 0):.2f} ms of CPU); the step's GPU time "
                  f"{r['step_ms']:.2f} ms" + ("; context switches a batch: {voluntary:.1f} voluntary, {involuntary:.1f} involuntary"
                                              .format(**r["switches"]) if r.get("switches") else "")
                  + (f"; the process's CPU {r['process_cpu_ms']:.2f} ms a batch (the autograd thread's included)"
                     if r.get("process_cpu_ms") is not None else "")
                  + (f"; {r['spin_us']:.0f} us spun before each step" if r.get("spin_us") is not None else "")
                  + (f" ({r['profiled']} profiled: their overhead included)" if r.get("profiled") else ""))
            if r.get("client_us"):
                print(f"  - {name} client calls, us a batch (wall / CPU, calls a batch): "
                      + ", ".join(f"{k} {w:.0f} / {c:.0f} ({n:g})" for k, (w, c, n) in r["client_us"].items()))
            if r.get("gap_ms") is not None:
                print(f"  - {name} first batch after {r.get('first_ms', 0):.1f} ms; GPU time between steps "
                      f"{r['gap_ms']:.3f} ms a batch (median {r['gap_median_ms']:.3f}, largest {r['gap_max_ms']:.1f}); "
                      f"{r['gaps_big']} gaps over 1 ms, {100 * r['gaps_big_share']:.0f}% of the total, after steps "
                      f"{r['gaps_big_at']}")
        ck = r.get("gpu_clocks") if isinstance(r, dict) else None
        if ck:
            print(f"  - {name} GPU clocks: SM {ck['sm_mhz_mean']:.0f} MHz mean ({ck['sm_mhz_min']:.0f} least), memory "
                  f"{ck['mem_mhz_mean']:.0f} MHz, {ck['power_w_mean']:.0f} W mean, {ck['temp_c_max']:.0f} C at most "
                  f"({ck['samples']} samples); clock event reasons: {', '.join(ck['event_reasons']) or 'none'}")
    if res.get("table_to_gpu"):
        t = res["table_to_gpu"]
        print(f"- resident: table to GPU in {f1(t.get('register_s', 0), 1)} s register + {f1(t.get('copy_s'), 1)} s copy")
    m1, m2 = lo.get("daemon_mem_1", {}), lo.get("daemon_mem_2", {})
    dsb = meta.get("table", {}).get("dataset_bytes")
    if m1:
        line = f"- daemon memory: RSS {gb(m1.get('VmRSS'))} with 1 trainer"
        if m2:
            line += f", {gb(m2.get('VmRSS'))} with 2"
        if dsb:
            line += f"; dataset {gb(dsb)} ({100 * m1.get('VmRSS', 0) / dsb - 100:+.1f}% / "                     f"{100 * m2.get('VmRSS', 0) / dsb - 100 if m2 else float('nan'):+.1f}%)"
        print(line + f"; peak RSS {gb(meta.get('daemon_hwm') or runs.get('loader', {}).get('daemon_mem', {}).get('VmHWM'))}; "
              f"pinned {gb(meta.get('pinned_bytes'))}")
    if lo.get("gpu_bytes_added") is not None:
        print(f"- GPU memory per trainer: {gb(lo.get('gpu_bytes_added'))} added by the first trainer, "
              f"{gb(lo.get('second_gpu_bytes_added'))} by a second; slots {gb(lo.get('slot_bytes'))}; "
              f"per process (nvidia-smi, MiB): {lo.get('gpu_apps_MiB')}")


def print_fill_overlap(runs, source):
    """For each run with --step-trace whose daemon wrote a --fill-trace
    (NAME.fills beside its NAME.json): its steps beside a fill and clear of
    one, by feed."""
    for name, r in runs.items():
        starts = r.get("step_starts_ns") if isinstance(r, dict) else None
        fills_path = os.path.splitext(source.get(name, ""))[0] + ".fills"
        if not starts or not os.path.exists(fills_path):
            continue
        fills = read_fills(fills_path)
        sources = r.get("step_sources")
        o = fill_overlap(starts, sources, r.get("step_block", 1), r.get("mixed", {}).get("skip", 16), fills)
        parts = []
        for src in ("loaderd", "train_only", "all"):
            d = o.get(src)
            if not d:
                continue
            f = lambda x: "-" if not x or x["ms_mean"] is None else f"{x['ms_mean']:.3f} ms ({x['steps']} steps)"  # noqa: E731
            parts.append(f"{src} beside {f(d.get('beside'))}, clear {f(d.get('clear'))}")
        print(f"- {name}: steps beside a fill (its host time and {o['gpu_ms_a_batch']} ms of GPU a batch after "
              f"its start; {len(fills)} fills traced): " + "; ".join(parts))
        w = None
        if (r.get("step_gaps_ms") and not sources and not r.get("partial")
                and variant_kind(name.rpartition(":")[2]) == "loaderd"):
            w = fill_waits(starts, r["step_gaps_ms"], r["batches"], fills)
        if w:
            def part(k):
                n, ms = w[k]
                return f"{n} ({ms:.1f} ms)"
            print(f"  - {name}: GPU waits over 1 ms before a step, over its {w['fills']} fills: at the first batch of "
                  f"the epoch's {w['ramp_fills']} ramp fills {part('ramp')}, of a later fill {part('fill_start')}, "
                  f"elsewhere {part('elsewhere')}")


def correlation(xs, ys):
    """statistics.correlation, or None where it is undefined (fewer than
    three points, or no spread)."""
    if len(xs) < 3:
        return None
    try:
        return statistics.correlation(xs, ys)
    except statistics.StatisticsError:
        return None


def print_host_probe(runs):
    """The host probe beside each training run (bench_train_probe: the
    trainer's thread timing a pure-Python loop and a burst of tiny launches
    before and after the run), and how the baselines' ms a batch move with
    it: a baseline that drifts with the probe drifts with the host."""
    rows = []
    for name, r in runs.items():
        hp = r.get("host_probe") if isinstance(r, dict) else None
        if not hp or not r.get("ms_per_batch") or r.get("step_ms") is None or variant_kind(name).endswith("loader"):
            continue
        sides = [hp.get("before") or {}, hp.get("after") or {}]
        py = [s["py_ms"] for s in sides if "py_ms" in s]
        la = [s["launch_us"] for s in sides if "launch_us" in s]
        if py:
            rows.append((name, r["ms_per_batch"], sum(py) / len(py), sum(la) / len(la) if la else None))
    if not rows:
        return
    print("- host probe (the trainer's thread, mean of before and after each run: a pure-Python loop's ms, "
          "µs a tiny launch) beside ms a batch: " + "; ".join(
              f"{n} {ms:.2f} ({py:.2f} ms" + (f", {la:.2f} µs)" if la is not None else ")") for n, ms, py, la in rows))
    base = [x for x in rows if variant_kind(x[0].rpartition(":")[2]) in ("train_only", "train_fresh")]
    for what, col in (("the Python loop", 2), ("a launch", 3)):
        pts = [(x[1], x[col]) for x in base if x[col] is not None]
        c = correlation([a for a, _ in pts], [b for _, b in pts])
        if c is not None:
            print(f"  - training only's {len(pts)} runs: ms a batch against {what}, correlation {c:+.2f}")
