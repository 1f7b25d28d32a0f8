"""What each of the Python client's per-batch operations costs the thread
that issues the training steps, one at a time, on the machine it runs on (an
experiment aid; session 20). A CUDA Loader of 64 slots over SOCKET takes one
batch, then each operation is repeated and timed alone: slicing a slot's
CUDA tensor (three ways), building the batch, decoding its frame, the
current-stream lookup, the stream wait on the ready word and the released
event's record, and a bare ctypes call for scale.

    python3 scripts/probes/client_ops.py SOCKET [PYTHON_DIR]
"""
import ctypes
import sys
import timeit

if __name__ == "__main__":  # imported (client_cold.py), the importer has set the path
    sys.path.insert(0, sys.argv[2] if len(sys.argv) > 2 else "python")
import gnnloader  # noqa: E402
import torch  # noqa: E402
from gnnloader import cuda as gc  # noqa: E402
from gnnloader import protocol as p  # noqa: E402


def us(f, n=20000):
    f()
    return min(timeit.repeat(f, number=n, repeat=3)) / n * 1e6


def first_batch(socket_path, device):
    """A Loader of 64 slots over socket_path on device, an iterator over
    its epoch, and the BatchReady of the batch the iterator has yielded
    (client_cold.py uses it too)."""
    ld = gnnloader.Loader(socket_path, split="train", batch_size=1024, fanouts=[15, 10, 5], slots=64,
                          device=device, pyg=False)
    got = []
    recv = ld._recv

    def keep():
        m = recv()
        got.append(m)
        return m
    ld._recv = keep
    it = iter(ld)
    next(it)
    return ld, it, got[0]


def main():
    ld, it, m = first_batch(sys.argv[1], "cuda:0")
    torch.cuda.synchronize()
    flat = ld._flat[m.slot]
    t = next(v[1] for v in flat if v[0] == "n_id")
    c = int(m.counts[[v[0] for v in flat].index("n_id")])
    rows = [f"torch {torch.__version__}, {len(flat)} regions: {[v[0] for v in flat]}"]
    rows.append(f"CUDA t[:c]            {us(lambda: t[:c]):7.2f} us")
    rows.append(f"CUDA t.narrow(0,0,c)  {us(lambda: t.narrow(0, 0, c)):7.2f} us")
    rows.append(f"CUDA t.as_strided     {us(lambda: t.as_strided((c,), (1,))):7.2f} us")
    cpu = torch.empty(t.numel(), dtype=t.dtype)
    rows.append(f"CPU t[:c]             {us(lambda: cpu[:c]):7.2f} us")
    rows.append(f"_build (whole batch)  {us(lambda: ld._build(m)):7.2f} us")
    rows.append(f"check_batch           {us(lambda: ld.opened.check_batch(m)):7.2f} us")
    frame = p.marshal(m)
    rows.append(f"unmarshal BatchReady  {us(lambda: p.unmarshal(frame)):7.2f} us")
    rel = p.Release(slot=m.slot, epoch=m.epoch, index=m.index)
    rows.append(f"marshal Release       {us(lambda: p.marshal(rel)):7.2f} us")
    rows.append(f"_current_stream       {us(lambda: gc._current_stream(0)):7.2f} us")
    cs = ld._cuda
    rows.append(f"wait_ready (reached)  {us(lambda: cs.wait_ready(m.slot, m.ready_value), 5000):7.2f} us")
    stream, _ = gc._current_stream(0)
    if cs.words:
        addr = cs.words + 4 * m.slot
        rows.append(f"  raw wait_value      {us(lambda: cs.rt.wait_value(stream, addr, m.ready_value), 5000):7.2f} us")
    rows.append(f"record_released       {us(lambda: cs.record_released(m.slot), 5000):7.2f} us")
    ev = cs.released[m.slot]
    rows.append(f"  raw event record    {us(lambda: cs.rt.record(ev, stream), 5000):7.2f} us")
    libc = ctypes.CDLL(None)
    rows.append(f"ctypes getpid         {us(lambda: libc.getpid()):7.2f} us")
    torch.cuda.synchronize()
    print("\n".join(rows), flush=True)
    it.close()
    ld.close()


if __name__ == "__main__":
    main()
