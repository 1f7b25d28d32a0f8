//go:build !cgo || nocuda

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gnnloader/gnnloader/ipc"
)

// noCUDA is what a loaderd built without CUDA says wherever it explains
// why it has no GPU.
const noCUDA = "built without CUDA (nocuda)"

// lockedBuffer is a bytes.Buffer the daemon's goroutines may log into.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestInfoWithoutCUDA(t *testing.T) {
	code, out, errOut := runCmd(t, "info", "--json")
	if code != 0 {
		t.Fatalf("info --json: exit %d\n%s", code, errOut)
	}
	var info struct {
		GPU    bool   `json:"gpu"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatal(err)
	}
	if info.GPU || !strings.Contains(info.Reason, noCUDA) {
		t.Fatalf("info: gpu=%v reason=%q, want no GPU because %s", info.GPU, info.Reason, noCUDA)
	}
}

// TestServeWithoutCUDA: the daemon serves the CPU path, logs why it has no
// GPU, and a trainer asking for cuda:0 gets an Error that says so.
func TestServeWithoutCUDA(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs lockedBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve", "--dataset", "synthetic:cora:0.2:1", "--socket", sock}, &logs, &logs)
	}()
	var c *ipc.Conn
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if c, err = ipc.Dial(sock, ipc.DefaultLimits); err == nil {
			break
		}
		select {
		case code := <-exited:
			t.Fatalf("serve exited %d before listening\n%s", code, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no socket after 30 s: %v\n%s", err, logs.String())
		}
	}
	defer c.Close()
	read := func() ipc.Msg {
		t.Helper()
		m, fds, err := c.ReadMsg()
		ipc.CloseFDs(fds)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if err := c.WriteMsg(&ipc.Hello{Version: ipc.Version, Name: "nocuda-test"}); err != nil {
		t.Fatal(err)
	}
	if m, ok := read().(*ipc.Welcome); !ok {
		t.Fatalf("got %T, want Welcome", m)
	}
	if err := c.WriteMsg(&ipc.Open{Split: "train", BatchSize: 8, Fanouts: []int32{2}, WorldSize: 1, Device: "cuda:0"}); err != nil {
		t.Fatal(err)
	}
	e, ok := read().(*ipc.Error)
	if !ok || !strings.Contains(e.Message, noCUDA) {
		t.Fatalf("Open(cuda:0) answered %+v, want an Error saying %s", e, noCUDA)
	}
	t.Logf("trainer asking for cuda:0: %s", e.Message)
	cancel()
	if code := <-exited; code != 0 {
		t.Fatalf("serve exited %d\n%s", code, logs.String())
	}
	if !strings.Contains(logs.String(), noCUDA) {
		t.Errorf("the daemon's log does not say why it has no GPU:\n%s", logs.String())
	}
}
