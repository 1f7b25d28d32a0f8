"""One released event for the releases sent together (protocol 5): the last
one's is recorded, and the others go out deferred, covered by it, so a few
batches cost one driver call, not one each (test_cuda_wait: one ready wait a
fill). Without a GPU: the CUDA calls are those of a fake that logs them, in
order with the frames sent."""
import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from gnnloader import cuda as C  # noqa: E402
from gnnloader import protocol as p  # noqa: E402
from gnnloader.loader import Loader  # noqa: E402


class FakeSlots:
    """What the loader calls of CudaSlots on a release, logged into `log`."""

    def __init__(self, log):
        self.log, self.stream, self.fail = log, 7, False

    def current_stream(self):
        return self.stream

    def record_released(self, slot, stream=None):
        if self.fail:
            raise C.CudaRuntimeError("cudaEventRecord: injected")
        self.log.append(("record", slot, stream))


class LoggingSocket:
    """Every Release frame written, decoded, into `log`."""

    def __init__(self, log):
        self.log = log

    def sendall(self, b):
        while b:
            n = 4 + int.from_bytes(b[:4], "little")
            m = p.unmarshal(b[:n])
            self.log.append(("release", m.slot, m.index, m.deferred))
            b = b[n:]

    def sendmsg(self, bufs, anc=()):
        b = b"".join(bufs)
        self.sendall(b)
        return len(b)


def loader(hold):
    ld = Loader.__new__(Loader)
    ld.log = []
    ld._sock, ld._cuda = LoggingSocket(ld.log), FakeSlots(ld.log)
    ld._releases, ld._release_hold = [], hold
    ld._send_lock = threading.Lock()
    ld._iter_thread = threading.get_ident()
    return ld


class ReleaseCoverTest(unittest.TestCase):
    def test_one_record_for_those_sent_together(self):
        ld = loader(4)
        for i in range(8):
            ld._hold_release(i, 0, i, 7)
        self.assertEqual(ld.log, [("record", 3, 7)] + [("release", i, i, i != 3) for i in range(4)]
                         + [("record", 7, 7)] + [("release", i, i, i != 7) for i in range(4, 8)])

    def test_a_short_group_records_its_last(self):
        ld = loader(4)
        ld._hold_release(0, 0, 0, 7)
        ld._hold_release(1, 0, 1, 7)
        self.assertEqual(ld.log, [])
        ld._send_releases()  # as before a read that would wait
        self.assertEqual(ld.log, [("record", 1, 7), ("release", 0, 0, True), ("release", 1, 1, False)])
        ld._send_releases()
        self.assertEqual(len(ld.log), 3)

    def test_a_new_stream_closes_the_run_before_it(self):
        # Batches 0-1 used stream 7, batches 2-3 stream 9: stream 9's event
        # cannot cover stream 7's work, so batch 1's is recorded on 7 first.
        ld = loader(4)
        for i, s in enumerate((7, 7, 9, 9)):
            ld._hold_release(i, 0, i, s)
        self.assertEqual(ld.log, [("record", 1, 7), ("record", 3, 9), ("release", 0, 0, True),
                                  ("release", 1, 1, False), ("release", 2, 2, True), ("release", 3, 3, False)])

    def test_a_failed_record_loses_no_release(self):
        ld = loader(4)
        for i in range(3):
            ld._hold_release(i, 0, i, 7)
        ld._cuda.fail = True
        with self.assertRaises(C.CudaRuntimeError):
            ld._send_releases()
        self.assertEqual((ld.log, len(ld._releases)), ([], 3))
        ld._cuda.fail = False
        ld._send_releases()
        self.assertEqual(ld.log, [("record", 2, 7)] + [("release", i, i, i != 2) for i in range(3)])

    def test_another_threads_release_records_its_own(self):
        ld = loader(4)
        ld._hold_release(0, 0, 0, 7)
        t = threading.Thread(target=ld._hold_release, args=(5, 0, 5, 9))
        t.start()
        t.join()
        self.assertEqual(ld.log, [("record", 5, 9), ("release", 5, 5, False)])
        self.assertEqual(len(ld._releases), 1)

    def test_without_cuda_nothing_is_deferred(self):
        ld = loader(4)
        ld._cuda = None
        for i in range(4):
            ld._hold_release(i, 0, i)
        self.assertEqual(ld.log, [("release", i, i, False) for i in range(4)])


if __name__ == "__main__":
    unittest.main()
