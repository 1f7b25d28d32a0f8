//go:build linux

package ipc_test

import (
	"fmt"
	"net"
	"os"

	"github.com/gnnloader/gnnloader/ipc"
	"golang.org/x/sys/unix"
)

// pair returns two connected sockets (a trainer's and the daemon's ends).
func pair() (*net.UnixConn, *net.UnixConn) {
	fds, _ := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "")
		defer f.Close()
		c, _ := net.FileConn(f)
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

// serveOne is the shape of a daemon session: read, check the order with a
// State, answer, and end any failure with an Error message.
func serveOne(c *ipc.Conn) {
	defer c.Close()
	var st ipc.State
	send := func(m ipc.Msg, fds ...int) error {
		if err := st.Next(ipc.FromDaemon, m.Type()); err != nil {
			return err
		}
		return c.WriteMsg(m, fds...)
	}
	fail := func(err error) { c.WriteMsg(ipc.ErrorMsg(err)) }
	for {
		m, fds, err := c.ReadMsg()
		if err != nil {
			fail(err) // io.EOF too: CodeOf gives internal; a real daemon just returns
			return
		}
		ipc.CloseFDs(fds) // a client never sends descriptors
		if err := st.Next(ipc.FromClient, m.Type()); err != nil {
			fail(err)
			return
		}
		switch m := m.(type) {
		case *ipc.Hello:
			if m.Version != ipc.Version {
				fail(&ipc.ProtocolError{Code: ipc.CodeUnsupportedVersion, Msg: "want version 2"})
				return
			}
			send(&ipc.Welcome{Version: ipc.Version, DaemonVersion: "example"})
		case *ipc.Open:
			if err := m.Validate(); err != nil {
				fail(err)
				return
			}
			fd, _ := unix.MemfdCreate("slots", unix.MFD_CLOEXEC)
			unix.Ftruncate(fd, 2*4096)
			send(&ipc.Opened{NumBatches: 1, Slots: 2, SlotBytes: 4096, Memory: ipc.MemoryShm,
				Regions: []ipc.Region{{Name: "n_id", Bytes: 4096, DType: "int64", Shape: []uint64{512}}},
				Scalars: []string{"batch_size"}}, fd)
			unix.Close(fd)
		case *ipc.StartEpoch:
			send(&ipc.BatchReady{Slot: 0, Epoch: m.Epoch, Counts: []uint32{1}, Scalars: []int64{1}})
			send(&ipc.EpochEnd{Epoch: m.Epoch, NumBatches: 1})
		case *ipc.Goodbye:
			return
		}
	}
}

func Example() {
	tc, dc := pair()
	go serveOne(ipc.NewConn(dc, ipc.Limits{}))
	c := ipc.NewConn(tc, ipc.Limits{})
	defer c.Close()

	c.WriteMsg(&ipc.Hello{Version: ipc.Version, PID: uint32(os.Getpid()), Name: "example"})
	c.WriteMsg(&ipc.Open{Split: "train", BatchSize: 1, Fanouts: []int32{5}, WorldSize: 1, Device: "cpu"})
	c.WriteMsg(&ipc.StartEpoch{Epoch: 0})
	for {
		m, fds, err := c.ReadMsg()
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Printf("%s fds=%d\n", m.Type(), len(fds))
		ipc.CloseFDs(fds) // a real client mmaps the memfd first
		switch m := m.(type) {
		case *ipc.BatchReady:
			c.WriteMsg(&ipc.Release{Slot: m.Slot, Epoch: m.Epoch, Index: m.Index})
		case *ipc.EpochEnd:
			c.WriteMsg(&ipc.Open{}) // out of order: the daemon answers with an Error
		case *ipc.Error:
			fmt.Println(m.Code, m.Message)
			return
		}
	}
	// Output:
	// Welcome fds=0
	// Opened fds=1
	// BatchReady fds=0
	// EpochEnd fds=0
	// Error fds=0
	// out_of_order ipc: out_of_order: Open from the client in phase idle
}
