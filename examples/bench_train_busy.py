"""bench_train.py's second trainer process (train_busy, train_paced): a
consumer of loaderd's batches beside the trainer under test, which runs no
client of its own."""
from __future__ import annotations

import os
import sys
import time


class BusyConsumer:
    """A second trainer process that takes loaderd's batches as fast as the
    daemon fills them (x.sum() on each, like the loader variant) until
    stopped: the daemon's full load, without feeding the trainer under test
    (train_busy). With pace_ms > 0 it takes one batch every pace_ms and
    reads none of it (train_paced): the daemon's work at a training loop's
    pace, beside a trainer that runs no client, so that train_paced against
    train_only is what the daemon's work costs the steps, and loaderd
    against train_paced what the client's calls on the trainer's thread
    cost."""

    # SIGTERM only sets a flag: the process then finishes its GPU work and
    # says goodbye. A CUDA process killed with work in flight can leave an
    # MPS server (and the other clients) hung, which the benchmark runs under.
    _CODE = (
        "import signal, sys, torch\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "import gnnloader\n"
        "stop = []\n"
        "signal.signal(signal.SIGTERM, lambda *a: stop.append(1))\n"
        "ld = gnnloader.Loader(sys.argv[2], split='train', batch_size=int(sys.argv[3]),\n"
        "    fanouts=[int(f) for f in sys.argv[4].split(',')], shuffle=True, seed=7, device=sys.argv[5],\n"
        "    slots=int(sys.argv[6]), pyg=False, timeout=float(sys.argv[7]))\n"
        "acc = torch.zeros((), device=sys.argv[5])\n"
        "period = float(sys.argv[8]) / 1e3\n"
        "import time\n"
        "print('ready', flush=True)\n"
        "due = time.perf_counter()\n"
        "taken = 0\n"
        "while not stop:\n"
        "    for b in ld:\n"
        "        if not period:\n"
        "            acc += b.x.sum()\n"
        "        else:  # the next batch due one period on; never a burst to catch up\n"
        "            due = max(due + period, time.perf_counter())\n"
        "            time.sleep(max(0.0, due - time.perf_counter()))\n"
        "        taken += 1\n"
        "        if stop:\n"
        "            break\n"
        "if sys.argv[5].startswith('cuda'):\n"
        "    torch.cuda.synchronize()\n"
        "ld.close()\n"
        "print('took', taken, flush=True)\n"
    )

    def __init__(self, args, dev, pace_ms=0.0):
        import select
        import subprocess
        self.taken = None
        py = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python")
        self.wait_timeout = args.wait_timeout or 120.0
        self.proc = subprocess.Popen(
            [sys.executable, "-c", self._CODE, py, args.socket, str(args.batch_size),
             ",".join(str(f) for f in args.fanouts), str(dev), str(args.slots), str(args.wait_timeout),
             str(pace_ms)],
            stdout=subprocess.PIPE, text=True, preexec_fn=_term_with_parent)
        self.started = time.perf_counter()
        ready, _, _ = select.select([self.proc.stdout], [], [], self.wait_timeout)
        line = self.proc.stdout.readline() if ready else ""
        if line.strip() != "ready":
            self.stop()
            raise RuntimeError(f"the busy consumer did not start within {self.wait_timeout:.0f} s: {line!r}")
        self.started = time.perf_counter()  # its rate counts from here
        time.sleep(1.0)  # its first fills in flight: the daemon at full load

    def running(self):
        """Whether it is still taking batches (train_busy is train_only if not)."""
        return self.proc.poll() is None

    def stop(self):
        """Stops it; returns its exit status. self.taken is then the batches
        it took (None if it did not say), and self.rate those a second
        from its start to the stop."""
        self.rate = None
        lived = time.perf_counter() - self.started
        if self.proc.poll() is None:
            self.proc.terminate()  # a flag: it synchronises and closes
            try:  # at most one wait on the daemon, then its goodbye
                self.proc.wait(self.wait_timeout + 30)
            except Exception:  # noqa: BLE001
                self.proc.kill()
                self.proc.wait()
        if self.taken is None and self.proc.stdout is not None and not self.proc.stdout.closed:
            for line in self.proc.stdout.read().splitlines():
                if line.startswith("took "):
                    self.taken = int(line.split()[1])
                    self.rate = self.taken / lived
            self.proc.stdout.close()
        return self.proc.returncode


def _term_with_parent():
    """In the busy consumer, before exec: SIGTERM (its clean stop) when the
    benchmark dies, so it never outlives it (Linux prctl PR_SET_PDEATHSIG)."""
    import ctypes
    import signal
    try:
        ctypes.CDLL(None).prctl(1, int(signal.SIGTERM))
    except (OSError, AttributeError):
        pass
