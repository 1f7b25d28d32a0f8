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
  loaderd   loaderd's GPU slots (CUDA zero-copy gather), training
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
  pcie      pinned H2D memcpy bandwidth (the bound for 'loader')

GraphSAGE: 3 layers (mean aggregation, root weight: PyG's SAGEConv), hidden
256, fanouts [15,10,5], batch 1024, layers trimmed to the hops they need (as
PyG's trim_to_layer), Adam lr 0.003, dropout 0.5. After the epoch: accuracy
on the valid split with the same fanouts and a fixed sampling seed.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import gnnloader  # noqa: E402
from gnnloader.table import StructLoader, open_table  # noqa: E402


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
        reads hops 0..L-l and writes hops 0..L-l-1."""
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
            "gather_bytes": d("gnnloader_gather_bytes_total"),
            "swept_batches": d("gnnloader_swept_batches_total"), "filled_batches": d("gnnloader_gather_seconds_count"),
            "rows_looked_up": d("gnnloader_gpu_rows_looked_up_total"),
            "cache_hit_bytes": d("gnnloader_gpu_cache_hit_bytes_total"),
            "pcie_read_bytes": d("gnnloader_gpu_pcie_read_bytes_total")}


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


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


# -- feature paths -------------------------------------------------------------
# Each yields (x, edge_index, y, batch_size, nodes, edges, cleanup) on the device,
# x already available to the current stream.

class LoaderdFeed:
    """loaderd's GPU slots (or CPU slots on a CPU-only machine)."""

    def __init__(self, args, split, shuffle, seed, dev):
        self.ld = gnnloader.Loader(args.socket, split=split, batch_size=args.batch_size, fanouts=args.fanouts,
                                   shuffle=shuffle, seed=seed, device=str(dev), slots=args.slots, pyg=False)
        self.dev = dev
        self.row_bytes = None

    def __len__(self):
        return len(self.ld)

    def __iter__(self):
        for b in self.ld:
            x, ei, y = b.x, b.edge_index, b.y
            if self.dev.type != "cuda" and x.device != self.dev:
                x, ei, y = x.to(self.dev), ei.to(self.dev), y.to(self.dev)
            yield x, ei, y, b.batch_size, list(b.num_sampled_nodes), list(b.num_sampled_edges), b.n_id.numel()

    def close(self):
        self.ld.close()


class _StructFeed:
    """Base of the (b) and (c) paths: batches without features from loaderd
    (host slots), structure copied to the GPU from registered slot memory."""

    def __init__(self, args, split, shuffle, seed, dev, table):
        self.ld = StructLoader(args.socket, split=split, batch_size=args.batch_size, fanouts=args.fanouts,
                               shuffle=shuffle, seed=seed, device="cpu", slots=max(args.slots, 3),
                               release="manual", pyg=False)
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
            item = (x, ei, y, cur.batch_size, list(cur.num_sampled_nodes), list(cur.num_sampled_edges),
                    cur.n_id.numel())
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
            yield x, ei, y, b.batch_size, list(b.num_sampled_nodes), list(b.num_sampled_edges), b.n_id.numel()
            if ev is not None:
                ev.synchronize()  # the slot's structure has been copied (training may still run)
            prev = b
        if prev is not None:
            self.ld.release(prev)


class PreloadedFeed:
    """train_only: `keep` batches taken from loaderd once and copied into GPU
    memory before timing, then cycled for len(feed) steps (an epoch's worth).
    What an epoch costs with loading taken away entirely."""

    def __init__(self, args, split, shuffle, seed, dev, keep=32):
        ld = gnnloader.Loader(args.socket, split=split, batch_size=args.batch_size, fanouts=args.fanouts,
                              shuffle=shuffle, seed=seed, device=str(dev), slots=args.slots, pyg=False)
        try:
            self.n = len(ld)
            self.batches = []
            for b in ld:
                self.batches.append((b.x.clone(), b.edge_index.clone(), b.y.clone(), b.batch_size,
                                     list(b.num_sampled_nodes), list(b.num_sampled_edges), b.n_id.numel()))
                if len(self.batches) >= keep:
                    break
        finally:
            ld.close()
        sync(dev)

    def __len__(self):
        return self.n

    def __iter__(self):
        for i in range(self.n):
            yield self.batches[i % len(self.batches)]

    def close(self):
        self.batches = []


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
    timer = Timer(dev)
    acc = torch.zeros((), device=dev)
    loss_sum = torch.zeros((), device=dev)
    nodes_total = batches = 0
    partial = False
    t0 = time.perf_counter()
    for x, ei, y, bs, nodes, edges, nn in feed:
        s = timer.start()
        if touch_only:
            acc += x.sum()
        else:
            opt.zero_grad(set_to_none=True)
            out = model(x, ei, nodes, edges)
            loss = F.cross_entropy(out, y[:bs])
            loss.backward()
            opt.step()
            loss_sum += loss.detach()
        timer.stop(s)
        nodes_total += nn
        batches += 1
        if max_batches and batches >= max_batches:
            break
        if args.hard_end and time.time() > args.hard_end:
            partial = True
            break
    sync(dev)
    wall = time.perf_counter() - t0
    steps = timer.ms()
    r = {"batches": batches, "wall_s": wall, "batches_per_s": batches / wall, "ms_per_batch": 1e3 * wall / max(batches, 1),
         "step_ms": sum(steps) / max(len(steps), 1), "nodes_per_batch": nodes_total / max(batches, 1)}
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


def train_variant(args, name, make_feed, dev, info, evaluate_after=True):
    torch.manual_seed(args.seed)
    if dev.type == "cuda":
        torch.cuda.manual_seed(args.seed)
    model = SAGE(info["feature_dim"], args.hidden, info["num_classes"], layers=len(args.fanouts)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    feed = make_feed("train", True, args.seed)
    try:
        r = run_epoch(args, feed, dev, model, opt, max_batches=args.max_batches)
        if hasattr(feed, "gather_ms") and feed.gather_ms:
            r["cpu_gather_ms"] = sum(feed.gather_ms) / len(feed.gather_ms)
    finally:
        feed.close()
    if evaluate_after and not args.no_eval and not (args.hard_end and time.time() > args.hard_end):
        t = time.perf_counter()
        r["valid_acc"] = evaluate(args, model, make_feed, dev)
        r["eval_s"] = time.perf_counter() - t
    return r


def pcie_bound(dev, nbytes=1 << 30, reps=5):
    """Pinned H2D memcpy bandwidth (GB/s)."""
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
    best.sort()
    return best[len(best) // 2]


def render(paths):
    """The issue-6 table (markdown) from bench JSON files and meta.json."""
    runs, meta = {}, {}
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
        if name.endswith("cpu"):
            gat = r.get("cpu_gather_ms")
        elif name.endswith("resident") or name.endswith("train_only"):
            gat = None
        else:
            gat = d.get("gather_fill_ms")
        train = None if name.endswith("loader") else r.get("step_ms")
        stages = [v for v in (samp, gat, train) if v]
        ov = (sum(stages) - r["ms_per_batch"]) / sum(stages) if stages else None
        part = " (partial)" if r.get("partial") or r["batches"] < ds.get("batches", 0) else ""
        print(f"| {name}{part} | {f1(r['wall_s'])} | {r['batches']} | {f1(r['batches_per_s'])} | {f1(r['ms_per_batch'])} | "
              f"{f1(samp)} | {f1(gat)} | {f1(train)} | {'-' if ov is None else f'{100 * ov:.0f}%'} | "
              f"{f1(r.get('feature_GBps'))} | {f1(r.get('valid_acc', None) and 100 * r['valid_acc'])} |")
    lo, ld, res, cpu, tro = (runs.get(k, {}) for k in ("loader", "loaderd", "resident", "cpu", "train_only"))
    print()
    if pc and lo.get("batches"):
        byts = lo["nodes_per_batch"] * rb * lo["batches"]
        bound = byts / (pc * 1e9)
        print(f"- PCIe bound: {byts / 1e9:.1f} GB of feature rows in {lo['batches']} batches / {pc:.1f} GB/s pinned "
              f"memcpy = {bound:.1f} s; loader only {lo['wall_s']:.1f} s = {100 * bound / lo['wall_s']:.0f}% of the bound "
              f"(target 90%)")
    if ld.get("wall_s") and res.get("wall_s"):
        print(f"- loaderd epoch / resident epoch = {ld['wall_s'] / res['wall_s']:.2f} (target <= 1.05)")
    if ld.get("wall_s") and tro.get("wall_s"):
        print(f"- loaderd epoch / training-only epoch = {ld['wall_s'] / tro['wall_s']:.2f} (target <= 1.10); "
              f"training only {tro['ms_per_batch']:.2f} ms a batch ({tro['step_ms']:.2f} ms of GPU time a step)")
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
                print(f"- (d) {lab} {v}: {o['ms_per_batch']:.1f} ms/batch over {o['batches']} batches, against "
                      f"{base['ms_per_batch']:.1f} in the main run ({o['ms_per_batch'] / base['ms_per_batch']:.2f}x)")
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
            print(f"- {name}: {d.get('swept_batches', 0):.0f} of {d['filled_batches']:.0f} batches filled in multi-batch sweeps")
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
    p.add_argument("--max-batches", type=int, default=0, help="stop an epoch after this many batches (0 = whole)")
    p.add_argument("--no-eval", action="store_true")
    p.add_argument("--label", default="", help="prefix of the variants' names in the output (e.g. mps)")
    p.add_argument("--deadline", type=float, default=0, help="unix time after which no new variant starts")
    p.add_argument("--hard-end", type=float, default=0, help="unix time at which a running epoch stops (reported as partial)")
    p.add_argument("--train-stream", choices=["default", "high"], default="default",
                   help="the CUDA stream training runs on: torch's default, or one of the highest priority")
    p.add_argument("--json-out", default="")
    p.add_argument("--render", nargs="*", default=None, help="print the issue-6 table from these JSON files and exit")
    args = p.parse_args()
    if args.render is not None:
        render(args.render)
        return
    args.fanouts = [int(f) for f in args.fanouts.split(",")]
    dev = torch.device(args.device)
    torch.set_num_threads(os.cpu_count() or 1)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
        torch.zeros(1, device=dev)  # the context, before any measurement
    res = {"device": str(dev), "variants": {}, "args": {k: v for k, v in vars(args).items()}}
    if dev.type == "cuda":
        res["gpu"] = torch.cuda.get_device_name(dev)
    names = [v for v in args.variants.split(",") if v]
    table = None
    if args.table_socket and any(v in ("cpu", "resident") for v in names):
        t = time.perf_counter()
        table = open_table(args.table_socket)
        res["table"] = dict(table.info, map_s=time.perf_counter() - t)
    with gnnloader.Loader(args.socket, split="train", batch_size=args.batch_size, fanouts=args.fanouts,
                          device="cpu", slots=1, pyg=False, release="manual") as probe:
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

    for v in names:
        if args.deadline and time.time() > args.deadline:
            res["variants"][out(v)] = {"skipped": "deadline"}
            print(f"[{out(v)}] skipped: past the deadline", flush=True)
            continue
        before = scrape(args.metrics_url)
        free0 = gpu_free(dev)
        mem = {}
        try:
            if v == "pcie":
                r = {"GBps": pcie_bound(dev)}
            elif v == "loader":
                feed = LoaderdFeed(args, "train", True, args.seed, dev)
                mem = {"gpu_bytes_added": free0 - gpu_free(dev), "slot_bytes": feed.ld.opened.slots * feed.ld.opened.slot_bytes,
                       "daemon_mem_1": proc_mem(args.daemon_pid), "gpu_apps_MiB": gpu_apps()}
                second = None
                if dev.type == "cuda" and not args.label:  # a second trainer: what it adds
                    f1 = gpu_free(dev)
                    second = gnnloader.Loader(args.socket, split="train", batch_size=args.batch_size,
                                              fanouts=args.fanouts, device=str(dev), rank=0, world_size=1,
                                              slots=args.slots, pyg=False)
                    mem["second_gpu_bytes_added"] = f1 - gpu_free(dev)
                    mem["daemon_mem_2"] = proc_mem(args.daemon_pid)
                    second.close()
                    time.sleep(0.5)
                try:
                    r = run_epoch(args, feed, dev, touch_only=True, max_batches=args.max_batches)
                finally:
                    feed.close()
            elif v == "loaderd":
                r = train_variant(args, out(v), lambda s, sh, sd: LoaderdFeed(args, s, sh, sd, dev), dev, info)
            elif v == "train_only":
                # No accuracy: it trains on `keep` batches over and over.
                r = train_variant(args, out(v), lambda s, sh, sd: PreloadedFeed(args, s, sh, sd, dev), dev, info,
                                  evaluate_after=False)
            elif v == "cpu":
                r = train_variant(args, out(v), lambda s, sh, sd: CPUGatherFeed(args, s, sh, sd, dev, table), dev, info)
            elif v == "resident":
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
                raise SystemExit(f"unknown variant {v!r}")
        except Exception as e:  # noqa: BLE001 - report and go on with the next variant
            import traceback
            traceback.print_exc()
            r = {"error": f"{type(e).__name__}: {e}"}
        after = scrape(args.metrics_url)
        if before and v != "pcie":
            r["daemon"] = daemon_stage_ms(before, after)
            if r.get("batches"):
                r["feature_GBps"] = r["nodes_per_batch"] * row_bytes * r["batches_per_s"] / 1e9
        r.update(mem)
        r["daemon_mem"] = proc_mem(args.daemon_pid)
        if dev.type == "cuda":
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
