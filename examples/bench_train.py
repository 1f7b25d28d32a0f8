#!/usr/bin/env python3
"""Issue 6: one epoch of GraphSAGE training over a loaderd-served graph, next
to the loader's ceiling and the usual ways of feeding features.

Start loaderd with --table-socket and --metrics-addr (scripts/bench-train.sh
does everything: it starts the daemon, runs this script and prints the
table), then:

    python3 examples/bench_train.py --socket S --table-socket T \
        --metrics-url http://127.0.0.1:9464/metrics --daemon-pid PID \
        --variants loader,loaderd,resident,cpu --json-out out.json

Variants (same model, seeds and sampler; only the feature path differs):
  loader    loaderd, the trainer touches each batch (x.sum()) and releases it:
            the loader's ceiling
  loader_bare  the same with no trainer-side GPU work at all (views taken
            and released): what the x.sum() kernels beside the gather cost
  loader_eventwait, loader_nowait, loader_norecord, loader_none,
  loader_hostwait, loader_querywait
            loader_bare with the client's per-batch signalling changed: the
            GPU-side wait on the slot's ready event instead of its ready word
            (the client before protocol 4); no GPU-side wait at all; no
            released event recorded; neither; the ready event awaited on the
            host; the GPU-side wait on the event only while it is still
            pending (a diagnosis of the read's slowdown under MPS; nothing
            reads the views, so skipping the wait is safe here and nowhere
            else)
  loaderd   loaderd's GPU slots (CUDA zero-copy gather), training
  loaderd_one  loaderd with the client's work done one batch at a time: each
            Release sent at once, no frames decoded and built ahead (the
            client before session 20, beside the current one in one process)
  loaderd_eventwait, loaderd_hostwait  the same with loader_eventwait's or
            loader_hostwait's signalling
  cpu       (b) loaderd samples (batches without features); the trainer
            gathers rows with torch.index_select from the shared host table
            into pinned memory and copies them H2D on a side stream, one
            batch ahead (what a PyTorch DataLoader pipeline does)
  resident  (c) the whole table copied into GPU memory once; rows indexed on
            the GPU (no host transfer of features at all)
  train_only the same training steps on batches already in GPU memory: K
            batches are taken from loaderd and copied once before the clock
            starts, then cycled for as many steps as an epoch has (no
            loading at all: the floor any loader can reach)
  train_slots  train_only's steps on the first 32 batches (at most its
            slots) held in their loaderd slots (not copied; the daemon
            idle): what reading slots costs
  train_busy   train_only while a second trainer process takes loaderd's
            batches at full speed: what the daemon's work beside training costs
  train_paced  train_busy with the second process taking a batch every
            --pace-ms and reading none of it: the daemon's work at the
            training's pace, with no client on the trainer's thread
  train_mixed  train_only's batches and loaderd's in one loop, --mixed-block
            steps of each in turn, until loaderd's epoch ends; each side's
            ms a batch over the steps of its blocks (less the first
            --mixed-skip of each block) and their ratio: loaderd against
            training only in the same seconds, which the drift of the
            baseline between whole epochs (10% and more) does not reach
  train_fresh  train_only over another epoch's batches (--seed + 1000),
            each stepped once (FreshShapesFeed, below): the same steps as
            an epoch's, their shapes new as loaderd's are
  train_mixed_fresh  train_mixed with training only on another epoch's
            batches (the loaderd side's seed + 1000), each stepped once
            (their edge_index, labels and hop sizes kept on the GPU, x the
            first rows of one buffer): steps with new shapes on both sides,
            as a real epoch's are, where train_mixed's 32 cycled batches
            repeat theirs (a GEMM shape's first step pays cuBLAS's
            heuristics; FreshShapesFeed)
  train_spin   train_only with the trainer's thread kept busy --spin-us
            microseconds before each step (default 200, about what the
            client's per-batch calls take): what host time between steps
            costs an epoch, apart from any work on the GPU
  pcie      pinned H2D memcpy bandwidth (the bound for 'loader')
  NAME@K    NAME run again, reported as NAME@K (the render pairs loaderd@K
            with train_only@K and prints training only's spread)

GNNLOADER_BENCH_CLIENT=DIR imports gnnloader from DIR instead of python/ (an
older client measured beside this one, e.g. in an EXTRA phase's train.NAME=value).

GNNLOADER_BENCH_PROFILE=START:COUNT:DIR profiles steps START..START+COUNT of
every variant (torch.profiler) into DIR/VARIANT.txt ('@' written as '-'),
the kernels by GPU time and the host's ops by their CPU time
(bench_train_measure.ProfileWindow; the profiler slows those epochs, and
the results say "profiled").

GNNLOADER_BENCH_GC=freeze (or off) calls gc.freeze() (gc.disable()) after
the setup: whether the collector's passes weigh on the trainer's thread.

GNNLOADER_BENCH_EMPTY_CACHE=1 gives torch's allocator's cached blocks back
to the driver (gc.collect(), torch.cuda.empty_cache()) before each variant,
so every run allocates its tensors afresh as a process's first run does
(train_mixed's first run of a process is the highest of its phase: is it
the allocator's state?).

GNNLOADER_BENCH_RUN_SEEDS=1 gives train_mixed's loaderd side of NAME@K the
sampling seed --seed + K - 1: each run of a process a new epoch's batches,
as a training's next epoch has, rather than the same batches (and the same
tensor shapes, whose GEMM choices the libraries keep) again.

The trainer's torch CPU threads are as many as the CPUs it may run on (its
affinity, e.g. under taskset), not all the host's.

GraphSAGE: 3 layers (mean aggregation, root weight: PyG's SAGEConv), hidden
256, fanouts [15,10,5], batch 1024, layers trimmed to the hops they need (as
PyG's trim_to_layer), Adam lr 0.003, dropout 0.5. After the epoch: accuracy
on the valid split with the same fanouts and a fixed sampling seed.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

import torch

# GNNLOADER_BENCH_CLIENT: the directory of another gnnloader package to
# measure (an older client, side by side with this one in EXTRA phases).
sys.path.insert(0, os.environ.get("GNNLOADER_BENCH_CLIENT") or
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import gnnloader  # noqa: E402
from gnnloader.table import open_table  # noqa: E402

# The parts of this benchmark, sibling modules of this script (its directory
# is sys.path[0] when it runs as `python3 examples/bench_train.py`). Every
# name the script held before they were split off is still bench_train.NAME.
from bench_train_busy import BusyConsumer  # noqa: E402
from bench_train_clocks import ClockSampler  # noqa: E402
from bench_train_probe import probe as host_probe  # noqa: E402
from bench_train_feeds import (CPUGatherFeed, FreshShapesFeed, HeldSlotsFeed, LoaderdFeed,  # noqa: E402,F401
                               PreloadedFeed, ResidentFeed, SpinFeed, _StructFeed, copy_table_to_gpu)
from bench_train_mixed import MixedFeed  # noqa: E402
from bench_train_measure import (Timer, _cudart, daemon_stage_ms, gpu_apps, gpu_free, host_cpu, host_cpu_share,  # noqa: E402,F401
                                 host_register, host_unregister, pcie_bound, proc_mem, scrape, sync)
from bench_train_model import (SAGE, SAGEConv, _run_epoch, allocator_counts, allocator_taken, evaluate, run_epoch,  # noqa: E402,F401
                               train_variant)
from bench_train_render import render, run_index, variant_kind  # noqa: E402
from bench_train_sync import SYNC_MODES, _event_fn  # noqa: E402,F401

# train_fresh's and train_mixed_fresh's training-only epoch: the seed of
# loaderd's side plus this.
FRESH_SEED_OFFSET = 1000

# The variants that run no training step (the warm-up is for the others).
UNTRAINED = {"pcie", "loader", "loader_bare", *SYNC_MODES}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--socket", default="")
    p.add_argument("--table-socket", default="")
    p.add_argument("--metrics-url", default="")
    p.add_argument("--daemon-pid", type=int, default=0)
    p.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    p.add_argument("--variants", default="pcie,loader,train_only,loaderd,resident,cpu")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--fanouts", default="15,10,5")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.003)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-seed", type=int, default=12345)
    p.add_argument("--slots", type=int, default=0, help="slots per trainer (0 = the daemon's default)")
    p.add_argument("--wait-timeout", type=float, default=120.0,
                   help="seconds any one wait on loaderd may take before the variant fails (0: no limit); "
                        "a stalled daemon then ends that variant with an error, not the whole run")
    p.add_argument("--max-batches", type=int, default=0, help="stop an epoch after this many batches (0 = whole)")
    p.add_argument("--no-eval", action="store_true")
    p.add_argument("--warmup-steps", type=int, default=30,
                   help="training steps on two batches before the first variant, untimed: the process's first "
                        "steps pay CUDA's one-off costs (cuBLAS handles, kernels loaded on first use, the "
                        "allocator's first blocks), which would otherwise land on whichever variant trains first")
    p.add_argument("--label", default="", help="prefix of the variants' names in the output (e.g. mps)")
    p.add_argument("--deadline", type=float, default=0, help="unix time after which no new variant starts")
    p.add_argument("--hard-end", type=float, default=0, help="unix time at which a running epoch stops (reported as partial)")
    p.add_argument("--train-stream", choices=["default", "high"], default="default",
                   help="the CUDA stream training runs on: torch's default, or one of the highest priority")
    p.add_argument("--spin-us", type=float, default=200.0,
                   help="train_spin: microseconds the trainer's thread spins before each step")
    p.add_argument("--pace-ms", type=float, default=0.0,
                   help="train_paced: ms between the second process's batches (default: the last "
                        "loaderd run's ms a batch, else training only's)")
    p.add_argument("--mixed-block", type=int, default=100,
                   help="train_mixed: steps from one feed before the other's turn")
    p.add_argument("--mixed-skip", type=int, default=16,
                   help="train_mixed: steps at the start of each block left out of its figures")
    p.add_argument("--step-trace", action="store_true",
                   help="record each step's start on the wall clock in the results (step_starts_ns), for lining "
                        "steps up with loaderd's --fill-trace in the render (bench-train.sh FILL_TRACE=1)")
    p.add_argument("--json-out", default="")
    p.add_argument("--render", nargs="*", default=None, help="print the issue-6 table from these JSON files and exit")
    args = p.parse_args()
    if args.render is not None:
        render(args.render)
        return
    args.fanouts = [int(f) for f in args.fanouts.split(",")]
    dev = torch.device(args.device)
    gc_mode = os.environ.get("GNNLOADER_BENCH_GC", "")
    if gc_mode not in ("", "freeze", "off"):
        raise SystemExit(f"GNNLOADER_BENCH_GC={gc_mode!r}: want freeze or off")
    torch.set_num_threads(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
        torch.zeros(1, device=dev)  # the context, before any measurement
    res = {"device": str(dev), "variants": {}, "args": {k: v for k, v in vars(args).items()},
           "torch_threads": torch.get_num_threads()}
    if dev.type == "cuda":
        res["gpu"] = torch.cuda.get_device_name(dev)
    names = [v for v in args.variants.split(",") if v]
    table = None
    if args.table_socket and any(variant_kind(v) in ("cpu", "resident") for v in names):
        t = time.perf_counter()
        table = open_table(args.table_socket)
        res["table"] = dict(table.info, map_s=time.perf_counter() - t)
    with gnnloader.Loader(args.socket, split="train", batch_size=args.batch_size, fanouts=args.fanouts,
                          device="cpu", slots=1, pyg=False, release="manual", timeout=args.wait_timeout) as probe:
        info = {"feature_dim": probe.dataset.feature_dim, "num_classes": probe.dataset.num_classes,
                "num_nodes": probe.dataset.num_nodes, "num_edges": probe.dataset.num_edges,
                "batches": len(probe), "feature_dtype": probe.dataset.feature_dtype}
    res["dataset"] = info
    row_bytes = info["feature_dim"] * {"float32": 4, "float16": 2, "bfloat16": 2}.get(info["feature_dtype"], 4)
    res["row_bytes"] = row_bytes
    res["daemon_mem_start"] = proc_mem(args.daemon_pid)

    def out(name):
        return (args.label + ":" if args.label else "") + name

    def save():
        if args.json_out:
            with open(args.json_out, "w") as f:
                json.dump(res, f, indent=1)

    if args.warmup_steps > 0 and any(variant_kind(v) not in UNTRAINED for v in names):
        t = time.perf_counter()
        train_variant(args, out("warmup"), lambda s, sh, sd: PreloadedFeed(args, s, sh, sd, dev, keep=2), dev, info,
                      evaluate_after=False, max_batches=args.warmup_steps)
        sync(dev)
        res["warmup_s"] = time.perf_counter() - t
        print(f"[{out('warmup')}] {args.warmup_steps} untimed steps in {res['warmup_s']:.2f} s", flush=True)

    if gc_mode == "freeze":
        gc.freeze()
    elif gc_mode == "off":
        gc.disable()
    res["gc"] = gc_mode or "on"
    empty_cache = dev.type == "cuda" and os.environ.get("GNNLOADER_BENCH_EMPTY_CACHE", "") not in ("", "0")
    run_seeds = os.environ.get("GNNLOADER_BENCH_RUN_SEEDS", "") not in ("", "0")

    for v in names:
        if args.deadline and time.time() > args.deadline:
            res["variants"][out(v)] = {"skipped": "deadline"}
            print(f"[{out(v)}] skipped: past the deadline", flush=True)
            continue
        args.variant_name = out(v)  # names the profile window's file (GNNLOADER_BENCH_PROFILE)
        if empty_cache:
            gc.collect()
            torch.cuda.empty_cache()
        kind = variant_kind(v)  # "train_only@2": train_only again, reported under its own name
        before = scrape(args.metrics_url)
        cpu0 = host_cpu()
        fresh_stored = None  # a FreshShapesFeed's stored batches (fresh_feed)

        def fresh_feed(split, seed, n):
            """train_fresh's and train_mixed_fresh's training-only feed; the
            daemon's figures and the host's CPU counted from after its
            preload (an epoch filled with no training beside it)."""
            nonlocal before, cpu0, fresh_stored
            f = FreshShapesFeed(args, split, seed, dev, n)
            before, cpu0, fresh_stored = scrape(args.metrics_url), host_cpu(), f.stored
            return f
        free0 = gpu_free(dev)
        alloc0 = allocator_counts(dev)
        probe0 = host_probe(dev)
        clocks = ClockSampler(dev)
        mem = {}
        try:
            if kind == "pcie":
                r = {"GBps": pcie_bound(dev)}
            elif kind == "loader":
                feed = LoaderdFeed(args, "train", True, args.seed, dev)
                mem = {"gpu_bytes_added": free0 - gpu_free(dev), "slot_bytes": feed.ld.opened.slots * feed.ld.opened.slot_bytes,
                       "daemon_mem_1": proc_mem(args.daemon_pid), "gpu_apps_MiB": gpu_apps()}
                second = None
                if dev.type == "cuda" and not args.label:  # a second trainer: what it adds
                    f1 = gpu_free(dev)
                    second = gnnloader.Loader(args.socket, split="train", batch_size=args.batch_size,
                                              fanouts=args.fanouts, device=str(dev), rank=0, world_size=1,
                                              slots=args.slots, pyg=False, timeout=args.wait_timeout)
                    mem["second_gpu_bytes_added"] = f1 - gpu_free(dev)
                    mem["daemon_mem_2"] = proc_mem(args.daemon_pid)
                    second.close()
                    time.sleep(0.5)
                try:
                    r = run_epoch(args, feed, dev, touch_only=True, max_batches=args.max_batches)
                finally:
                    feed.close()
            elif kind == "loader_bare":
                # The loader with no trainer-side GPU work at all: each batch's
                # views are taken and released, nothing reads them.
                feed = LoaderdFeed(args, "train", True, args.seed, dev)
                try:
                    r = run_epoch(args, feed, dev, touch_only="bare", max_batches=args.max_batches)
                finally:
                    feed.close()
            elif kind in SYNC_MODES:
                # loader_bare with the client's per-batch CUDA signalling
                # changed: which part of it slows the daemon's read under MPS.
                feed = LoaderdFeed(args, "train", True, args.seed, dev)
                try:
                    if dev.type == "cuda":
                        SYNC_MODES[kind](feed.ld._cuda)
                    r = run_epoch(args, feed, dev, touch_only="bare", max_batches=args.max_batches)
                finally:
                    feed.close()
            elif kind in ("loaderd_eventwait", "loaderd_hostwait"):
                # loaderd training with loader_eventwait's or loader_hostwait's signalling.
                def feed_with(s, sh, sd, mode=SYNC_MODES["loader_" + kind.split("_", 1)[1]]):
                    f = LoaderdFeed(args, s, sh, sd, dev)
                    if dev.type == "cuda":
                        mode(f.ld._cuda)
                    return f
                r = train_variant(args, out(v), feed_with, dev, info)
            elif kind == "loaderd":
                r = train_variant(args, out(v), lambda s, sh, sd: LoaderdFeed(args, s, sh, sd, dev), dev, info)
            elif kind == "loaderd_one":
                r = train_variant(args, out(v), lambda s, sh, sd: LoaderdFeed(args, s, sh, sd, dev, one_at_a_time=True),
                                  dev, info, evaluate_after=False)
            elif kind == "train_only":
                # No accuracy: it trains on `keep` batches over and over.
                r = train_variant(args, out(v), lambda s, sh, sd: PreloadedFeed(args, s, sh, sd, dev), dev, info,
                                  evaluate_after=False)
            elif kind in ("train_mixed", "train_mixed_fresh"):
                # The preloaded batches first: their loader closes before loaderd's opens.
                if args.mixed_block < 1 or args.mixed_skip < 0:
                    raise ValueError(f"train_mixed: --mixed-block {args.mixed_block} (want >= 1), "
                                     f"--mixed-skip {args.mixed_skip} (want >= 0)")

                loaderd_seed = args.seed + (run_index(v) - 1 if run_seeds else 0)

                def mixed(s, sh, sd):
                    if kind == "train_mixed_fresh":  # training only on another epoch's shapes, each new
                        # As many as its side steps: about half the run, and a block.
                        n = args.max_batches // 2 + args.mixed_block if args.max_batches else 0
                        pre = fresh_feed(s, loaderd_seed + FRESH_SEED_OFFSET, n)
                    else:
                        pre = PreloadedFeed(args, s, sh, sd, dev)
                    try:
                        return MixedFeed(LoaderdFeed(args, s, sh, loaderd_seed if s == "train" else sd, dev), pre,
                                         args.mixed_block)
                    except BaseException:
                        pre.close()
                        raise
                r = train_variant(args, out(v), mixed, dev, info, evaluate_after=False)
                r["loaderd_seed"] = loaderd_seed
                if kind == "train_mixed_fresh":
                    r["train_only_seed"] = loaderd_seed + FRESH_SEED_OFFSET
                    r["fresh_batches_stored"] = fresh_stored
            elif kind == "train_spin":
                r = train_variant(args, out(v), lambda s, sh, sd: SpinFeed(PreloadedFeed(args, s, sh, sd, dev), args.spin_us),
                                  dev, info, evaluate_after=False)
                r["spin_us"] = args.spin_us
            elif kind == "train_fresh":
                # Training only's whole epoch on another epoch's batches, each once:
                # new shapes at a real epoch's rate (train_only's 32 repeat theirs).
                r = train_variant(args, out(v), lambda s, sh, sd: fresh_feed(s, sd + FRESH_SEED_OFFSET, args.max_batches),
                                  dev, info, evaluate_after=False)
                r["train_only_seed"] = args.seed + FRESH_SEED_OFFSET
                r["fresh_batches_stored"] = fresh_stored
            elif kind == "train_slots":
                r = train_variant(args, out(v), lambda s, sh, sd: HeldSlotsFeed(args, s, sh, sd, dev), dev, info,
                                  evaluate_after=False)
            elif kind in ("train_busy", "train_paced"):
                pace = 0.0
                if kind == "train_paced":  # --pace-ms, else the last loaderd's (or training only's) ms a batch
                    pace = args.pace_ms or next((x["ms_per_batch"] for k in ("loaderd", "train_only")
                                                 for n, x in reversed(list(res["variants"].items()))
                                                 if variant_kind(n.split(":")[-1]) == k and x.get("ms_per_batch")), 3.5)
                busy = BusyConsumer(args, dev, pace_ms=pace)
                try:
                    r = train_variant(args, out(v), lambda s, sh, sd: PreloadedFeed(args, s, sh, sd, dev), dev, info,
                                      evaluate_after=False)
                    alive = busy.running()
                finally:
                    code = busy.stop()
                if not alive:  # it stopped taking batches: that was train_only
                    r = {"error": f"the busy consumer exited ({code}) before the steps ended", "measured": r}
                else:  # its batches a second: train_paced's should be about 1000 / pace
                    r["busy_batches_per_s"] = busy.rate
                    if pace:
                        r["pace_ms"] = pace
            elif kind == "cpu":
                r = train_variant(args, out(v), lambda s, sh, sd: CPUGatherFeed(args, s, sh, sd, dev, table), dev, info)
            elif kind == "resident":
                gpu_x, cp = copy_table_to_gpu(table, dev)
                try:
                    r = train_variant(args, out(v), lambda s, sh, sd: ResidentFeed(args, s, sh, sd, dev, table, gpu_x),
                                      dev, info)
                finally:
                    del gpu_x
                    if dev.type == "cuda":
                        torch.cuda.empty_cache()
                r["table_to_gpu"] = cp
            else:
                raise SystemExit(f"unknown variant {kind!r}")
        except Exception as e:  # noqa: BLE001 - report and go on with the next variant
            import traceback
            traceback.print_exc()
            r = {"error": f"{type(e).__name__}: {e}"}
        r["gpu_clocks"] = clocks.stop()
        r["host_probe"] = {"before": probe0, "after": host_probe(dev)}
        after = scrape(args.metrics_url)
        if before and kind != "pcie":
            r["daemon"] = daemon_stage_ms(before, after)
            if r.get("batches"):
                r["feature_GBps"] = r["nodes_per_batch"] * row_bytes * r["batches_per_s"] / 1e9
        r.update(mem)
        r["host_cpu"] = host_cpu_share(cpu0, host_cpu())
        r["daemon_mem"] = proc_mem(args.daemon_pid)
        if dev.type == "cuda":
            a = allocator_counts(dev)  # what the variant took from the driver, not from torch's cache
            r["allocator"] = allocator_taken(alloc0, a) | {"reserved_bytes": a["reserved_bytes"]}
            r["trainer_gpu_peak_bytes"] = torch.cuda.max_memory_allocated(dev)
            torch.cuda.reset_peak_memory_stats(dev)
        res["variants"][out(v)] = r
        print(f"[{out(v)}] {json.dumps(r)}", flush=True)
        save()
    res["daemon_mem_end"] = proc_mem(args.daemon_pid)
    res["trainer_mem_end"] = proc_mem(os.getpid())
    if table is not None:
        table.close()
    save()


if __name__ == "__main__":
    main()
