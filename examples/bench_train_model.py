"""bench_train.py's model and training loop: GraphSAGE (PyG's SAGEConv in
plain torch, layers trimmed to the hops they need) and one timed epoch over a
feed, then accuracy on the valid split."""
from __future__ import annotations

import gc
import resource
import time

import torch
import torch.nn.functional as F

from bench_train_measure import ProfileWindow, Timer, gap_figures, sync, thread_switches
from bench_train_mixed import mixed_figures


# -- model --------------------------------------------------------------------

class SAGEConv(torch.nn.Module):
    """GraphSAGE mean aggregation with root weight (PyG's SAGEConv), computing
    only the first n_out rows (the nodes the next layer needs)."""

    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.lin_l = torch.nn.Linear(in_dim, out_dim)
        self.lin_r = torch.nn.Linear(in_dim, out_dim, bias=False)

    def forward(self, x, edge_index, n_out):
        src, dst = edge_index[0], edge_index[1]
        agg = torch.zeros(n_out, x.size(1), dtype=x.dtype, device=x.device)
        agg.index_add_(0, dst, x.index_select(0, src))
        deg = torch.zeros(n_out, dtype=x.dtype, device=x.device)
        deg.index_add_(0, dst, torch.ones_like(dst, dtype=x.dtype))
        agg = agg / deg.clamp(min=1).unsqueeze(1)
        return self.lin_l(agg) + self.lin_r(x[:n_out])


class SAGE(torch.nn.Module):
    def __init__(self, in_dim, hidden, out_dim, layers=3, dropout=0.5):
        super().__init__()
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        self.convs = torch.nn.ModuleList(SAGEConv(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = dropout

    def forward(self, x, edge_index, nodes, edges):
        """nodes/edges: sampled nodes and edges per hop (seeds first); layer l
        reads hops 0..L-l and writes hops 0..L-l-1. Half-precision
        features (a float16 or bfloat16 table) are computed on in float32."""
        if x.dtype != torch.float32:
            x = x.float()
        L = len(self.convs)
        for l, conv in enumerate(self.convs):
            n_in = sum(nodes[: L + 1 - l])
            n_out = sum(nodes[: L - l])
            e = sum(edges[: L - l])
            x = conv(x[:n_in], edge_index[:, :e], n_out)
            if l < L - 1:
                x = F.relu(x)
                x = F.dropout(x, p=self.dropout, training=self.training)
        return x


def allocator_counts(dev):
    """torch's caching allocator on dev: segments taken from the driver
    (cudaMalloc) and given back, retries after a failed cudaMalloc, and the
    bytes it holds. A variant that still takes segments mid-run pays a
    driver call inside its steps."""
    if dev.type != "cuda":
        return {}
    st = torch.cuda.memory_stats(dev)
    return {"segments_allocated": st.get("segment.all.allocated", 0), "segments_freed": st.get("segment.all.freed", 0),
            "alloc_retries": st.get("num_alloc_retries", 0), "reserved_bytes": st.get("reserved_bytes.all.current", 0)}


def allocator_taken(before, after):
    """What the allocator's counters (allocator_counts) rose by from before
    to after: segments taken and given back, retries; not the bytes held."""
    return {k: after[k] - before[k] for k in after if k != "reserved_bytes"}


# -- one run -------------------------------------------------------------------

def run_epoch(args, feed, dev, model=None, opt=None, touch_only=False, max_batches=0):
    """One pass over feed; returns timing figures (and trains when model).
    With --train-stream high the whole pass (the waits for each batch
    included) runs on a high-priority CUDA stream, so the GPU's block
    scheduler prefers the training's kernels to loaderd's."""
    if dev.type == "cuda" and args.train_stream == "high":
        try:  # out-of-range priorities are clamped to the highest (torch >= 2.1)
            st = torch.cuda.Stream(dev, priority=-100)
        except (RuntimeError, ValueError):
            st = torch.cuda.Stream(dev, priority=-1)
        with torch.cuda.stream(st):
            return _run_epoch(args, feed, dev, model, opt, touch_only, max_batches)
    return _run_epoch(args, feed, dev, model, opt, touch_only, max_batches)


def _run_epoch(args, feed, dev, model, opt, touch_only, max_batches):
    prof = ProfileWindow(getattr(args, "variant_name", "variant"))
    gcs = GCWatch(feed)
    try:
        r = _steps(args, feed, dev, model, opt, touch_only, max_batches, prof)
        r["gc"] = gcs.figures()
        return r
    finally:
        gcs.stop()
        prof.finish()  # an epoch that ends early or fails leaves no profiler running


class GCWatch:
    """Python's cyclic collections during an epoch (they run on the thread
    that allocates: the trainer's, between or inside steps): how many of
    each generation and their milliseconds, per feed in train_mixed (the
    feed of the step last begun). bench_train.py's GNNLOADER_BENCH_GC turns
    the collector off or freezes the heap before the variants."""

    def __init__(self, feed):
        self.sources = getattr(feed, "sources", None)
        self.t0, self.by = 0.0, {}
        gc.callbacks.append(self._cb)

    def _cb(self, phase, info):
        if phase == "start":
            self.t0 = time.perf_counter()
            return
        side = self.sources[-1] if self.sources else "all"
        row = self.by.setdefault(side, {"ms": 0.0, "gen": [0, 0, 0]})
        row["ms"] += 1e3 * (time.perf_counter() - self.t0)
        row["gen"][info["generation"]] += 1

    def figures(self):
        return {"enabled": gc.isenabled(), **{k: {"ms": round(v["ms"], 2), "gen": v["gen"]} for k, v in self.by.items()}}

    def stop(self):
        if self._cb in gc.callbacks:
            gc.callbacks.remove(self._cb)


def process_counters(into):
    """Appends the process's CPU ms so far (all its threads) and its minor
    page faults so far to into["proc_cpu_ms"] and into["minflt"] (one
    getrusage)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    into["proc_cpu_ms"].append(1e3 * (ru.ru_utime + ru.ru_stime))
    into["minflt"].append(ru.ru_minflt)


def _steps(args, feed, dev, model, opt, touch_only, max_batches, prof):
    timer = Timer(dev)
    acc = torch.zeros((), device=dev)
    loss_sum = torch.zeros((), device=dev)
    nodes_total = batches = 0
    partial = False
    issue = issue_cpu = between = between_cpu = 0.0  # the trainer's thread: issuing steps, and from a step's end to the next's start
    sw0 = thread_switches()
    alloc0 = allocator_counts(dev)
    p0 = time.process_time()
    t0, wall0 = time.perf_counter(), time.time_ns()  # wall0: t0 on the wall clock (--step-trace)
    last = lastc = None
    first = None  # wall time from the epoch's start to its first batch
    # Each step's start (perf_counter), for train_mixed (each feed timed
    # apart) and --step-trace (the steps on the wall clock: wall0 + start - t0).
    trace = getattr(args, "step_trace", False)
    starts = [] if hasattr(feed, "sources") or trace else None
    # train_mixed: the thread's CPU time at each start, and each step's end
    # of issue (perf_counter): each feed's time issuing its steps and between them.
    cpus = [] if hasattr(feed, "sources") else None
    ends = [] if cpus is not None or trace else None
    # train_mixed: the process's CPU ms (the autograd thread's included) and
    # its minor page faults at each start, each feed's rise a step.
    procs = {"proc_cpu_ms": [], "minflt": []} if cpus is not None else None
    for x, ei, y, bs, nodes, edges, nn in feed:
        prof.before(batches)
        h, c = time.perf_counter(), time.thread_time()
        if first is None:
            first = h - t0
        if starts is not None:
            starts.append(h)
        if cpus is not None:
            cpus.append(c)
            process_counters(procs)
        if last is not None:
            between += h - last
            between_cpu += c - lastc
        s = timer.start()
        if touch_only == "bare":
            pass
        elif touch_only:
            acc += x.sum()
        else:
            opt.zero_grad(set_to_none=True)
            out = model(x, ei, nodes, edges)
            loss = F.cross_entropy(out, y[:bs])
            loss.backward()
            opt.step()
            loss_sum += loss.detach()
        timer.stop(s)
        last, lastc = time.perf_counter(), time.thread_time()
        if ends is not None:
            ends.append(last)
        issue += last - h
        issue_cpu += lastc - c
        prof.after(batches)
        nodes_total += nn
        batches += 1
        if max_batches and batches >= max_batches:
            break
        if args.hard_end and time.time() > args.hard_end:
            partial = True
            break
    sw1 = thread_switches()
    p1 = time.process_time()
    alloc1 = allocator_counts(dev)
    prof.finish()
    sync(dev)
    wall = time.perf_counter() - t0
    steps = timer.ms()
    gaps = gap_figures(timer.gaps())
    r = {"batches": batches, "wall_s": wall, "batches_per_s": batches / wall, "ms_per_batch": 1e3 * wall / max(batches, 1),
         "step_ms": sum(steps) / max(len(steps), 1), "nodes_per_batch": nodes_total / max(batches, 1),
         # Host figures of the trainer's thread, ms a batch: issuing a step
         # (wall, and its CPU time) and between steps (the feed's next batch).
         # A step whose issue takes as long as its GPU time is bound by the
         # thread, not by the GPU.
         "issue_ms": 1e3 * issue / max(batches, 1), "issue_cpu_ms": 1e3 * issue_cpu / max(batches, 1),
         "between_ms": 1e3 * between / max(batches - 1, 1), "between_cpu_ms": 1e3 * between_cpu / max(batches - 1, 1),
         # The whole process's CPU time a batch: the thread's, and also the
         # autograd engine's thread, which issues every backward's kernels
         # while the calling thread waits for it (its one voluntary switch a
         # step), and the bench's clock sampler (small).
         "process_cpu_ms": 1e3 * (p1 - p0) / max(batches, 1),
         # Context switches of the thread a batch: voluntary (it blocked: a
         # socket, a futex, the driver) and involuntary (it was preempted).
         "switches": {k: (sw1[k] - sw0[k]) / max(batches, 1) for k in sw0},
         # Wall time to the first batch (an epoch's start-up), and the GPU
         # time between steps (gap_figures).
         "first_ms": 1e3 * (first or 0.0), **gaps}
    if alloc1:  # segments torch's allocator took from the driver during the steps (a cudaMalloc inside a step)
        r["allocator_steps"] = allocator_taken(alloc0, alloc1)
    if starts is not None:
        starts.append(time.perf_counter())  # after the sync: the last step's end
    if cpus is not None:
        cpus.append(time.thread_time())
        process_counters(procs)
    if hasattr(feed, "sources"):
        r["mixed"] = mixed_figures(starts, feed.sources, feed.block, args.mixed_skip, cpus, ends, procs)
    if trace:
        # A run's steps on the wall clock (the last entry its end, after the
        # sync), and each step's feed in train_mixed: the render lines them
        # up with the daemon's --fill-trace (bench_train_mixed.fill_overlap).
        r["step_starts_ns"] = [wall0 + int((x - t0) * 1e9) for x in starts]
        # Each step's GPU time and the GPU time before the next one (the
        # stream's wait for a ready word, or idle for the host), ms: which
        # steps the gaps are at, against the daemon's fills.
        r["step_gpu_ms"] = [round(x, 3) for x in steps]
        r["step_gaps_ms"] = [round(x, 3) for x in timer.gaps()]
        # The trainer's thread from each step's end of issue to the next
        # step's start (the feed's work: loaderd's client), ms.
        r["step_between_ms"] = [round(1e3 * (b - a), 3) for a, b in zip(ends, starts[1:-1])]
        if hasattr(feed, "sources"):
            r["step_sources"] = list(feed.sources)
            r["step_block"] = feed.block
    if prof.count:
        # The profiler's start and end land between steps, its overhead in them.
        r["profiled"] = f"steps {prof.start} to {prof.start + prof.count - 1}"
    if partial:
        r["partial"] = "stopped at the time limit"
    if not touch_only:
        r["mean_loss"] = float(loss_sum) / max(batches, 1)
    return r


@torch.no_grad()
def evaluate(args, model, make_feed, dev):
    model.eval()
    feed = make_feed("valid", False, args.eval_seed)
    correct = total = 0
    try:
        for x, ei, y, bs, nodes, edges, _ in feed:
            out = model(x, ei, nodes, edges)
            correct += int((out.argmax(dim=-1) == y[:bs]).sum())
            total += bs
    finally:
        feed.close()
    model.train()
    return correct / max(total, 1)


def train_variant(args, name, make_feed, dev, info, evaluate_after=True, max_batches=None):
    torch.manual_seed(args.seed)
    if dev.type == "cuda":
        torch.cuda.manual_seed(args.seed)
    model = SAGE(info["feature_dim"], args.hidden, info["num_classes"], layers=len(args.fanouts)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    feed = make_feed("train", True, args.seed)
    try:
        r = run_epoch(args, feed, dev, model, opt, max_batches=args.max_batches if max_batches is None else max_batches)
        ct = getattr(feed, "client_times", None)
        if ct:  # GNNLOADER_BENCH_CLIENT_TIMES: the client's calls, us a batch (wall, CPU) and calls a batch
            # (a batch of loaderd's: in train_mixed, about half the steps are training only's)
            sources = getattr(feed, "sources", None)
            n = max(sources.count("loaderd") if sources is not None else r["batches"], 1)
            r["client_us"] = {k: [round(1e6 * w / n, 1), round(1e6 * c / n, 1), round(k_n / n, 2)]
                              for k, (w, c, k_n) in ct.items()}
        if hasattr(feed, "gather_ms") and feed.gather_ms:
            r["cpu_gather_ms"] = sum(feed.gather_ms) / len(feed.gather_ms)
    finally:
        feed.close()
    if evaluate_after and not args.no_eval and not (args.hard_end and time.time() > args.hard_end):
        t = time.perf_counter()
        r["valid_acc"] = evaluate(args, model, make_feed, dev)
        r["eval_s"] = time.perf_counter() - t
    return r
