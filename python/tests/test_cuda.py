"""The CUDA path end to end: a real loaderd with its GPU backend, the Python
client on cuda:0, checked against the CPU path of the same daemon.

Skipped when torch.cuda.is_available() is False, unless
GNNLOADER_REQUIRE_GPU=1 (scripts/gpu-check.sh), where that is a failure.
LOADERD names the daemon binary (default bin/loaderd).
"""

import os
import sys
import time
import unittest

import torch

sys.path.insert(0, os.path.dirname(__file__))
from test_loader import LOADERD, Daemon  # noqa: E402

import gnnloader  # noqa: E402
from gnnloader.cuda import _CudaArray  # noqa: E402

DATASET = os.environ.get("GNNLOADER_CUDA_DATASET", "synthetic:products:0.05:1")


def require_gpu():
    if not os.path.exists(LOADERD):
        raise unittest.SkipTest(f"{LOADERD} not built (scripts/test.sh builds it)")
    if not torch.cuda.is_available():
        if os.environ.get("GNNLOADER_REQUIRE_GPU") == "1":
            raise RuntimeError("GNNLOADER_REQUIRE_GPU=1 but torch.cuda.is_available() is False")
        raise unittest.SkipTest("no CUDA: torch.cuda.is_available() is False")


def wait_gpu_memory_back(test, before, timeout, what):
    """Waits until the GPU's free memory is back within 8 MiB of `before`
    (free bytes, all processes); fails the test after `timeout` seconds,
    with what() saying what happened. Returns the free bytes then."""
    import time
    deadline = time.monotonic() + timeout
    while True:
        after = torch.cuda.mem_get_info(0)[0]
        if after >= before - (8 << 20):
            return after
        test.assertLess(time.monotonic(), deadline,
                        f"GPU memory did not return: free {before} before, {after} after{what()}")
        time.sleep(0.05)


def late_read(b):
    """(b.x now, b.x as a kernel reads it ~0.2-0.4 s of GPU time later), both
    queued on the current stream after the batch's ready wait."""
    before = b.x.clone()
    result = torch.empty_like(b.x)
    torch.cuda._sleep(400_000_000)
    result.copy_(b.x)  # the late read of the slot
    return before, result


def take_and_release(g, it, n):
    """Takes n batches from `it`, each read on the GPU, and releases them."""
    for _ in range(n):
        nb = next(it)
        nb.x.sum()
        g.release(nb)


class CudaLoaderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_gpu()
        cls.daemon = Daemon(DATASET, "--gpus", "0", "--gpu-slot-memory", "1GiB")

    @classmethod
    def tearDownClass(cls):
        code = cls.daemon.stop()
        if code != 0:
            raise AssertionError(f"loaderd exited {code}")

    def loader(self, device, **kw):
        args = dict(split="train", batch_size=32, fanouts=[10, 5], seed=11, pyg=False, timeout=120)
        args.update(kw)
        return gnnloader.Loader(self.daemon.socket, device=device, **args)

    def test_matches_cpu_path(self):
        """A few hundred batches on cuda:0, every tensor equal to the CPU path's,
        every tensor a view inside its slot: the first epoch waiting on the
        slots' ready words, the second on their ready events (a client that
        predates the words, or a driver without stream memory operations)."""
        with self.loader("cuda:0") as g, self.loader("cpu") as c:
            self.assertEqual(g.opened.memory, "cuda")
            self.assertEqual(c.opened.memory, "shm")
            self.assertEqual(len(g), len(c))
            self.assertGreaterEqual(g.opened.ready_words, g.opened.slots * g.opened.slot_bytes)
            self.assertNotEqual(g._cuda.words, 0, "the client does not wait on the ready words")
            values, wait = [], g._cuda.wait_ready
            g._cuda.wait_ready = lambda slot, value=0: (values.append((slot, value)), wait(slot, value))
            n = 0
            for epoch in range(2):
                if epoch == 1:
                    words, g._cuda.words = g._cuda.words, 0  # the event path
                for bg, bc in zip(g, c):
                    lo, hi = g._cuda.slot_range(bg.slot)
                    for name in ("x", "y", "n_id", "edge_index", "e_id", "input_id"):
                        tg, tc = getattr(bg, name), getattr(bc, name)
                        self.assertEqual(tg.device, torch.device("cuda", 0), name)
                        self.assertEqual(tg.dtype, tc.dtype, name)
                        self.assertEqual(tuple(tg.shape), tuple(tc.shape), name)
                        if tg.numel():
                            ptr = tg.data_ptr()
                            self.assertTrue(lo <= ptr and ptr + tg.numel() * tg.element_size() <= hi,
                                            f"{name} is not a view inside slot {bg.slot}")
                        self.assertTrue(torch.equal(tg.cpu(), tc), f"epoch {epoch} batch {bg.index}: {name} differs")
                    if epoch == 0:  # the slot's word holds this fill's value while the batch is held
                        slot, value = values[-1]
                        word = torch.as_tensor(_CudaArray(g._cuda.words + 4 * slot, (1,), "<i4"), device="cuda:0")
                        # The stream waited for the first word of the fill; the
                        # daemon writes the others right after it.
                        deadline = time.monotonic() + 5
                        while int(word.item()) != value and time.monotonic() < deadline:
                            time.sleep(0.001)
                        self.assertEqual((slot, int(word.item())), (bg.slot, value))
                    self.assertEqual(bg.batch_size, bc.batch_size)
                    self.assertEqual(bg.num_sampled_nodes, bc.num_sampled_nodes)
                    self.assertEqual(bg.num_sampled_edges, bc.num_sampled_edges)
                    n += 1
            g._cuda.words = words
            self.assertGreaterEqual(n, 300)
            self.assertEqual(len(values), n)
            # One value a fill, rising fill by fill (protocol 5): the epoch
            # on words waited once a fill, not once a batch.
            firsts = [v for slot, v in values[:n // 2]]
            self.assertGreater(firsts[0], 0)
            self.assertEqual(firsts, sorted(firsts))
            self.assertLessEqual(firsts[-1] - firsts[0] + 1, len(firsts))
            print(f"\n{n} batches on cuda:0 equal to the CPU path's ({n // 2} on ready words, from "
                  f"{len(set(firsts))} fills, the rest on ready events)", file=sys.stderr)

    def test_slot_reuse_waits_for_release(self):
        """A slow kernel still reads slot k after the trainer released it,
        while loaderd fills the other slots and comes back to slot k: what
        the kernel reads is the batch it was given."""
        with self.loader("cuda:0", release="manual", slots=2, batch_size=256) as g:
            it = iter(g)
            stream = torch.cuda.current_stream()
            for round_ in range(3):
                b = next(it)
                before, result = late_read(b)
                g.release(b)  # records "released" after the late read
                # loaderd now refills this slot; take and release two batches
                # (the next one fills the other slot, the one after reuses this one).
                take_and_release(g, it, 2)
                stream.synchronize()
                self.assertTrue(torch.equal(result, before), f"round {round_}: slot {b.slot} overwritten under a reading kernel")
            for b in it:
                g.release(b)

    def test_deferred_release_waits_for_its_cover(self):
        """Releases sent together record one released event, the last
        one's (protocol 5): a slow kernel still reads a batch whose release
        went out deferred, and loaderd, cycling through all the slots, must
        not refill that slot until the covering event (recorded after the
        kernel on the same stream) is done."""
        with self.loader("cuda:0", release="manual", slots=32, batch_size=64) as g:
            self.assertEqual(g._release_hold, 4)
            recorded, record = [], g._cuda.record_released
            g._cuda.record_released = lambda slot, stream=None: (recorded.append(slot), record(slot, stream))
            it = iter(g)
            stream = torch.cuda.current_stream()
            for round_ in range(2):
                g._send_releases()  # none held: b's release and b2's go together
                b, b2 = next(it), next(it)
                before, result = late_read(b)
                recorded.clear()
                g.release(b)  # held
                g.release(b2)  # held too
                g._send_releases()  # as before a read that would wait: b deferred, b2's event recorded after the late read
                self.assertEqual(recorded, [b2.slot])
                take_and_release(g, it, 34)  # every other slot filled, b's reused
                stream.synchronize()
                self.assertTrue(torch.equal(result, before), f"round {round_}: slot {b.slot} overwritten under a reading kernel")
            for b in it:
                g.release(b)

    def test_bad_requests(self):
        """A GPU that does not exist, one not in --gpus, slots too big: an Error
        to that client, the daemon and a trainer already on the GPU carry on."""
        n = torch.cuda.device_count()
        with self.loader("cuda:0") as good:
            it = iter(good)
            first = next(it)
            x0 = first.x.clone()
            for device, kw, code in [("cuda:7", {}, "bad_request"), (f"cuda:{n}", {}, "bad_request"),
                                     ("cuda:1", {}, "bad_request"),
                                     # a batch_size over the split's ~9,800 seeds is sized by the split:
                                     # 16 slots of ~200 MB for [15, 10, 5], over --gpu-slot-memory 1GiB
                                     ("cuda:0", dict(slots=16, batch_size=100_000, fanouts=[15, 10, 5]), "busy")]:
                with self.assertRaises(gnnloader.LoaderError) as cm:
                    self.loader(device, **kw)
                self.assertEqual(cm.exception.code, code, str(cm.exception))
                print(f"\n{device} {kw}: {cm.exception}", file=sys.stderr)
            self.assertTrue(torch.equal(first.x.cpu(), x0.cpu()))
            k = 1
            for _ in it:
                k += 1
            self.assertEqual(k, len(good))
        self.assertIsNone(self.daemon.proc.poll(), "loaderd died")


class CurrentStreamTest(unittest.TestCase):
    """The client's getter of the current stream's handle (torch's raw one
    where torch has it) gives what torch.cuda.current_stream gives: on the
    default stream, inside `with torch.cuda.stream(s)`, and for a device
    that is not the current one."""

    def test_matches_torch(self):
        require_gpu()
        from gnnloader.cuda import _current_stream
        for index in range(torch.cuda.device_count()):
            self.assertEqual(_current_stream(index),
                             (torch.cuda.current_stream(index).cuda_stream, torch.cuda.current_device()))
            s = torch.cuda.Stream(device=index)
            with torch.cuda.device(index), torch.cuda.stream(s):
                self.assertEqual(_current_stream(index), (s.cuda_stream, index))
                self.assertNotEqual(s.cuda_stream, 0)


class KilledCudaTrainerTest(unittest.TestCase):
    """Issue 8 on the GPU: a trainer with CUDA slots killed with SIGKILL; within
    a second loaderd frees its slots, and the GPU's memory returns to its level
    before the trainer came."""

    def test_gpu_memory_returns(self):
        require_gpu()
        import signal
        import subprocess
        import time
        d = Daemon(DATASET, "--gpus", "0")
        try:
            torch.cuda.init()
            time.sleep(0.5)
            before = torch.cuda.mem_get_info(0)[0]  # free bytes, all processes
            code = ("import os, sys, time; sys.path.insert(0, %r); import torch, gnnloader;"
                    "ld = gnnloader.Loader(%r, batch_size=1024, fanouts=[15, 10, 5], device='cuda:0', slots=3);"
                    "b = next(iter(ld)); torch.cuda.synchronize(); print('held', flush=True); time.sleep(60)"
                    ) % (os.path.join(os.path.dirname(__file__), "..", "..", "python"), d.socket)
            p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
            self.assertEqual(p.stdout.readline().strip(), "held")
            during = torch.cuda.mem_get_info(0)[0]
            self.assertLess(during, before - (64 << 20), "the trainer's slots should take GPU memory")
            p.send_signal(signal.SIGKILL)
            p.wait()
            killed = time.monotonic()
            while "trainer disconnected without goodbye" not in d.logs():
                self.assertLess(time.monotonic() - killed, 1.0, "loaderd did not notice within 1 s")
                time.sleep(0.01)
            after = wait_gpu_memory_back(self, before, 10, lambda: f" ({during} with the trainer)")
            print(f"GPU free memory: {before >> 20} MiB before, {during >> 20} MiB with the trainer, "
                  f"{after >> 20} MiB {time.monotonic() - killed:.2f} s after SIGKILL", file=sys.stderr)
        finally:
            self.assertEqual(d.stop(), 0)


class KilledMidStepTest(unittest.TestCase):
    """A trainer killed in the middle of a step, its release records still
    queued behind its kernels (they die with its context, never complete):
    loaderd waits for releases on the host, never on its streams, so its
    GPU goes on serving. Before that fix (a stream's wait on the record),
    this hung about one run in two on an H100: the next trainer's Open
    stuck in cuModuleLoadData behind the stuck stream, and loaderd could
    not be stopped. The next trainer must get an epoch, and the killed
    one's GPU memory must come back (its session closed). (Without MPS;
    under MPS a client killed with work in flight is a hazard of its own.)"""

    def test_next_trainer_is_served(self):
        require_gpu()
        import signal
        import subprocess
        import time
        d = Daemon(DATASET, "--gpus", "0")
        py = os.path.join(os.path.dirname(__file__), "..", "..", "python")
        p, dumped = None, False
        try:
            torch.cuda.init()
            time.sleep(0.5)
            before = torch.cuda.mem_get_info(0)[0]
            # Each step sleeps about a second on the GPU before it touches
            # the batch; the client records the previous slot's release after
            # it, so three steps in, releases are queued behind seconds of
            # kernels when the trainer dies.
            code = ("import sys; sys.path.insert(0, %r); import torch, gnnloader;"
                    "ld = gnnloader.Loader(%r, batch_size=1024, fanouts=[15, 10, 5], device='cuda:0', slots=4);"
                    "n = 0\n"
                    "for b in ld:\n"
                    "    torch.cuda._sleep(2_000_000_000); b.x.sum(); n += 1\n"
                    "    if n == 3: print('busy', flush=True)\n"
                    ) % (py, d.socket)
            p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
            import select
            ready, _, _ = select.select([p.stdout], [], [], 120)
            if not ready:
                p.kill()
                p.wait()
                self.fail("the first trainer did not get three batches within 120 s:\n" + d.logs()[-3000:])
            self.assertEqual(p.stdout.readline().strip(), "busy")
            p.send_signal(signal.SIGKILL)
            p.wait()
            killed = time.monotonic()
            # The next trainer prints its Python stacks if it hangs (faulthandler).
            nxt = ("import faulthandler, sys; faulthandler.dump_traceback_later(55, exit=True);"
                   "sys.path.insert(0, %r); import torch, gnnloader;"
                   "ld = gnnloader.Loader(%r, batch_size=1024, fanouts=[15, 10, 5], device='cuda:0', slots=4);"
                   "n = sum(1 for _ in ld); torch.cuda.synchronize(); ld.close(); print('epoch', n, flush=True)"
                   ) % (py, d.socket)
            try:
                out = subprocess.run([sys.executable, "-c", nxt], capture_output=True, text=True, timeout=60)
            except subprocess.TimeoutExpired as e:
                out = e
            if not (isinstance(out, subprocess.CompletedProcess) and out.returncode == 0):
                logs, dumped = d.dump(), True
                err = out.stderr or ""
                self.fail("the next trainer was not served an epoch within 60 s of the killed one;\n"
                          f"its stderr (end): {err[-3000:] if isinstance(err, str) else err.decode(errors='replace')[-3000:]}\n"
                          f"loaderd's goroutines in the serve and cudaext packages:\n{serve_stacks(logs)}")
            self.assertTrue(out.stdout.startswith("epoch "), out.stdout)
            wait_gpu_memory_back(self, before, 30, lambda: "\n" + d.logs()[-3000:])
            print(f"killed mid-step: next trainer's epoch done and memory back {time.monotonic() - killed:.1f} s after "
                  "SIGKILL", file=sys.stderr)
        finally:
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
            if dumped:
                d.cleanup()
            else:
                self.assertEqual(d.stop(), 0)


class DaemonKilledMidFillTest(unittest.TestCase):
    """loaderd killed (SIGKILL, the OOM killer) after it said BatchReady and
    before its fill wrote the slot's ready word: the fill dies with its
    context, and the trainer's stream, made to wait for the word, with the
    step queued behind it, would wait for ever; closing the loader (which
    waits for that stream before it unmaps the slots) hung with it. Here
    the unfinished fill is a wait for a value past the word's (the daemon
    never writes it), then the daemon is killed: the loader's error comes,
    close() returns, the queued step finishes, and it read zeros, not a
    half-written slot (CudaSlots.unblock_waits)."""

    def test_close_ends_the_wait_and_the_step_reads_zeros(self):
        require_gpu()
        import subprocess
        d = Daemon(DATASET, "--gpus", "0")
        py = os.path.join(os.path.dirname(__file__), "..", "..", "python")
        code = ("import sys; sys.path.insert(0, %r); import torch, gnnloader\n"
                "ld = gnnloader.Loader(%r, batch_size=256, fanouts=[10, 5], device='cuda:0', slots=4)\n"
                "import faulthandler; faulthandler.dump_traceback_later(45)\n"
                "it = iter(ld); b = next(it); torch.cuda.synchronize()\n"
                "cs, slot = ld._cuda, gnnloader.batch_info(b).slot\n"
                "# The step's kernels run once first: CUDA loads a kernel at its first\n"
                "# launch (lazy loading), which waits for the device, here for ever.\n"
                "warm = b.x.abs().sum() + b.x.numel(); torch.cuda.synchronize()\n"
                "assert cs.words and slot in cs.waited, 'no ready words: nothing to test'\n"
                "cs.wait_ready(slot, cs.waited[slot] + 1000)  # a fill the daemon will not finish\n"
                "total = b.x.abs().sum() + b.x.numel()  # a step reading the slot, queued behind it\n"
                "print('waiting', b.x.numel(), flush=True); sys.stdin.readline()\n"
                "try:\n"
                "    next(it)\n"
                "except gnnloader.LoaderError as e:\n"
                "    print('lost', e.code, flush=True)\n"
                "ld.close(); torch.cuda.synchronize(); print('step', float(total), flush=True)\n"
                ) % (py, d.socket)
        p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            import select
            ready, _, _ = select.select([p.stdout], [], [], 60)
            if not ready:
                p.kill()
                self.fail("the trainer did not get its first batch within 60 s:\n" + p.stderr.read()[-3000:])
            first = p.stdout.readline().split()
            self.assertEqual(first[:1], ["waiting"], p.stderr.read() if p.poll() is not None else "")
            numel = int(first[1])
            d.proc.kill()
            try:
                d.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                # The killed daemon does not finish exiting: say where it is
                # (its state, flags and kernel wait channel) before failing.
                pid = d.proc.pid
                where = {}
                for name in ("stat", "wchan", "stack"):
                    try:
                        with open(f"/proc/{pid}/{name}") as f:
                            where[name] = f.read()[-2000:]
                    except OSError as e:
                        where[name] = repr(e)
                p.kill()
                self.fail(f"loaderd did not exit within 20 s of SIGKILL while the trainer waited for its ready "
                          f"word: {where}")
            p.stdin.write("\n")
            p.stdin.flush()
            try:
                out, err = p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
                self.fail(f"the trainer hung after loaderd was killed mid-fill:\n{out}\n{err[-3000:]}")
            self.assertEqual(p.returncode, 0, err[-3000:])
            lines = out.splitlines()
            self.assertTrue(lines[0].startswith("lost "), out)
            # The slot was zeroed before the word: |x| sums to 0, so the step
            # gives x's element count and nothing from a half-written slot.
            self.assertEqual(lines[-1], f"step {float(numel)}", out)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            d.cleanup()


def serve_stacks(logs, limit=6000):
    """The goroutines of a Go stack dump (loaderd after SIGQUIT) that run
    code of the serve, pingpong, gather or cudaext packages, the cgo calls
    among them first."""
    blocks = [b for b in logs.split("\n\n") if b.startswith("goroutine ")
              and any(f"{pkg}." in b for pkg in ("serve", "pingpong", "gather", "cudaext"))]
    blocks.sort(key=lambda b: "_Cfunc_" not in b)
    return "\n\n".join(blocks)[:limit] or logs[-limit:]


class DriverTooOldTest(unittest.TestCase):
    def test_kernels_the_driver_cannot_load_stop_loaderd_at_start(self):
        """Kernels newer than the driver (here: PTX of a version no driver
        knows) stop loaderd at start-up with a clear message, no crash."""
        require_gpu()
        import subprocess
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            ptx = os.path.join(tmp, "future.ptx")
            with open(ptx, "w") as f:
                f.write(".version 99.0\n.target sm_90\n.address_size 64\n")
            env = dict(os.environ, GNNLOADER_KERNELS=ptx)
            r = subprocess.run([LOADERD, "serve", "--dataset", "synthetic:cora:0.5:1", "--socket",
                                os.path.join(tmp, "s.sock")], env=env, capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("cannot load the gather kernels", r.stderr)
            self.assertNotIn("panic", r.stderr)
            print("\n" + r.stderr.strip().splitlines()[-1], file=sys.stderr)


class CudaRuntimeMissingTest(unittest.TestCase):
    def test_clear_error_without_runtime(self):
        """A client whose CUDA runtime cannot be found gets a clear LoaderError."""
        require_gpu()
        from gnnloader import _cudart as cuda  # where the runtime is found and kept
        d = Daemon("synthetic:cora:0.5:1", "--gpus", "0")
        saved = cuda._runtime
        try:
            cuda._runtime = None
            os.environ["GNNLOADER_CUDART"] = "/nonexistent/libcudart.so"
            orig = cuda._Runtime.__init__

            def broken(self, path, driver):
                raise OSError(f"{path}: cannot open")
            cuda._Runtime.__init__ = broken
            try:
                with self.assertRaises(gnnloader.LoaderError) as cm:
                    gnnloader.Loader(d.socket, device="cuda:0", pyg=False, timeout=60)
                self.assertIn("cannot find the CUDA runtime", str(cm.exception))
                print(f"\n{cm.exception}", file=sys.stderr)
            finally:
                cuda._Runtime.__init__ = orig
                del os.environ["GNNLOADER_CUDART"]
            with gnnloader.Loader(d.socket, device="cuda:0", pyg=False, timeout=60) as ok:
                self.assertEqual(next(iter(ok)).x.device.type, "cuda")
        finally:
            cuda._runtime = saved
            self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    unittest.main()
