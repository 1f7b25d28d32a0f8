"""Who the client trusts (docs/protocol.md): every client reads the
credentials of the process listening at the socket right after connecting
and, unless it runs as the trainer's own uid, root, daemon_uid= or a uid in
$GNNLOADER_DAEMON_UID, refuses it with UntrustedDaemonError having sent
nothing. And the default socket path, the same rule as the daemon's.

The squatter is a plain listening socket that records what it receives. Its
uid is faked by replacing gnnloader.trust.peer_cred, except in
RealUidTest, which (as root) listens with nobody's effective uid so the
kernel itself reports another user; a real loaderd running as this user is
accepted."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import gnnloader  # noqa: E402
import gnnloader.allreduce as ar  # noqa: E402
from gnnloader import trust  # noqa: E402
from gnnloader.table import open_table  # noqa: E402
from test_loader import LOADERD, Daemon  # noqa: E402

NOBODY = 65534
STRANGER = os.getuid() + 1000


class Squatter:
    """A socket at a fresh path that records what its first peer sends (up
    to one whole frame, or until it closes, or for 5 s) and hangs up. as_uid:
    listen with that effective uid (root only)."""

    def __init__(self, as_uid=None):
        self.dir = tempfile.mkdtemp(prefix="gnnloader-squat-")
        self.path = os.path.join(self.dir, "loaderd.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        if as_uid is None:
            self.sock.listen()
        else:
            os.seteuid(as_uid)  # the kernel records the listener's credentials now
            try:
                self.sock.listen()
            finally:
                os.seteuid(0)
        self.received = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        try:
            c, _ = self.sock.accept()
        except OSError:
            return
        with c:  # read the peer's first frame, then hang up
            c.settimeout(5)
            got = b""
            try:
                while len(got) < 4 or len(got) < 4 + int.from_bytes(got[:4], "little"):
                    b = c.recv(4096)
                    if not b:
                        break
                    got += b
            except OSError:
                pass
            self.received = got

    def got(self):
        """The bytes the first peer sent."""
        self.thread.join(10)
        return self.received

    def close(self):
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def clients(path, **kw):
    """Every client that connects to loaderd, each as a thunk."""
    return {
        "Loader": lambda: gnnloader.Loader(path, timeout=5, **kw),
        "NeighborLoader": lambda: gnnloader.NeighborLoader(path, [5], input_nodes="train", timeout=5, **kw),
        "connect": lambda: gnnloader.connect(path, timeout=5, **kw),
        "GradClient": lambda: ar.GradClient(path, "job", 0, 1, 1024, timeout=5, **kw),
        "open_table": lambda: open_table(path, timeout=5, **kw),
    }


def fake_uid(uid):
    return mock.patch.object(trust, "peer_cred", return_value=(4321, uid, uid))


class InjectedCredentialsTest(unittest.TestCase):
    def setUp(self):
        env = mock.patch.dict(os.environ)
        env.start()
        self.addCleanup(env.stop)
        os.environ.pop(trust.DAEMON_UID_ENV, None)

    def test_every_client_refuses_another_uid_and_sends_nothing(self):
        for name in clients("x"):
            with self.subTest(client=name):
                sq = Squatter()
                try:
                    with fake_uid(STRANGER), self.assertRaises(gnnloader.UntrustedDaemonError) as cm:
                        clients(sq.path)[name]()
                    self.assertEqual(sq.got(), b"", "the untrusted daemon received bytes")
                finally:
                    sq.close()
                e = cm.exception
                self.assertIsInstance(e, gnnloader.LoaderError)
                self.assertEqual((e.code, e.uid, e.pid, e.path), ("untrusted_daemon", STRANGER, 4321, sq.path))
                for text in (sq.path, f"uid {STRANGER}", f"daemon_uid={STRANGER}", f"GNNLOADER_DAEMON_UID={STRANGER}",
                             "nothing was sent"):
                    self.assertIn(text, str(e))

    def test_named_uids_and_root_are_trusted(self):
        # The squatter answers nothing, so each client fails after its first
        # frame: what matters is that the frame went out.
        cases = [(os.getuid(), {}, {}), (0, {}, {}), (STRANGER, {"daemon_uid": STRANGER}, {}),
                 (STRANGER, {}, {trust.DAEMON_UID_ENV: f"7,{STRANGER}"})]
        for uid, kw, env in cases:
            for name in ("Loader", "connect", "GradClient"):
                with self.subTest(uid=uid, kw=kw, env=env, client=name):
                    sq = Squatter()
                    try:
                        with fake_uid(uid), mock.patch.dict(os.environ, env):
                            with self.assertRaises(Exception) as cm:
                                clients(sq.path, **kw)[name]()
                        self.assertNotIsInstance(cm.exception, gnnloader.UntrustedDaemonError)
                        got = sq.got()
                        self.assertGreater(len(got), 8, f"no frame reached the daemon: {got!r}")
                        self.assertEqual(int.from_bytes(got[4:6], "little"), 1, "the first frame is not a Hello")
                    finally:
                        sq.close()

    def test_bad_environment_is_an_error(self):
        for env in ("x", "-1", "1,,2", "4294967295", "\u00b2"):
            with self.subTest(env=env), mock.patch.dict(os.environ, {trust.DAEMON_UID_ENV: env}):
                with self.assertRaisesRegex(ValueError, trust.DAEMON_UID_ENV):
                    gnnloader.Loader("/nonexistent/loaderd.sock")


class RealUidTest(unittest.TestCase):
    def setUp(self):
        env = mock.patch.dict(os.environ)
        env.start()
        self.addCleanup(env.stop)
        os.environ.pop(trust.DAEMON_UID_ENV, None)

    def test_socket_of_another_user_is_refused(self):
        if os.getuid() != 0:
            self.skipTest("needs root to listen as another uid")
        sq = Squatter(as_uid=NOBODY)
        try:
            with self.assertRaises(gnnloader.LoaderError) as cm:
                gnnloader.Loader(sq.path, timeout=5)
            self.assertEqual(sq.got(), b"", "the other user's socket received the trainer's Hello")
        finally:
            sq.close()
        self.assertEqual(cm.exception.code, "untrusted_daemon", str(cm.exception))
        self.assertIn(f"runs as uid {NOBODY}", str(cm.exception))

    def test_real_loaderd_of_this_user_is_accepted(self):
        if not os.path.exists(LOADERD):
            self.skipTest(f"{LOADERD} not built")
        d = Daemon("synthetic:cora:1:0")
        try:
            with gnnloader.Loader(d.socket, batch_size=64, fanouts=[5]) as ld:
                self.assertEqual(trust.peer_cred(ld._sock), (d.proc.pid, os.getuid(), os.getgid()))
                self.assertEqual(sum(1 for _ in ld), len(ld))
            self.assertEqual(gnnloader.connect(d.socket).num_nodes, 2708)
        finally:
            self.assertEqual(d.stop(), 0)


class SocketPathTest(unittest.TestCase):
    """The default socket: one rule for daemon and client (Go's side and the
    comparison of the two: ipc/socketpath_test.go)."""

    def setUp(self):
        env = mock.patch.dict(os.environ)
        env.start()
        self.addCleanup(env.stop)
        for k in (trust.SOCKET_ENV, trust.DAEMON_UID_ENV, "XDG_RUNTIME_DIR"):
            os.environ.pop(k, None)
        self.tmp = tempfile.mkdtemp(prefix="gnnloader-xdg-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def test_rule(self):
        for env, uid, want in [
            ({}, 0, "/run/gnnloader/loaderd.sock"),
            ({}, 1000, "/tmp/gnnloader-1000/loaderd.sock"),
            ({"XDG_RUNTIME_DIR": "/run/user/1000"}, 1000, "/run/user/1000/gnnloader/loaderd.sock"),
            ({"XDG_RUNTIME_DIR": "/run/user/0"}, 0, "/run/user/0/gnnloader/loaderd.sock"),
            ({"XDG_RUNTIME_DIR": ""}, 1001, "/tmp/gnnloader-1001/loaderd.sock"),
            ({"GNNLOADER_SOCKET": "/srv/l.sock", "XDG_RUNTIME_DIR": "/run/user/7"}, 7, "/srv/l.sock"),
            ({"GNNLOADER_SOCKET": "", "XDG_RUNTIME_DIR": "/run/user/7"}, 7, "/run/user/7/gnnloader/loaderd.sock"),
        ]:
            self.assertEqual(trust.default_socket_path(env, uid), want, (env, uid))

    def start_default_daemon(self):
        """A real loaderd started without --socket, XDG_RUNTIME_DIR=self.tmp."""
        if not os.path.exists(LOADERD):
            self.skipTest(f"{LOADERD} not built")
        log = open(os.path.join(self.tmp, "loaderd.log"), "w+")
        self.addCleanup(log.close)
        env = dict(os.environ, XDG_RUNTIME_DIR=self.tmp)
        proc = subprocess.Popen([LOADERD, "serve", "--gpu=false", "--dataset", "synthetic:cora:1:0"], env=env,
                                stdout=log, stderr=subprocess.STDOUT)

        def stop():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.wait(30), 0)
        self.addCleanup(stop)
        return proc, log

    def test_daemon_and_clients_meet_at_the_default(self):
        proc, log = self.start_default_daemon()
        os.environ["XDG_RUNTIME_DIR"] = self.tmp
        want = os.path.join(self.tmp, "gnnloader", "loaderd.sock")
        self.assertEqual(trust.default_socket_path(), want)
        deadline = time.time() + 60
        while not os.path.exists(want):
            if proc.poll() is not None or time.time() > deadline:
                log.seek(0)
                self.fail(f"loaderd did not listen at {want}:\n{log.read()}")
            time.sleep(0.02)
        with gnnloader.Loader(batch_size=256, fanouts=[5]) as ld:  # no socket path
            self.assertEqual(ld.socket_path, want)
            self.assertEqual(sum(1 for _ in ld), len(ld))
        self.assertEqual(gnnloader.connect().socket, want)

        class Data:
            num_nodes = 2708
        with gnnloader.NeighborLoader(Data(), [5], input_nodes="train", batch_size=1024) as nl:
            self.assertEqual(len(nl), 2)
        c = ar.GradClient(None, "default-socket", 0, 1, 64, timeout=10)
        c.close()
        # $GNNLOADER_SOCKET wins over the rest, for clients and daemon alike.
        os.environ[trust.SOCKET_ENV] = want
        os.environ["XDG_RUNTIME_DIR"] = "/nonexistent"
        with gnnloader.Loader(batch_size=256, fanouts=[5]) as ld:
            self.assertEqual(ld.socket_path, want)

    def test_nothing_at_the_default_says_so(self):
        os.environ["XDG_RUNTIME_DIR"] = self.tmp
        with self.assertRaises(gnnloader.LoaderError) as cm:
            gnnloader.Loader(batch_size=64, fanouts=[5])
        self.assertEqual(cm.exception.code, "connect")
        for text in (os.path.join(self.tmp, "gnnloader", "loaderd.sock"), "default socket", "GNNLOADER_SOCKET"):
            self.assertIn(text, str(cm.exception))

    def test_unsafe_default_directory_is_refused(self):
        os.environ["XDG_RUNTIME_DIR"] = self.tmp
        d = os.path.join(self.tmp, "gnnloader")
        sq_dir = tempfile.mkdtemp(prefix="gnnloader-real-")
        self.addCleanup(shutil.rmtree, sq_dir, True)
        cases = [("world-writable", lambda: os.chmod(d, 0o777), "may write to it (mode 0o777)"),
                 ("symbolic link", lambda: (os.rmdir(d), os.symlink(sq_dir, d)), "not a directory")]
        if os.getuid() == 0:
            cases.append(("another user's", lambda: os.chown(d, 4242, 4242), "belongs to uid 4242"))
        for name, spoil, text in cases:
            with self.subTest(name):
                if os.path.islink(d):
                    os.unlink(d)
                elif os.path.isdir(d):
                    os.rmdir(d)
                os.mkdir(d, 0o700)
                spoil()
                for client in (lambda: gnnloader.Loader(batch_size=64, fanouts=[5]), gnnloader.connect,
                               lambda: gnnloader.NeighborLoader(object(), [5], input_nodes="train")):
                    with self.assertRaises(gnnloader.LoaderError) as cm:
                        client()
                    self.assertEqual(cm.exception.code, "unsafe_socket_dir", str(cm.exception))
                    self.assertIn(d, str(cm.exception))
                    self.assertIn(text, str(cm.exception))
        # A daemon refuses it too (ipc.PrepareSocketDir), before listening.
        if os.path.exists(LOADERD):
            env = dict(os.environ, XDG_RUNTIME_DIR=self.tmp)
            p = subprocess.run([LOADERD, "serve", "--gpu=false", "--dataset", "synthetic:cora:0.1:0"], env=env,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("unsafe socket directory", p.stderr)


if __name__ == "__main__":
    unittest.main()
