"""The per-batch fast paths (gnnloader/_fastpath.py) against the table's
interpreter: BatchReady decoded and Release frames made the same way, and
every frame the interpreter refuses left to it (same error)."""
import importlib
import random
import struct
import unittest

from test_protocol import BAD, GOLDEN, P  # protocol loaded without torch

F = importlib.import_module(P.__name__.rsplit(".", 1)[0] + "._fastpath")


def _generic(payload, lim):
    """The interpreter's decode of a BatchReady payload: the message, or the
    ProtocolError it raises."""
    r = P._Reader(payload, lim)
    try:
        m = P.BatchReady._CODEC.decode(r)
        if r.left():
            raise P.ProtocolError(P.Code.BAD_MESSAGE, f"{r.left()} trailing bytes")
        return m
    except P.ProtocolError as e:
        return e


def _random_batch_ready(rnd):
    n = rnd.randrange(0, 12)
    return P.BatchReady(slot=rnd.randrange(0, 1 << 32), epoch=rnd.randrange(0, 1 << 32),
                        index=rnd.randrange(0, 1 << 32),
                        counts=[rnd.randrange(0, 1 << 32) for _ in range(n)],
                        scalars=[rnd.randrange(-(1 << 63), 1 << 63) for _ in range(rnd.randrange(0, 4))],
                        lists=[[rnd.randrange(0, 1 << 32) for _ in range(rnd.randrange(0, 6))]
                               for _ in range(rnd.randrange(0, 4))],
                        ready_value=rnd.randrange(0, 1 << 32))


class FastPathTest(unittest.TestCase):
    def test_on_for_this_table(self):
        # Off means the table changed under them: every batch would take the
        # slow path without anyone noticing.
        self.assertIsNotNone(F.decode_batch_ready)
        self.assertIsNotNone(F.release_frames)

    def test_batch_ready_same_as_interpreter(self):
        rnd = random.Random(7)
        for _ in range(2000):
            m = _random_batch_ready(rnd)
            payload = P.marshal(m)[P.HEADER_SIZE:]
            got = F.decode_batch_ready(payload, P.DEFAULT_LIMITS)
            self.assertEqual(got, m)
            self.assertEqual(got, _generic(payload, P.DEFAULT_LIMITS))
            self.assertEqual(P.unmarshal(P.marshal(m)), m)

    def test_golden_batch_ready(self):
        seen = 0
        for path in sorted(GOLDEN.glob("*.bin")):
            frame = path.read_bytes()
            typ = struct.unpack_from("<H", frame, 4)[0]
            if typ != int(P.MsgType.BATCH_READY):
                continue
            payload = frame[P.HEADER_SIZE:]
            got = F.decode_batch_ready(payload, P.DEFAULT_LIMITS)
            self.assertIsNotNone(got, path.name)
            self.assertEqual(got, _generic(payload, P.DEFAULT_LIMITS), path.name)
            seen += 1
        self.assertGreaterEqual(seen, 2)  # batch_ready, batch_ready_bare

    def test_bad_frames_left_to_interpreter(self):
        # Truncated, extended, flipped and over-limit payloads: the fast path
        # returns what the interpreter returns, or None where it raises (and
        # unmarshal then raises the interpreter's error).
        rnd = random.Random(11)
        small = P.Limits(max_list=5)
        refused = 0
        for i in range(4000):
            m = _random_batch_ready(rnd)
            payload = bytearray(P.marshal(m)[P.HEADER_SIZE:])
            kind = i % 4
            if kind == 0:
                payload = payload[:rnd.randrange(0, len(payload))]
            elif kind == 1:
                payload += bytes(rnd.randrange(1, 9))
            elif kind == 2:
                for _ in range(rnd.randrange(1, 4)):
                    payload[rnd.randrange(0, len(payload))] = rnd.randrange(0, 256)
            lim = small if kind == 3 else P.DEFAULT_LIMITS
            want = _generic(bytes(payload), lim)
            got = F.decode_batch_ready(bytes(payload), lim)
            if isinstance(want, P.ProtocolError):
                refused += 1
                self.assertIsNone(got, f"case {i}: the interpreter says {want}")
                frame = struct.pack("<IHH", len(payload) + 4, int(P.MsgType.BATCH_READY), 0) + bytes(payload)
                with self.assertRaises(P.ProtocolError) as cm:
                    P.unmarshal(frame, lim)
                self.assertEqual((cm.exception.code, cm.exception.message),
                                 (want.code, "BatchReady: " + want.message))
            else:
                self.assertEqual(got, want, f"case {i}")
        self.assertGreater(refused, 1500)  # the bad cases were bad

    def test_hostile_counts(self):
        # A daemon's frame claiming more entries than it carries, or more
        # than the limit: refused before any list is made, with the
        # interpreter's error.
        head = struct.pack("<III", 1, 2, 3)
        cases = [
            (head + struct.pack("<H", 0xFFFF), P.Code.LIMIT),  # 65535 counts
            (head + struct.pack("<H", 1000) + bytes(8), P.Code.BAD_MESSAGE),  # 1000 counts, 8 bytes for them
            (head + struct.pack("<H", 1025) + bytes(4 * 1025) + bytes(8), P.Code.LIMIT),  # one over max_list
            (head + struct.pack("<HHH", 0, 0, 0xFFFF) + bytes(4), P.Code.LIMIT),  # 65535 lists
            (head + struct.pack("<HHHH", 0, 0, 1, 1000) + bytes(4), P.Code.BAD_MESSAGE),  # a list of 1000, 4 bytes
        ]
        for payload, code in cases:
            self.assertIsNone(F.decode_batch_ready(payload, P.DEFAULT_LIMITS), payload[:20])
            frame = struct.pack("<IHH", len(payload) + 4, int(P.MsgType.BATCH_READY), 0) + payload
            with self.assertRaises(P.ProtocolError) as cm:
                P.unmarshal(frame)
            self.assertEqual(cm.exception.code, code, cm.exception.message)

    def test_bad_golden_batch_ready(self):
        for path in sorted(BAD.glob("*.bin")):
            frame = path.read_bytes()
            if len(frame) < P.HEADER_SIZE or struct.unpack_from("<H", frame, 4)[0] != int(P.MsgType.BATCH_READY):
                continue
            want = _generic(frame[P.HEADER_SIZE:], P.DEFAULT_LIMITS)
            if isinstance(want, P.ProtocolError):
                self.assertIsNone(F.decode_batch_ready(frame[P.HEADER_SIZE:], P.DEFAULT_LIMITS), path.name)

    def test_release_frames(self):
        rnd = random.Random(3)
        for n in (0, 1, 4, 9):
            held = [(rnd.randrange(0, 1 << 32), rnd.randrange(0, 1 << 32), rnd.randrange(0, 1 << 32), rnd.random() < 0.5)
                    for _ in range(n)]
            want = b"".join(P.marshal(P.Release(slot=s, epoch=e, index=i, deferred=d)) for s, e, i, d in held)
            self.assertEqual(P.release_frames(held), want)
            self.assertEqual(F.release_frames(held), want)
            for frame in _frames(want):  # what the daemon decodes: the same entries
                m = P.unmarshal(frame)
                self.assertIn((m.slot, m.epoch, m.index, m.deferred), held)
        for bad in ((1 << 32, 0, 0, False), (0, -1, 0, True)):
            with self.assertRaises(P.ProtocolError) as cm:
                P.release_frames([(1, 2, 3, False), bad])
            self.assertEqual(cm.exception.code, P.Code.BAD_MESSAGE)


def _frames(b: bytes):
    """The frames one after the other in b (the length field counts what follows it)."""
    while b:
        n = 4 + int.from_bytes(b[:4], "little")
        yield b[:n]
        b = b[n:]


if __name__ == "__main__":
    unittest.main()
