"""Release frames held and sent together (Loader._hold_release): with many
slots a trainer's releases go to loaderd a few to a system call, never more
than slots // 8 held, and all of them before any receive that would wait;
the batches are the same as with every release sent at once."""
import struct
import threading
import time
import unittest

import torch

from test_loader import CoraDaemonCase
import gnnloader
from gnnloader import protocol as p


class ReleaseHoldTest(CoraDaemonCase):
    def loader(self, slots, **kw):
        return gnnloader.Loader(self.daemon.socket, split="train", batch_size=4, fanouts=[5, 3], shuffle=True,
                                seed=3, slots=slots, pyg=False, **kw)

    def epochs(self, ld, n=2):
        """n epochs, each batch's n_id copied; the Release frames of each
        write, and whether a read from the socket ever began with releases held."""
        writes, held_at_read = [], []
        real_send = ld._send_releases

        def send():
            if ld._releases:
                writes.append(len(ld._releases))
            real_send()
        ld._send_releases = send
        real_read = p.recv_with_fds

        def read(sock, *a):
            if sock is ld._sock:
                held_at_read.append(len(ld._releases))
            return real_read(sock, *a)
        p.recv_with_fds = read
        try:
            got = [[b.n_id.clone() for b in ld] for _ in range(n)]
        finally:
            p.recv_with_fds = real_read
        return got, writes, held_at_read

    def test_releases_sent_together(self):
        with self.loader(64, receive_thread=False) as ld:
            self.assertEqual(ld._release_hold, 8)
            got, writes, held_at_read = self.epochs(ld)
        batches = sum(len(e) for e in got)
        self.assertGreater(batches, 20)
        # Every release went out, some writes carried several, none more than held.
        self.assertEqual(sum(writes), batches)
        self.assertGreater(max(writes), 1)
        self.assertLessEqual(max(writes), 8)
        self.assertLess(len(writes), batches)
        # Never a read (which may wait for the daemon) with releases held back.
        self.assertEqual(set(held_at_read), {0})
        # The same batches as a loader that sends each release at once.
        with self.loader(8, receive_thread=False) as ref:
            self.assertEqual(ref._release_hold, 0)
            want, ref_writes, _ = self.epochs(ref)
        self.assertEqual(ref_writes, [])
        self.assertEqual(len(got), len(want))
        for e, w in zip(got, want):
            self.assertEqual(len(e), len(w))
            for a, b in zip(e, w):
                self.assertTrue(torch.equal(a, b))

    def test_releases_sent_together_with_the_receive_thread(self):
        # The receiver's queue says whether a take will wait: the releases
        # stay held while batches are queued, and all go out before a take
        # from an empty queue.
        with self.loader(64, receive_thread=True) as ld:
            self.assertIsNotNone(ld._rx)
            waits_held = []
            real_get = ld._rx.get

            def get(timeout):
                if not ld._rx.ready():
                    waits_held.append(len(ld._releases))
                return real_get(timeout)
            ld._rx.get = get
            got, writes, _ = self.epochs(ld)
        batches = sum(len(e) for e in got)
        self.assertEqual(sum(writes), batches)
        self.assertGreater(max(writes), 1)
        self.assertLessEqual(max(writes), 8)
        self.assertLess(len(writes), batches)
        self.assertTrue(waits_held)
        self.assertEqual(set(waits_held), {0})
        with self.loader(8) as ref:
            want, _, _ = self.epochs(ref)
        self.assertEqual([len(e) for e in got], [len(e) for e in want])
        for e, w in zip(got, want):
            for a, b in zip(e, w):
                self.assertTrue(torch.equal(a, b))

    def test_manual_release_never_starves_the_daemon(self):
        self.manual_release_never_starves(receive_thread=False)

    def test_manual_release_never_starves_the_daemon_with_the_receive_thread(self):
        self.manual_release_never_starves(receive_thread=True)

    def manual_release_never_starves(self, receive_thread):
        # 32 slots, four held: the trainer keeps every slot but one and gives
        # one back before each next batch. That release is held, so only
        # sending it before a read (or a take from the receive thread's
        # queue) that would wait keeps the daemon going (a timeout rather
        # than a hang if it does not).
        with self.loader(32, release="manual", timeout=10, receive_thread=receive_thread) as ld:
            self.assertEqual(ld._release_hold, 4)
            self.assertEqual(ld._rx is not None, receive_thread)
            held, n = [], 0
            for b in ld:
                held.append(b)
                n += 1
                if len(held) == 32:
                    ld.release(held.pop(0))
            for h in held:
                ld.release(h)
            self.assertEqual(n, len(ld))

    def test_another_threads_release_goes_at_once(self):
        # The iterating thread may be waiting in a read for that very slot.
        with self.loader(64, release="manual", timeout=10) as ld:
            it = iter(ld)
            b = next(it)
            t = threading.Thread(target=ld.release, args=(b,))
            t.start()
            t.join()
            self.assertEqual(ld._releases, [])
            ld.release(next(it))  # the iterating thread's own release is held
            self.assertEqual(len(ld._releases), 1)
            for rest in it:
                ld.release(rest)
            ld.close()
            with self.assertRaises(gnnloader.LoaderError):
                ld.release(b)  # closed: an error, not a release kept nowhere
    def test_sends_from_two_threads_stay_whole(self):
        # The iterating thread's held releases and another thread's sends on
        # one socket: a write that the socket's full buffer splits (here: a
        # socket that writes half, lets the other thread run, then the rest)
        # must not let the other thread's frame in between, and a release
        # held while the other thread flushes is sent once, never lost.
        with self.loader(64, release="manual", timeout=10) as ld:
            next(iter(ld))  # connected, the iterating thread set

            class SplittingSocket:
                def __init__(self):
                    self.data = bytearray()

                def sendall(self, b):
                    h = len(b) // 2
                    self.data += b[:h]
                    time.sleep(0.0005)  # the other thread runs here
                    self.data += b[h:]

                def sendmsg(self, bufs, anc=()):
                    b = b"".join(bufs)
                    self.sendall(b)
                    return len(b)

            real, ld._sock = ld._sock, SplittingSocket()
            rounds = 300
            try:
                other = threading.Thread(target=lambda: [
                    (ld._send_now(p.Release(slot=1, epoch=1000, index=i)), ld._send_releases())
                    for i in range(rounds)])
                other.start()
                for i in range(rounds):  # as the iterating thread releases in manual mode
                    ld._hold_release(0, 2000, i)
                other.join()
                ld._send_releases()
                sent = bytes(ld._sock.data)
            finally:
                ld._sock = real
                ld._held.clear()
        got, off = [], 0
        while off < len(sent):
            (n,) = struct.unpack_from("<I", sent, off)  # the frame's length after its length field
            msg = p.unmarshal(sent[off:off + 4 + n])
            self.assertIsInstance(msg, p.Release)
            got.append((msg.epoch, msg.index))
            off += 4 + n
        self.assertEqual(sorted(i for e, i in got if e == 1000), list(range(rounds)))
        self.assertEqual([i for e, i in got if e == 2000], list(range(rounds)))  # each once, in order


if __name__ == "__main__":
    unittest.main()
