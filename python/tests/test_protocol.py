"""Tests of python/gnnloader/protocol.py against the Go package's frames.

The golden frames in ipc/testdata/golden/ and the bad frames in
ipc/testdata/bad/ (named <case>.<code>.bin) are written by the Go tests
(go test ./ipc -run TestGolden -update); GOLDENS below repeats the values of
goldens() in ipc/golden_test.go.
"""

import array
import importlib
import itertools
import os
import socket
import sys
import threading
import tracemalloc
import types
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "ipc" / "testdata" / "golden"
BAD = ROOT / "ipc" / "testdata" / "bad"


def _load():
    # Load protocol.py and its modules (_schema, _codec, _messages) without
    # gnnloader/__init__.py, so the test also proves they need only the
    # standard library (not torch).
    name = "gnnloader_protocol_under_test"
    pkg = types.ModuleType(name)
    pkg.__path__ = [str(ROOT / "python" / "gnnloader")]
    sys.modules[name] = pkg
    return importlib.import_module(name + ".protocol")


P = _load()


def _align(n):
    return (n + P.REGION_ALIGN - 1) // P.REGION_ALIGN * P.REGION_ALIGN


def _sample_regions():
    nodes, edges, dim = 1000, 5000, 100
    regions, off = [], 0
    for name, dtype, elem, axis, shape in (("x", "float32", 4, 0, [nodes, dim]), ("y", "int64", 8, 0, [nodes]),
                                           ("n_id", "int64", 8, 0, [nodes]),
                                           ("edge_index", "int64", 8, 1, [2, edges])):
        n = elem
        for s in shape:
            n *= s
        regions.append(P.Region(name=name, offset=off, bytes=n, dtype=dtype, shape=list(shape), count_axis=axis))
        off = _align(off + n)
    return regions, off


def _handle(seed):
    return bytes((seed + i) & 0xFF for i in range(P.HANDLE_SIZE))


def _goldens():
    regions, slot_bytes = _sample_regions()
    return {
        "hello": P.Hello(version=3, pid=4242, name="train.py rank 0"),
        "welcome": P.Welcome(version=3, daemon_version="loaderd 0.1.0", dataset=P.Dataset(
            name="ogbn-products", num_nodes=2449029, num_edges=123718280, feature_dim=100,
            feature_dtype="float32", num_classes=47,
            splits=[P.Split("train", 196615), P.Split("val", 39323), P.Split("test", 2213091)])),
        "welcome_empty": P.Welcome(version=3),
        "welcome_hetero": P.Welcome(version=3, daemon_version="loaderd 0.3.0", dataset=P.Dataset(
            name="mag-synthetic", num_nodes=193_975, num_edges=2_111_101,
            node_types=[
                P.NodeTypeInfo("paper", 73_639, 128, "float32", 349,
                               [P.Split("train", 62_957), P.Split("val", 6_488), P.Split("test", 4_194)]),
                P.NodeTypeInfo("author", 113_465, 128, "float32"),
                P.NodeTypeInfo("topic", 5_997),
            ],
            edge_types=[P.EdgeTypeInfo("author", "writes", "paper", 714_566),
                        P.EdgeTypeInfo("paper", "cites", "paper", 541_627),
                        P.EdgeTypeInfo("paper", "has_topic", "topic", 750_508)],
            node_time=True)),
        "open": P.Open(job="sage", split="train", batch_size=1024, fanouts=[15, 10, 5], shuffle=True,
                       seed=0x0123456789ABCDEF, rank=1, world_size=4, drop_last=False, device="cuda:1",
                       feature_dtype="", slots=0, start_epoch=0, start_batch=0),
        "open_hetero": P.Open(job="rgcn", split="train", batch_size=256, fanouts=[10, 5], seed=11, world_size=1,
                              device="cpu", input_type="paper", edge_fanouts=[10, -1, 0, 5, 3, 0],
                              temporal="last", time_attr="node_time"),
        "open_resume": P.Open(job="jöb-ü", split="val", batch_size=512, fanouts=[-1, 10], shuffle=False,
                              seed=7, rank=0, world_size=1, drop_last=True, device="cpu",
                              feature_dtype="float16", slots=3, start_epoch=2, start_batch=17),
        "opened_shm": P.Opened(num_batches=48, slots=2, slot_bytes=slot_bytes, memory="shm", regions=regions,
                               scalars=["batch_size"], lists=["num_sampled_nodes", "num_sampled_edges"]),
        "opened_cuda": P.Opened(num_batches=48, slots=2, slot_bytes=slot_bytes, memory="cuda", regions=regions,
                                scalars=["batch_size"], lists=["num_sampled_nodes", "num_sampled_edges"],
                                cuda_device=1,
                                mem_handle=_handle(0),
                                events=[P.EventIPC(_handle(0x10), _handle(0x80)),
                                        P.EventIPC(_handle(0x11), _handle(0x81))],
                                ready_words=2 * slot_bytes),
        "start_epoch": P.StartEpoch(epoch=3),
        "batch_ready": P.BatchReady(slot=1, epoch=3, index=7, counts=[900, 900, 900, 4000], scalars=[4],
                                    lists=[[4, 50, 300, 546], [60, 940, 3000]], ready_value=5),
        "batch_ready_bare": P.BatchReady(slot=0, epoch=1 << 31, index=9, counts=[], scalars=[-1, 1 << 40],
                                         lists=[[], [7]]),
        "release": P.Release(slot=1, epoch=3, index=7),
        "release_deferred": P.Release(slot=2, epoch=3, index=8, deferred=True),
        "epoch_end": P.EpochEnd(epoch=3, num_batches=48),
        "error": P.Error(code=P.Code.OUT_OF_ORDER, message="Release from the client in phase open"),
        "goodbye": P.Goodbye(reason="done"),
        "goodbye_empty": P.Goodbye(reason=""),
        "seeds": P.Seeds(count=140),
        "seeds_times": P.Seeds(count=3, times=True),
    }


def _frame(typ, payload):
    return (len(payload) + 4).to_bytes(4, "little") + typ.to_bytes(2, "little") + b"\0\0" + payload


class GoldenTest(unittest.TestCase):
    def test_goldens(self):
        goldens = _goldens()
        files = sorted(GOLDEN.glob("*.bin"))
        self.assertEqual(sorted(f.stem for f in files), sorted(goldens))
        for f in files:
            with self.subTest(f.name):
                data = f.read_bytes()
                want = goldens[f.stem]
                got = P.unmarshal(data)
                self.assertEqual(got, want)
                self.assertEqual(P.marshal(want), data)
                self.assertEqual(P.marshal(got), data)

    def test_bad_frames_from_go(self):
        files = sorted(BAD.glob("*.bin"))
        self.assertGreater(len(files), 15)
        for f in files:
            case, code_name, _ = f.name.split(".")
            with self.subTest(case):
                with self.assertRaises(P.ProtocolError) as cm:
                    P.unmarshal(f.read_bytes())
                self.assertEqual(P.Code(cm.exception.code).wire_name, code_name, str(cm.exception))

    def test_bad_frames_python(self):
        hello = P.marshal(P.Hello(name="x"))
        open_ = P.marshal(P.Open(job="j", split="train", batch_size=8, fanouts=[2]))
        shuffle_at = P.HEADER_SIZE + 3 + 7 + 4 + 2 + 4
        bad_bool = bytearray(open_)
        bad_bool[shuffle_at] = 7
        cases = {
            "truncated": (hello[:-1], P.Code.BAD_FRAME),
            "oversized": (b"\xff\xff\xff\x7f\x01\x00\x00\x00", P.Code.LIMIT),
            "unknown type": (_frame(1234, b""), P.Code.BAD_MESSAGE),
            "bad bool": (bytes(bad_bool), P.Code.BAD_MESSAGE),
            "trailing": (_frame(P.MsgType.GOODBYE, b"\0\0\0"), P.Code.BAD_MESSAGE),
            "string over limit": (P.marshal(P.Goodbye("a" * 4097)), P.Code.LIMIT),
            "invalid utf8": (_frame(P.MsgType.GOODBYE, b"\x01\x00\xff"), P.Code.BAD_MESSAGE),
            "list over limit": (P.marshal(P.Open(fanouts=[1] * 17)), P.Code.LIMIT),
            "flags": (hello[:6] + b"\x00\x80" + hello[8:], P.Code.BAD_FRAME),
        }
        for name, (frame, code) in cases.items():
            with self.subTest(name):
                with self.assertRaises(P.ProtocolError) as cm:
                    P.unmarshal(frame)
                self.assertEqual(cm.exception.code, code, str(cm.exception))

    def test_limits(self):
        b = P.marshal(_goldens()["welcome"])
        P.unmarshal(b, P.Limits(max_frame=len(b)))
        for lim in (P.Limits(max_frame=len(b) - 1), P.Limits(max_list=2), P.Limits(max_string=12)):
            with self.assertRaises(P.ProtocolError) as cm:
                P.unmarshal(b, lim)
            self.assertEqual(cm.exception.code, P.Code.LIMIT)

    def test_marshal_rejects(self):
        for m in (P.Goodbye("a" * 70000), P.Open(fanouts=[-2]), P.Release(slot=-1),
                  P.Opened(slots=1, memory="cuda", mem_handle=b"x", events=[P.EventIPC()]),
                  P.Opened(slots=1, memory="disk"), P.Opened(slots=0),
                  P.Goodbye("\ud800")):
            with self.subTest(repr(m)[:40]):
                with self.assertRaises(P.ProtocolError):
                    P.marshal(m)

    def test_validate(self):
        ok = _goldens()["open"]
        ok.validate()
        for change in ({"batch_size": 0}, {"fanouts": []}, {"world_size": 0}, {"rank": 4},
                       {"split": ""}, {"device": "gpu"}, {"device": "cuda:01"}, {"device": "cuda:"},
                       {"edge_fanouts": [1, 2, 3]}, {"input_type": "paper", "edge_fanouts": [1, 2]},
                       {"temporal": "latest", "time_attr": "node_time"}, {"temporal": "uniform"},
                       {"temporal": "last", "time_attr": "time"}, {"time_attr": "edge_time"}):
            m = P.Open(**{**ok.__dict__, **change})
            with self.subTest(change):
                with self.assertRaises(P.ProtocolError) as cm:
                    m.validate()
                self.assertEqual(cm.exception.code, P.Code.BAD_REQUEST)
        _goldens()["open_hetero"].validate()
        self.assertEqual(P.parse_device("cuda:12"), 12)
        self.assertEqual(P.parse_device("cpu"), -1)


    def test_check_batch(self):
        """What the client checks of each BatchReady against its Opened
        before it cuts views of the slot: a count over its region's capacity
        would make a view past the slot."""
        opened, ok = _goldens()["opened_cuda"], _goldens()["batch_ready"]
        opened.check_batch(ok)
        caps = [r.shape[r.count_axis] for r in opened.regions]
        opened.check_batch(P.BatchReady(slot=1, counts=caps, scalars=[1], lists=[[], []]))  # full is fine
        for k, r in enumerate(opened.regions):
            counts = list(caps)
            counts[k] += 1
            with self.subTest(region=r.name), self.assertRaises(P.ProtocolError) as cm:
                opened.check_batch(P.BatchReady(slot=0, counts=counts, scalars=[1], lists=[[], []]))
            self.assertEqual(cm.exception.code, P.Code.BAD_MESSAGE)
            self.assertIn(f"region {r.name!r} counts {caps[k] + 1}, its capacity is {caps[k]}", cm.exception.message)
        for bad in (P.BatchReady(slot=2, counts=ok.counts, scalars=[1], lists=[[], []]),
                    P.BatchReady(slot=0, counts=ok.counts[:-1], scalars=[1], lists=[[], []]),
                    P.BatchReady(slot=0, counts=ok.counts, scalars=[], lists=[[], []])):
            with self.assertRaises(P.ProtocolError):
                opened.check_batch(bad)


class SchemaTest(unittest.TestCase):
    """The dataclasses are bound to the table generated from ipc (_schema.py)."""

    def _import_with(self, name, change):
        pkg = types.ModuleType(name)
        pkg.__path__ = [str(ROOT / "python" / "gnnloader")]
        sys.modules[name] = pkg
        schema = importlib.import_module(name + "._schema")
        change(schema)
        try:
            return importlib.import_module(name + "._messages")
        finally:
            for k in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
                del sys.modules[k]

    def test_fields_must_match(self):
        def rename(s):
            m = s.MESSAGES[6]  # Release
            fields = ({**m.fields[0], "name": "slot_id"},) + m.fields[1:]
            s.MESSAGES = s.MESSAGES[:6] + (m._replace(fields=fields),) + s.MESSAGES[7:]

        def reorder(s):
            s.STRUCTS = {**s.STRUCTS, "Split": s.STRUCTS["Split"][::-1]}

        def extra(s):
            s.MESSAGES = s.MESSAGES + (s.Message(99, "Ping", "PING", "client", "none", b"", False, ()),)

        for change in (rename, reorder, extra):
            with self.subTest(change.__name__):
                with self.assertRaises(ImportError):
                    self._import_with("gnnloader_schema_" + change.__name__, change)

    def test_bound(self):
        for t in P.MsgType:
            cls = P.BY_TYPE[t]
            self.assertEqual(cls.TYPE, t)
            self.assertEqual(cls.__name__.upper(), t.name.replace("_", ""))
        self.assertEqual(P.fds_for(P.GradRegistered(memory="shm")), 1)
        self.assertEqual(P.fds_for(P.GradRegistered(memory="cuda")), 0)
        self.assertEqual(P.fds_for(P.Seeds()), 1)
        self.assertEqual(P.fds_for(P.Release()), 0)


def _open_fds():
    return len(os.listdir("/proc/self/fd"))


def _memfd(data):
    fd = os.memfd_create("protocol-test", os.MFD_CLOEXEC)
    os.write(fd, data)
    return fd


def _raw_send(sock, data, fds=()):
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())] if fds else []
    sock.sendmsg([data], anc)


@unittest.skipUnless(hasattr(socket, "AF_UNIX") and os.path.isdir("/proc/self/fd"), "needs Linux Unix sockets")
class SocketTest(unittest.TestCase):
    def setUp(self):
        self.a, self.b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(self.a.close)
        self.addCleanup(self.b.close)

    def test_round_trip_with_memfd(self):
        for name, m in _goldens().items():
            with self.subTest(name):
                fds = [_memfd(b"slot " + name.encode())] if P.fds_for(m) else []
                P.send_msg(self.a, m, fds)
                for fd in fds:
                    os.close(fd)
                got, rfds = P.recv_msg(self.b)
                self.assertEqual(got, m)
                self.assertEqual(len(rfds), P.fds_for(m))
                for fd in rfds:
                    self.assertEqual(os.pread(fd, 64, 0), b"slot " + name.encode())
                    self.assertFalse(os.get_inheritable(fd))
                    os.close(fd)
        self.a.close()
        with self.assertRaises(EOFError):
            P.recv_msg(self.b)

    def test_no_fd_leak(self):
        g = _goldens()
        hello, shm = P.marshal(g["hello"]), P.marshal(g["opened_shm"])
        cases = [
            ("fd with Hello", hello, 1, False, P.Code.BAD_FRAME),
            ("two fds with shm Opened", shm, 2, False, P.Code.BAD_FRAME),
            ("no fd with shm Opened", shm, 0, False, P.Code.BAD_FRAME),
            ("too many fds", hello, P.MAX_FDS + 1, False, P.Code.BAD_FRAME),
            ("oversized", b"\x00\x00\x00\x7f\x04\x00\x00\x00", 1, False, P.Code.LIMIT),
            ("bad payload", _frame(P.MsgType.OPENED, b"\x01\x02\x03"), 1, False, P.Code.BAD_MESSAGE),
            ("truncated", shm[: len(shm) // 2], 1, True, P.Code.BAD_FRAME),
        ]
        for (name, frame, nfd, close, code), ahead in itertools.product(cases, (False, True)):
            with self.subTest(name, read_ahead=ahead):
                a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    fds = [_memfd(b"x") for _ in range(nfd)]
                    before = _open_fds()
                    _raw_send(a, frame, fds)
                    for fd in fds:
                        os.close(fd)
                    if close:
                        a.close()
                    with self.assertRaises(P.ProtocolError) as cm:
                        P.recv_msg(b, read_ahead=ahead)
                    self.assertEqual(cm.exception.code, code, str(cm.exception))
                    after = _open_fds() + nfd + (1 if close else 0)
                    self.assertEqual(after, before, "descriptor leak")
                finally:
                    a.close()
                    b.close()

    def test_oversized_refused_before_allocating(self):
        _raw_send(self.a, b"\xf0\xff\xff\xff\x01\x00\x00\x00")
        tracemalloc.start()
        try:
            with self.assertRaises(P.ProtocolError) as cm:
                P.recv_msg(self.b)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        self.assertEqual(cm.exception.code, P.Code.LIMIT)
        self.assertLess(peak, 1 << 20)

    def test_large_frame(self):
        lim = P.Limits(max_frame=4 << 20, max_list=1 << 15)
        m = _goldens()["opened_shm"]
        m.regions = m.regions + [P.Region("pad", 0, 0, "uint8", [1, 2])] * 30000
        fd = _memfd(b"big")
        t = threading.Thread(target=P.send_msg, args=(self.a, m, [fd]))
        t.start()
        got, fds = P.recv_msg(self.b, lim)
        t.join()
        os.close(fd)
        self.assertEqual(len(fds), 1)
        os.close(fds[0])
        self.assertEqual(len(got.regions), len(m.regions))

    def test_send_checks_fds(self):
        with self.assertRaises(P.ProtocolError):
            P.send_msg(self.a, P.Goodbye(), [0])
        with self.assertRaises(P.ProtocolError):
            P.send_msg(self.a, _goldens()["opened_shm"])


@unittest.skipUnless(hasattr(socket, "AF_UNIX") and os.path.isdir("/proc/self/fd"), "needs Linux Unix sockets")
class ReadAheadTest(unittest.TestCase):
    """recv_msg(read_ahead=True): one recvmsg for every frame already sent,
    descriptors with the frame they came with, frames kept returned first."""

    def setUp(self):
        self.a, self.b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(self.a.close)
        self.addCleanup(self.b.close)
        self.reads = 0
        real = P.recv_with_fds

        def counted(*args):
            self.reads += 1
            return real(*args)
        P.recv_with_fds = counted
        self.addCleanup(setattr, P, "recv_with_fds", real)

    def batches(self, n):
        return [P.BatchReady(slot=i % 7, epoch=3, index=i, counts=[i, 2 * i]) for i in range(n)]

    def test_many_frames_one_read(self):
        sent = self.batches(40)
        self.a.sendall(b"".join(P.marshal(m) for m in sent))
        got = [P.recv_msg(self.b, read_ahead=True) for _ in sent]
        self.assertEqual([m for m, _ in got], sent)
        self.assertEqual([f for _, f in got], [[]] * len(sent))
        self.assertEqual(self.reads, 1)
        # Nothing left: the next receive reads again, and a timeout before
        # any byte is an IdleTimeout.
        self.b.settimeout(0.05)
        with self.assertRaises(P.IdleTimeout):
            P.recv_msg(self.b, read_ahead=True)

    def test_exact_reads_return_kept_frames_first(self):
        sent = self.batches(5)
        self.a.sendall(b"".join(P.marshal(m) for m in sent))
        first, _ = P.recv_msg(self.b, read_ahead=True)
        rest = [P.recv_msg(self.b)[0] for _ in range(4)]
        self.assertEqual([first] + rest, sent)
        self.assertEqual(self.reads, 1)

    def test_descriptors_go_with_their_frame(self):
        g = _goldens()
        before = _open_fds()
        plan = [(g["hello"], 0), (g["opened_shm"], 1), (g["batch_ready"], 0), (g["seeds"], 1), (g["epoch_end"], 0)]
        for m, nfd in plan:
            fds = [_memfd(type(m).__name__.encode()) for _ in range(nfd)]
            P.send_msg(self.a, m, fds)
            for fd in fds:
                os.close(fd)
        for m, nfd in plan:
            got, fds = P.recv_msg(self.b, read_ahead=True)
            self.assertEqual(got, m)
            self.assertEqual(len(fds), nfd, type(m).__name__)
            for fd in fds:
                self.assertEqual(os.pread(fd, 64, 0), type(m).__name__.encode())
                os.close(fd)
        self.assertEqual(_open_fds(), before, "descriptor leak")
        # The kernel ends a read at a message with descriptors: three reads
        # for Hello+Opened, BatchReady+Seeds, EpochEnd.
        self.assertEqual(self.reads, 3)

    def test_wrong_descriptors_close_every_kept_one(self):
        g = _goldens()
        before = _open_fds()
        fd = _memfd(b"x")
        _raw_send(self.a, P.marshal(g["hello"]), [fd])  # Hello takes no descriptor
        os.close(fd)
        P.send_msg(self.a, g["batch_ready"])
        with self.assertRaises(P.ProtocolError) as cm:
            P.recv_msg(self.b, read_ahead=True)
        self.assertEqual(cm.exception.code, P.Code.BAD_FRAME)
        self.assertEqual(_open_fds(), before, "descriptor leak")

    def test_hostile_frames_ahead(self):
        # A length past the limit is refused before anything is allocated
        # for it, reading ahead as reading exactly.
        _raw_send(self.a, b"\xf0\xff\xff\xff\x01\x00\x00\x00")
        tracemalloc.start()
        try:
            with self.assertRaises(P.ProtocolError) as cm:
                P.recv_msg(self.b, read_ahead=True)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        self.assertEqual(cm.exception.code, P.Code.LIMIT)
        self.assertLess(peak, 1 << 20)
        # A bad frame read together with a later frame's descriptor: the
        # kept descriptor is closed with the error, not left open.
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        before = _open_fds()
        _raw_send(a, _frame(P.MsgType.OPENED, b"\x01\x02\x03"))
        fd = _memfd(b"x")
        P.send_msg(a, _goldens()["seeds"], [fd])
        os.close(fd)
        with self.assertRaises(P.ProtocolError) as cm:
            P.recv_msg(b, read_ahead=True)
        self.assertEqual(cm.exception.code, P.Code.BAD_MESSAGE)
        self.assertEqual(_open_fds(), before, "descriptor leak")

    def test_timeout_inside_a_frame_is_not_idle(self):
        frame = P.marshal(self.batches(1)[0])
        self.a.sendall(frame[:5])
        self.b.settimeout(0.05)
        with self.assertRaises(TimeoutError) as cm:
            P.recv_msg(self.b, read_ahead=True)
        self.assertNotIsInstance(cm.exception, P.IdleTimeout)

    def test_frame_split_across_reads(self):
        sent = self.batches(3)
        data = b"".join(P.marshal(m) for m in sent)
        self.a.sendall(data[:11])  # one frame and a part of the next
        t = threading.Timer(0.05, self.a.sendall, args=(data[11:],))
        t.start()
        self.addCleanup(t.join)
        got = [P.recv_msg(self.b, read_ahead=True)[0] for _ in sent]
        self.assertEqual(got, sent)

    def test_clean_close(self):
        P.send_msg(self.a, self.batches(1)[0])
        self.a.close()
        P.recv_msg(self.b, read_ahead=True)
        with self.assertRaises(EOFError):
            P.recv_msg(self.b, read_ahead=True)


class StateTest(unittest.TestCase):
    C, D, T = P.Dir.CLIENT, P.Dir.DAEMON, P.MsgType
    PREFIX = [(C, T.HELLO), (D, T.WELCOME), (C, T.OPEN), (D, T.OPENED)]

    def test_legal(self):
        C, D, T = self.C, self.D, self.T
        s = P.State()
        for d, t in self.PREFIX + [(C, T.START_EPOCH), (D, T.BATCH_READY), (D, T.BATCH_READY),
                                   (C, T.RELEASE), (D, T.EPOCH_END), (C, T.RELEASE),
                                   (C, T.START_EPOCH), (D, T.EPOCH_END), (C, T.GOODBYE)]:
            s.next(d, t)
        self.assertEqual(s.phase, P.Phase.CLOSED)

    def test_illegal(self):
        C, D, T = self.C, self.D, self.T
        cases = [
            (0, [], (C, T.OPEN)), (0, [], (D, T.HELLO)), (1, [], (C, T.WELCOME)),
            (2, [], (C, T.START_EPOCH)), (3, [], (C, T.RELEASE)), (4, [], (C, T.OPEN)),
            (4, [], (D, T.BATCH_READY)), (4, [(C, T.START_EPOCH)], (C, T.START_EPOCH)),
            (4, [(D, T.GOODBYE)], (C, T.RELEASE)), (1, [(D, T.ERROR)], (D, T.ERROR)),
            (4, [], (C, 42)),
        ]
        for after, extra, bad in cases:
            with self.subTest(after=after, extra=extra, bad=bad):
                s = P.State()
                for d, t in self.PREFIX[:after] + extra:
                    s.next(d, t)
                phase = s.phase
                with self.assertRaises(P.ProtocolError) as cm:
                    s.next(*bad)
                self.assertEqual(cm.exception.code, P.Code.OUT_OF_ORDER)
                self.assertEqual(s.phase, phase)


if __name__ == "__main__":
    unittest.main()
