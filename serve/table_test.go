package serve

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gnnloader/gnnloader/pinned"
)

// The table socket hands a peer the feature table read-only: the peer can
// map and read it, but neither map it writable nor resize it.
func TestTableSharedReadOnly(t *testing.T) {
	pinned.SetShared(true)
	src, err := OpenSource("synthetic:cora:0.2:1", true, nil, nil)
	pinned.SetShared(false)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dir := t.TempDir()
	srv := New(src, Config{Socket: filepath.Join(dir, "s.sock")}, nil)
	path := filepath.Join(dir, "table.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- srv.ServeTable(ctx, path) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitFor(t, func() bool {
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(buf[:n]), `"num_rows"`) {
		t.Fatalf("no table description: %q", buf[:n])
	}
	msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		t.Fatalf("no descriptor: %v", err)
	}
	fd := fds[0]
	defer unix.Close(fd)
	size := len(src.Data.Features)
	ro, err := unix.Mmap(fd, 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("read-only map: %v", err)
	}
	defer unix.Munmap(ro)
	if string(ro[:64]) != string(src.Data.Features[:64]) {
		t.Fatal("the shared table differs from the served one")
	}
	if w, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
		unix.Munmap(w)
		t.Fatal("the peer could map the table writable")
	}
	if err := unix.Ftruncate(fd, 0); err == nil {
		t.Fatal("the peer could resize the table")
	}
}
