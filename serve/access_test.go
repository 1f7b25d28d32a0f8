package serve

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/gnnloader/gnnloader/ipc"
)

// asPeer makes the server see every connection as coming from uid/gid.
func asPeer(srv *Server, uid, gid int) {
	f := peerCredFunc(func(*net.UnixConn) (peer, error) { return peer{pid: 4321, uid: uid, gid: gid}, nil })
	srv.peerCred.Store(&f)
}

func TestPeerCredentialsChecked(t *testing.T) {
	srv, _ := testServer(t, Config{AllowUIDs: []int{1500}, AllowGIDs: []int{2500}})
	stranger := os.Getuid() + 7777
	cases := []struct {
		name     string
		uid, gid int
		ok       bool
	}{
		{"own uid", os.Getuid(), 9999, true},
		{"allowed uid", 1500, 9999, true},
		{"allowed gid", stranger, 2500, true},
		{"stranger", stranger, 9999, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			asPeer(srv, c.uid, c.gid)
			cl := dial(t, srv)
			if c.ok {
				cl.handshake(openReq())
				return
			}
			// The daemon refuses before reading anything and may have
			// closed already: the Hello's write may fail with EPIPE.
			cl.conn.WriteMsg(&ipc.Hello{Version: ipc.Version})
			// Refused before the handshake: an Error, then the end. No
			// Welcome, no handles, no descriptors.
			cl.expectError(ipc.CodeDenied, "not allowed")
		})
	}
	if got := srv.Stats().Refused.Load(); got != 1 {
		t.Fatalf("refused %d connections, want 1", got)
	}
}

func TestSocketModeIsNarrow(t *testing.T) {
	src, err := OpenSource("synthetic:cora:0.1:1", true, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, c := range []struct {
		cfg  Config
		want os.FileMode
	}{
		{Config{}, 0o600},
		{Config{AllowGIDs: []int{100}}, 0o660},
	} {
		c.cfg.Socket = filepath.Join(t.TempDir(), "s.sock")
		srv := New(src, c.cfg, nil)
		if err := srv.Listen(); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(c.cfg.Socket)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != c.want {
			t.Errorf("socket mode %v, want %v", st.Mode().Perm(), c.want)
		}
		srv.ln.Close()
	}
}

func TestRequestLimits(t *testing.T) {
	srv, _ := testServer(t, Config{Limits: ipc.Limits{MaxBatchSize: 100, MaxFanouts: 2}})
	for _, c := range []struct {
		name string
		mod  func(*ipc.Open)
		text string
	}{
		{"batch size", func(o *ipc.Open) { o.BatchSize = 101 }, "batch_size 101"},
		{"hops", func(o *ipc.Open) { o.Fanouts = []int32{2, 2, 2} }, "fanouts"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := dial(t, srv)
			cl.send(&ipc.Hello{Version: ipc.Version})
			cl.recv()
			o := openReq()
			c.mod(&o)
			cl.send(&o)
			cl.expectError(ipc.CodeLimit, c.text)
		})
	}
}

func TestListenDoesNotReplaceAFile(t *testing.T) {
	src, err := OpenSource("synthetic:cora:0.1:1", true, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	path := filepath.Join(t.TempDir(), "precious.txt")
	os.WriteFile(path, []byte("keep me"), 0o644)
	srv := New(src, Config{Socket: path}, nil)
	if err := srv.Listen(); err == nil {
		srv.ln.Close()
		t.Fatal("Listen replaced a regular file")
	}
	if b, _ := os.ReadFile(path); string(b) != "keep me" {
		t.Fatal("the file was changed")
	}
}
