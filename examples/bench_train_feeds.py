"""bench_train.py's feature paths: loaderd's slots, (b) the CPU gather from
the shared host table, (c) the table resident in GPU memory, and batches
preloaded into GPU memory (train_only)."""
from __future__ import annotations

import os
import sys
import time

import torch

sys.path.insert(0, os.environ.get("GNNLOADER_BENCH_CLIENT") or  # bench_train.py says what it is
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import gnnloader  # noqa: E402
from gnnloader.table import StructLoader  # noqa: E402

from bench_train_measure import host_register, host_unregister, sync  # noqa: E402


# -- feature paths -------------------------------------------------------------
# Each yields (x, edge_index, y, batch_size, nodes, edges, cleanup) on the device,
# x already available to the current stream.

def step_inputs(b, x, ei, y):
    """What a feed yields for batch b with these x, edge_index and y."""
    return x, ei, y, b.batch_size, list(b.num_sampled_nodes), list(b.num_sampled_edges), b.n_id.numel()


class _CycledFeed:
    """A feed of len(feed) steps over the batches it keeps, in turn."""

    n = 0
    batches = ()

    def __len__(self):
        return self.n

    def __iter__(self):
        for i in range(self.n):
            yield self.batches[i % len(self.batches)]

def time_calls(obj, names, times=None):
    """GNNLOADER_BENCH_CLIENT_TIMES=1 (an experiment aid): each of obj's
    methods `names` replaced, on this instance only, by one that adds its
    wall and thread CPU seconds and its calls to times[name] (returned):
    where the client's time between steps goes."""
    times = {} if times is None else times
    for name in names:
        f = getattr(obj, name)
        acc = times.setdefault(name, [0.0, 0.0, 0])

        def timed(*a, _f=f, _acc=acc, **kw):
            w, c = time.perf_counter(), time.thread_time()
            try:
                return _f(*a, **kw)
            finally:
                _acc[0] += time.perf_counter() - w
                _acc[1] += time.thread_time() - c
                _acc[2] += 1
        setattr(obj, name, timed)
    return times


class LoaderdFeed:
    """loaderd's GPU slots (or CPU slots on a CPU-only machine)."""

    def __init__(self, args, split, shuffle, seed, dev, one_at_a_time=False):
        self.ld = gnnloader.Loader(args.socket, split=split, batch_size=args.batch_size, fanouts=args.fanouts,
                                   shuffle=shuffle, seed=seed, device=str(dev), slots=args.slots, pyg=False,
                                   timeout=args.wait_timeout)
        if one_at_a_time:  # loaderd_one: each Release sent at once, nothing decoded ahead
            self.ld._release_hold = self.ld._batches_ahead = 0
        self.dev = dev
        self.row_bytes = None
        self.client_times = None
        if os.environ.get("GNNLOADER_BENCH_CLIENT_TIMES"):
            self.client_times = time_calls(self.ld, ("_recv", "_send", "_build"))
            if self.ld._cuda is not None:
                time_calls(self.ld._cuda, ("wait_ready", "record_released"), self.client_times)

    def __len__(self):
        return len(self.ld)

    def __iter__(self):
        for b in self.ld:
            x, ei, y = b.x, b.edge_index, b.y
            if self.dev.type != "cuda" and x.device != self.dev:
                x, ei, y = x.to(self.dev), ei.to(self.dev), y.to(self.dev)
            yield step_inputs(b, x, ei, y)

    def close(self):
        self.ld.close()


class _StructFeed:
    """Base of the (b) and (c) paths: batches without features from loaderd
    (host slots), structure copied to the GPU from registered slot memory."""

    def __init__(self, args, split, shuffle, seed, dev, table):
        self.ld = StructLoader(args.socket, split=split, batch_size=args.batch_size, fanouts=args.fanouts,
                               shuffle=shuffle, seed=seed, device="cpu", slots=max(args.slots, 3),
                               release="manual", pyg=False, timeout=args.wait_timeout)
        self.dev, self.table = dev, table
        self.cuda = dev.type == "cuda"
        self.reg = []
        if self.cuda:
            # Register each slot's y, n_id and edge_index (not its unused x
            # region, which would then be allocated): copies out of the slots
            # run at DMA speed and asynchronously.
            base, _ = self.ld.slot_memory()
            o = self.ld.opened
            first = min(r.offset for r in o.regions if r.name != "x")
            for k in range(o.slots):
                lo = (base + k * o.slot_bytes + first) & ~4095
                hi = (base + (k + 1) * o.slot_bytes + 4095) & ~4095
                if host_register(lo, hi - lo):
                    self.reg.append(lo)

    def __len__(self):
        return len(self.ld)

    def close(self):
        for ptr in self.reg:
            host_unregister(ptr)
        self.ld.close()


class CPUGatherFeed(_StructFeed):
    """(b): torch.index_select from the host table into pinned memory, then
    an H2D copy on a side stream, one batch ahead of training."""

    def __init__(self, *a):
        super().__init__(*a)
        cap = self.ld.opened.region("n_id").shape[0]  # the most nodes a batch can have
        dim = self.table.x.size(1)
        pin = self.cuda
        self.bufs = [torch.empty((cap, dim), dtype=self.table.x.dtype, pin_memory=pin) for _ in range(2)]
        self.stream = torch.cuda.Stream(self.dev) if self.cuda else None
        self.copied = [None, None]
        self.gather_ms = []

    def _stage(self, b, k):
        """CPU gather of batch b into pinned buffer k and its H2D copies."""
        n, e = b.n_id.numel(), b.edge_index.size(1)
        if self.copied[k] is not None:
            self.copied[k].synchronize()  # the buffer's previous copy is done
        t0 = time.perf_counter()
        xb = self.bufs[k][:n]
        torch.index_select(self.table.x, 0, b.n_id, out=xb)
        self.gather_ms.append(1e3 * (time.perf_counter() - t0))
        if not self.cuda:
            return xb.clone(), b.edge_index.clone(), b.y.clone(), None
        with torch.cuda.stream(self.stream):
            x = xb.to(self.dev, non_blocking=True)
            ei = b.edge_index.to(self.dev, non_blocking=True)
            y = b.y.to(self.dev, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(self.stream)
        self.copied[k] = ev
        return x, ei, y, ev

    def __iter__(self):
        it = iter(self.ld)
        prev = None
        k = 0
        cur = next(it, None)
        staged = self._stage(cur, k) if cur is not None else None
        while cur is not None:
            nxt = next(it, None)
            x, ei, y, ev = staged
            if ev is not None:
                torch.cuda.current_stream(self.dev).wait_event(ev)
                for t in (x, ei, y):
                    t.record_stream(torch.cuda.current_stream(self.dev))
            item = step_inputs(cur, x, ei, y)
            if prev is not None:
                self.ld.release(prev)  # its copies were waited for before it was yielded
            yield item  # training of cur is enqueued when control comes back
            if ev is not None:
                ev.synchronize()  # cur's slot has been copied out
            prev = cur
            if nxt is not None:
                k ^= 1
                staged = self._stage(nxt, k)  # overlaps the GPU's training of cur
            cur = nxt
        if prev is not None:
            self.ld.release(prev)


class ResidentFeed(_StructFeed):
    """(c): the whole feature table in GPU memory, rows indexed on the GPU."""

    def __init__(self, args, split, shuffle, seed, dev, table, gpu_x):
        super().__init__(args, split, shuffle, seed, dev, table)
        self.gpu_x = gpu_x

    def __iter__(self):
        prev = None
        for b in self.ld:
            nid = b.n_id.to(self.dev, non_blocking=True)
            ei = b.edge_index.to(self.dev, non_blocking=True)
            y = b.y.to(self.dev, non_blocking=True)
            x = self.gpu_x.index_select(0, nid)
            ev = None
            if self.cuda:
                ev = torch.cuda.Event()
                ev.record()
            else:
                ei, y = ei.clone(), y.clone()
            if prev is not None:
                self.ld.release(prev)
            yield step_inputs(b, x, ei, y)
            if ev is not None:
                ev.synchronize()  # the slot's structure has been copied (training may still run)
            prev = b
        if prev is not None:
            self.ld.release(prev)


class PreloadedFeed(_CycledFeed):
    """train_only: `keep` batches taken from loaderd once and copied into GPU
    memory before timing, then cycled for len(feed) steps (an epoch's worth).
    What an epoch costs with loading taken away entirely."""

    def __init__(self, args, split, shuffle, seed, dev, keep=32):
        ld = gnnloader.Loader(args.socket, split=split, batch_size=args.batch_size, fanouts=args.fanouts,
                              shuffle=shuffle, seed=seed, device=str(dev), slots=args.slots, pyg=False,
                              timeout=args.wait_timeout)
        try:
            self.n = len(ld)
            self.batches = []
            for b in ld:
                self.batches.append(step_inputs(b, b.x.clone(), b.edge_index.clone(), b.y.clone()))
                if len(self.batches) >= keep:
                    break
        finally:
            ld.close()
        sync(dev)

    def close(self):
        self.batches = []


class FreshShapesFeed:
    """train_fresh's and train_mixed_fresh's training only: the steps of
    another epoch's batches (sampling seed `seed`; its first `n` when
    n > 0), each once, taken from loaderd before the clock starts. Each
    keeps its own edge_index, labels and hop sizes; its x is the first rows
    of one buffer as large as the largest batch can be (the features of the
    batches last copied in: a step's time does not depend on the values).
    So its steps have the shapes a real epoch's have, new ones as loaderd's
    batches do, where training only's 32 cycled batches repeat theirs: the
    libraries' choices for each GEMM shape (cuBLAS's heuristics) cost a
    step that meets a new shape, and loaderd's side alone paid that.

    About 15 MB of GPU memory a papers100M batch (18 GB an epoch): it stops
    storing batches while the device has less than `reserve` bytes free
    (the trainer's steps need theirs; a full GPU cache beside it may leave
    little), and then cycles those it has (`stored` says how many)."""

    def __init__(self, args, split, seed, dev, n=0, reserve=8 << 30):
        ld = gnnloader.Loader(args.socket, split=split, batch_size=args.batch_size, fanouts=args.fanouts,
                              shuffle=True, seed=seed, device=str(dev), slots=args.slots, pyg=False,
                              timeout=args.wait_timeout)
        self.batches, self.xbuf = [], None
        try:
            self.n = len(ld)
            for b in ld:
                x = b.x
                if self.xbuf is None:
                    cap = ld.opened.region("n_id").shape[0]  # the most nodes a batch can have
                    self.xbuf = torch.empty((cap, x.size(1)), dtype=x.dtype, device=x.device)
                self.xbuf[:x.size(0)].copy_(x)
                # Its view taken now: a step's feed does no more than
                # training only's (a slice a step costs the thread ~15 us).
                self.batches.append(step_inputs(b, self.xbuf[:x.size(0)], b.edge_index.clone(), b.y.clone()))
                if n and len(self.batches) >= n:
                    break
                if dev.type == "cuda" and len(self.batches) % 16 == 0 and torch.cuda.mem_get_info(dev)[0] < reserve:
                    break
        finally:
            ld.close()
        sync(dev)
        self.stored = len(self.batches)

    def __len__(self):
        return self.n

    def __iter__(self):
        """Each stored batch once, in order, then again from the first (a
        run longer than the batches stored repeats their shapes)."""
        for i in range(self.n):
            yield self.batches[i % len(self.batches)]

    def close(self):
        self.batches, self.xbuf = [], None


class SpinFeed:
    """train_spin: another feed's batches, the trainer's thread kept busy
    spin_us microseconds before each one is handed over (a busy loop, not a
    sleep: the thread stays on its CPU, as the client's calls would)."""

    def __init__(self, feed, spin_us):
        self.feed, self.spin_s = feed, spin_us / 1e6

    def __len__(self):
        return len(self.feed)

    def __iter__(self):
        for b in self.feed:
            end = time.perf_counter() + self.spin_s
            while time.perf_counter() < end:
                pass
            yield b

    def close(self):
        self.feed.close()


class HeldSlotsFeed(_CycledFeed):
    """train_slots: the first `keep` batches of an epoch taken from loaderd
    and held in their slots (never released, so the daemon has nothing to
    fill and stays idle), then cycled for len(feed) steps. The training reads
    the slots' memory as loaderd's trainers do, with no loading beside it:
    against train_only (the same steps on copies), what reading features from
    slots costs; against loaderd, what the daemon's work beside training
    costs."""

    def __init__(self, args, split, shuffle, seed, dev, keep=32):
        self.ld = gnnloader.Loader(args.socket, split=split, batch_size=args.batch_size, fanouts=args.fanouts,
                                   shuffle=shuffle, seed=seed, device=str(dev), slots=args.slots, pyg=False,
                                   release="manual", timeout=args.wait_timeout)
        self.n, self.dev = len(self.ld), dev
        self.held, self.batches = [], []
        try:
            # At most the trainer's slots: with fewer slots it cycles fewer
            # batches than train_only's 32 (each is a whole batch all the same).
            keep = min(keep, self.ld.opened.slots, self.n)
            for b in self.ld:
                self.held.append(b)
                self.batches.append(step_inputs(b, b.x, b.edge_index, b.y))
                if len(self.held) >= keep:
                    break
            sync(dev)
        except BaseException:
            self.close()
            raise

    def close(self):
        sync(self.dev)  # the last steps are done with the slots
        self.batches = []
        for b in self.held:
            self.ld.release(b)
        self.held = []
        self.ld.close()


def copy_table_to_gpu(table, dev):
    """The whole host table into GPU memory: DMA straight from the mapping
    when it can be registered read-only, else through two pinned staging
    buffers (CPU copy of one chunk while the other is copied H2D)."""
    t0 = time.perf_counter()
    x = table.x
    if dev.type != "cuda":
        return x, {"copy_s": 0.0, "registered": False}
    gpu_x = torch.empty(x.shape, dtype=x.dtype, device=dev)
    ptr, nbytes = x.data_ptr(), x.numel() * x.element_size()
    reg = host_register(ptr, nbytes, read_only=True)
    t1 = time.perf_counter()
    rows = max(1, (256 << 20) // (x.size(1) * x.element_size()))
    if reg:
        for s in range(0, x.size(0), rows):
            gpu_x[s:s + rows].copy_(x[s:s + rows], non_blocking=True)
    else:
        stage = [torch.empty((rows, x.size(1)), dtype=x.dtype, pin_memory=True) for _ in range(2)]
        done = [None, None]
        for i, s in enumerate(range(0, x.size(0), rows)):
            k = i % 2
            if done[k] is not None:
                done[k].synchronize()
            n = min(rows, x.size(0) - s)
            stage[k][:n].copy_(x[s:s + n])
            gpu_x[s:s + n].copy_(stage[k][:n], non_blocking=True)
            done[k] = torch.cuda.Event()
            done[k].record()
    torch.cuda.synchronize(dev)
    t2 = time.perf_counter()
    if reg:
        host_unregister(ptr)
    return gpu_x, {"register_s": t1 - t0, "copy_s": t2 - t1, "registered": reg,
                   "copy_GBps": nbytes / max(t2 - t1, 1e-9) / 1e9}
