"""gnnloader.allreduce: the gradient-exchange frames against the Go goldens
(ipc/testdata/ring/, ipc/ring_msgs_test.go), and the CPU path end to end
against a real loaderd: several ranks, odd sizes, every dtype, bit-identical
results; and a 2-process DDP run whose comm hook goes through loaderd, with
the same losses as gloo's all-reduce.
"""

import math
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

import torch  # noqa: E402

import gnnloader.allreduce as ar  # noqa: E402
from gnnloader import protocol as P  # noqa: E402

RING = ROOT / "ipc" / "testdata" / "ring"
LOADERD = os.environ.get("LOADERD", str(ROOT / "bin" / "loaderd"))


def _handle(seed):
    return bytes((seed + i) & 0xFF for i in range(64))


GOLDENS = {
    "register_grad": ar.RegisterGrad("sage", 1, 2, "cuda:1", 100 << 20),
    "register_grad_cpu": ar.RegisterGrad("cora", 0, 3, "cpu", 4096),
    "grad_registered_shm": ar.GradRegistered("shm", 4096, links=["cpu"]),
    "grad_registered_cuda": ar.GradRegistered("cuda", 100 << 20, 1, _handle(0x20), _handle(0x40), _handle(0x60),
                                              ["rank 1 (GPU 1) -> rank 0 (GPU 0): peer",
                                               "rank 0 (GPU 0) -> rank 1 (GPU 1): peer"]),
    "all_reduce": ar.AllReduce(7, 1000003, "bfloat16", "avg"),
    "all_reduce_done": ar.AllReduceDone(7),
}


class TestFrames(unittest.TestCase):
    def test_goldens(self):
        self.assertEqual(sorted(f.stem for f in RING.glob("*.bin")), sorted(GOLDENS))
        for name, want in GOLDENS.items():
            frame = (RING / f"{name}.bin").read_bytes()
            self.assertEqual(ar.encode(want), frame, name)
            self.assertEqual(ar.decode(frame), want, name)

    def test_bad(self):
        frame = bytearray(ar.encode(GOLDENS["grad_registered_cuda"]))
        with self.assertRaises(P.ProtocolError):
            ar.decode(bytes(frame[:-1]))
        with self.assertRaises(P.ProtocolError):
            ar.encode(ar.GradRegistered("cuda", 8, mem_handle=b"abc"))

    def test_module_is_callable(self):
        with self.assertRaises(ar.AllReduceError):
            ar(torch.zeros(3))  # gnnloader.allreduce(tensor) before init


class Daemon:
    def __init__(self):
        self.dir = tempfile.mkdtemp()
        self.socket = os.path.join(self.dir, "loaderd.sock")
        self.log = open(os.path.join(self.dir, "loaderd.log"), "w+")
        self.proc = subprocess.Popen([LOADERD, "serve", "--dataset", "synthetic:cora:0.5:3", "--socket", self.socket],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        t0 = time.time()
        while not os.path.exists(self.socket):
            if self.proc.poll() is not None or time.time() - t0 > 30:
                self.log.seek(0)
                raise RuntimeError("loaderd did not start:\n" + self.log.read())
            time.sleep(0.05)

    def close(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()


@unittest.skipUnless(os.path.exists(LOADERD), f"no loaderd at {LOADERD} (scripts/test.sh builds it)")
class TestEndToEndCPU(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon()

    @classmethod
    def tearDownClass(cls):
        cls.d.close()

    def _clients(self, job, world, nbytes):
        out = [None] * world
        errs = []

        def reg(r):
            try:
                out[r] = ar.GradClient(self.d.socket, job, r, world, nbytes, timeout=30)
            except Exception as e:  # noqa: BLE001
                errs.append(e)

        ts = [threading.Thread(target=reg, args=(r,)) for r in range(world)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        if errs:
            raise errs[0]
        return out

    def test_ranks_agree_and_sum(self):
        world = 3
        clients = self._clients("e2e", world, 1 << 16)
        self.assertEqual(clients[0].links, ["cpu"])
        g = torch.Generator().manual_seed(0)
        for n, dtype, op in [(1, torch.float32, "sum"), (1001, torch.float32, "avg"), (5000, torch.bfloat16, "sum"),
                             (777, torch.float16, "avg"), (16384, torch.float32, "sum")]:
            ins = [torch.rand(n, generator=g, dtype=torch.float64).mul(2).sub(1).to(dtype) for _ in range(world)]
            outs = [t.clone() for t in ins]
            ts = [threading.Thread(target=clients[r].allreduce, args=(outs[r], op)) for r in range(world)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            ref = sum(t.double() for t in ins)
            if op == "avg":
                ref = ref / world
            u = {torch.float32: 2.0 ** -24, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}[dtype]
            tol = (world + 1) * u * sum(t.double().abs() for t in ins) + 2.0 ** -24
            for r in range(world):
                self.assertTrue(torch.equal(outs[r].view(torch.int16 if dtype != torch.float32 else torch.int32),
                                            outs[0].view(torch.int16 if dtype != torch.float32 else torch.int32)),
                                f"rank {r} differs from rank 0 ({n} x {dtype})")
            self.assertTrue(bool(((outs[0].double() - ref).abs() <= tol).all()), f"{n} x {dtype} {op}")
        for c in clients:
            c.close()

    def test_peer_gone_between_rounds(self):
        # Rank 1 leaves before any round; rank 0, between rounds, is told by
        # the daemon at once and its next allreduce raises the daemon's
        # reason, not a broken pipe. The job can then register again.
        c0, c1 = self._clients("gone", 2, 1 << 12)
        c1.close()
        time.sleep(0.3)  # the daemon tells rank 0 and closes its connection
        with self.assertRaises(ar.AllReduceError) as cm:
            c0.allreduce(torch.ones(4))
        self.assertIn("left the gradient ring", str(cm.exception))
        (solo,) = self._clients("gone", 1, 1 << 12)
        self.assertTrue(torch.equal(solo.allreduce(torch.ones(4)), torch.ones(4)))
        solo.close()

    def test_close_during_allreduce(self):
        # Rank 0 waits in an allreduce that rank 1 never joins; closing it
        # from another thread ends that wait with an error and releases the
        # buffer only after it (no use after release); a later allreduce
        # raises, and a second close does nothing.
        c0, c1 = self._clients("closing", 2, 1 << 12)
        raised = []

        def run():
            try:
                c0.allreduce(torch.ones(8))
            except (ar.AllReduceError, EOFError, OSError) as e:
                raised.append(e)

        t = threading.Thread(target=run)
        t.start()
        time.sleep(0.3)
        self.assertTrue(t.is_alive(), "the allreduce did not wait for rank 1")
        t0 = time.monotonic()
        c0.close()
        t.join(10)
        self.assertFalse(t.is_alive(), "the allreduce still waits after close")
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual(len(raised), 1)
        self.assertTrue(c0._mem.closed)
        with self.assertRaises(ar.AllReduceError):
            c0.allreduce(torch.ones(8))
        c0.close()
        c1.close()

    def test_close_from_a_signal_handler_during_allreduce(self):
        # A SIGTERM-style handler that closes the client runs on the main
        # thread, inside the allreduce it interrupted: close must not wait
        # for that allreduce (it would wait for itself); the allreduce ends
        # with an error and releases the buffer as it leaves.
        import signal
        c0, c1 = self._clients("signalled", 2, 1 << 12)
        closed = []

        def handler(signum, frame):
            c0.close()
            closed.append(True)

        old = signal.signal(signal.SIGUSR1, handler)
        timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGUSR1))
        try:
            timer.start()
            t0 = time.monotonic()
            with self.assertRaises((ar.AllReduceError, EOFError, OSError)):
                c0.allreduce(torch.ones(8))  # rank 1 never joins
            self.assertLess(time.monotonic() - t0, 5)
        finally:
            timer.cancel()
            signal.signal(signal.SIGUSR1, old)
        self.assertEqual(closed, [True])
        self.assertTrue(c0._released)
        self.assertTrue(c0._mem.closed)
        with self.assertRaises(ar.AllReduceError):
            c0.allreduce(torch.ones(8))
        c1.close()

    def test_too_large(self):
        (c,) = self._clients("big", 1, 64)
        with self.assertRaises(ValueError):
            c.allreduce(torch.zeros(17))
        c.close()

    def test_ddp_hook_matches_gloo(self):
        losses = {}
        for hook in (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                port = 29000 + os.getpid() % 1000 + (7 if hook else 0)
                torch.multiprocessing.spawn(_ddp_worker, args=(2, self.d.socket, hook, tmp, port), nprocs=2, join=True)
                losses[hook] = [pathlib.Path(tmp, f"loss{r}").read_text().split() for r in range(2)]
                losses[hook] = [[float(x) for x in ls] for ls in losses[hook]]
        for r in range(2):
            self.assertEqual(len(losses[True][r]), 8)
            for a, b in zip(losses[True][r], losses[False][r]):
                self.assertTrue(math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6), (losses[True][r], losses[False][r]))


def _ddp_worker(rank, world, sock, hook, tmp, port):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    ddp = DDP(model)
    if hook:
        client = ar.GradClient(sock, f"ddp-{port}", rank, world, 1 << 20, timeout=60)
        ddp.register_comm_hook(client, ar.ddp_comm_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(100 + rank)
    out = []
    for _ in range(8):
        x = torch.randn(64, 16, generator=g)
        y = torch.randint(0, 4, (64,), generator=g)
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    with open(os.path.join(tmp, f"loss{rank}"), "w") as f:
        f.write(" ".join(repr(v) for v in out))
    if hook:
        client.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    unittest.main()
