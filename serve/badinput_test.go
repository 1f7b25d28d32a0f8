package serve

// Malformed requests and frames: each answered with its Error, and the
// daemon carries on.

import (
	"slices"
	"testing"

	"github.com/gnnloader/gnnloader/ipc"
)

func TestBadRequests(t *testing.T) {
	srv, _ := testServer(t, Config{MaxSlots: 4})
	cases := []struct {
		name string
		mod  func(o *ipc.Open)
		code ipc.Code
		text string
	}{
		{"unknown split", func(o *ipc.Open) { o.Split = "nope" }, ipc.CodeNotFound, `no split "nope"`},
		{"batch size 0", func(o *ipc.Open) { o.BatchSize = 0 }, ipc.CodeBadRequest, "batch_size"},
		{"no fanouts", func(o *ipc.Open) { o.Fanouts = nil }, ipc.CodeBadRequest, "fanouts"},
		{"rank beyond world", func(o *ipc.Open) { o.Rank = 2; o.WorldSize = 2 }, ipc.CodeBadRequest, "rank"},
		{"gpu on cpu daemon", func(o *ipc.Open) { o.Device = "cuda:0" }, ipc.CodeBadRequest, "CPU path only"},
		{"dtype conversion", func(o *ipc.Open) { o.FeatureDType = "float16" }, ipc.CodeBadRequest, "does not convert"},
		{"too many slots", func(o *ipc.Open) { o.Slots = 5 }, ipc.CodeLimit, "limit 4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, srv)
			c.send(&ipc.Hello{Version: ipc.Version})
			c.recv()
			o := openReq()
			tc.mod(&o)
			if err := c.conn.WriteMsg(&o); err != nil {
				// Some requests cannot even be encoded (limits checked on
				// both sides); the daemon's side is covered by the raw
				// frame tests.
				t.Skipf("client refuses to encode: %v", err)
			}
			c.expectError(tc.code, tc.text)
		})
	}
	// The daemon carries on: a good trainer still gets its batches.
	good := dial(t, srv)
	good.handshake(openReq())
}

func TestBadFrames(t *testing.T) {
	srv, _ := testServer(t, Config{})
	raw := func(t *testing.T, b []byte) *client {
		c := dial(t, srv)
		if _, err := c.conn.UnixConn().Write(b); err != nil {
			t.Fatal(err)
		}
		return c
	}
	hello, _ := ipc.Marshal(&ipc.Hello{Version: ipc.Version})
	t.Run("oversized", func(t *testing.T) {
		raw(t, []byte{0xff, 0xff, 0xff, 0x7f, 1, 0, 0, 0}).expectError(ipc.CodeLimit, "")
	})
	t.Run("unknown type", func(t *testing.T) {
		raw(t, []byte{4, 0, 0, 0, 0xee, 0x0e, 0, 0}).expectError(ipc.CodeBadMessage, "")
	})
	t.Run("garbage payload", func(t *testing.T) {
		b := slices.Clone(hello)
		copy(b[8:], "XXXX")
		raw(t, b).expectError(ipc.CodeUnsupportedVersion, "")
	})
	t.Run("out of order", func(t *testing.T) {
		c := dial(t, srv)
		c.send(&ipc.StartEpoch{})
		c.expectError(ipc.CodeOutOfOrder, "")
	})
	t.Run("wrong version", func(t *testing.T) {
		c := dial(t, srv)
		c.send(&ipc.Hello{Version: 9})
		c.expectError(ipc.CodeUnsupportedVersion, "version 9")
	})
	t.Run("release not held", func(t *testing.T) {
		c := dial(t, srv)
		c.handshake(openReq())
		c.send(&ipc.StartEpoch{})
		c.send(&ipc.Release{Slot: 1, Epoch: 0, Index: 99})
		c.expectError(ipc.CodeBadRequest, "release of slot 1")
	})
	t.Run("truncated then hang up", func(t *testing.T) {
		c := raw(t, hello[:5])
		c.conn.UnixConn().CloseWrite()
		c.expectError(ipc.CodeBadFrame, "")
	})
	good := dial(t, srv)
	good.handshake(openReq())
}
