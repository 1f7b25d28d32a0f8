package chaos

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gnnloader/gnnloader/ipc"
)

// hostiles are misbehaving clients running beside the chaos trainers, in
// the test process: they must cost the daemon nothing that outlives them,
// and never disturb the trainers.
type hostiles struct {
	socket string
	stop   chan struct{}
	wg     sync.WaitGroup

	stalledClosed atomic.Int64 // stalled handshakes the daemon closed with Error(limit)
	readersCut    atomic.Int64 // non-reading trainers the daemon disconnected
}

func startHostiles(socket string) *hostiles {
	h := &hostiles{socket: socket, stop: make(chan struct{})}
	for range 3 {
		h.wg.Go(h.stallHandshakes)
	}
	h.wg.Go(h.stopReading)
	return h
}

// end stops the hostile clients and waits for them.
func (h *hostiles) end() {
	close(h.stop)
	h.wg.Wait()
}

func (h *hostiles) stopped() bool {
	select {
	case <-h.stop:
		return true
	default:
		return false
	}
}

// pause waits d, or less if the hostiles are stopped.
func (h *hostiles) pause(d time.Duration) {
	select {
	case <-h.stop:
	case <-time.After(d):
	}
}

// stallHandshakes connects, sends the start of a 32 KiB frame and nothing
// more, and waits for the daemon to give up on it; again and again.
func (h *hostiles) stallHandshakes() {
	for !h.stopped() {
		c, err := net.Dial("unix", h.socket)
		if err != nil {
			h.pause(20 * time.Millisecond) // the daemon is away
			continue
		}
		hdr := make([]byte, ipc.HeaderSize)
		binary.LittleEndian.PutUint32(hdr, 32<<10)
		binary.LittleEndian.PutUint16(hdr[4:], uint16(ipc.TypeHello))
		c.Write(hdr)
		c.Write(make([]byte, 1000))
		done := make(chan []byte, 1)
		go func() {
			b, _ := io.ReadAll(c)
			done <- b
		}()
		select {
		case b := <-done:
			if isError(b, ipc.CodeLimit) {
				h.stalledClosed.Add(1)
			}
		case <-h.stop:
		}
		c.Close()
	}
}

// isError reports whether the frames in b end with an Error of code.
func isError(b []byte, code ipc.Code) bool {
	for len(b) >= ipc.HeaderSize {
		size := int(binary.LittleEndian.Uint32(b)) + 4
		if size > len(b) {
			return false
		}
		m, err := ipc.Unmarshal(b[:size], ipc.DefaultLimits)
		if err != nil {
			return false
		}
		if e, ok := m.(*ipc.Error); ok {
			return e.Code == code
		}
		b = b[size:]
	}
	return false
}

// stopReading opens as a trainer of its own job and then never consumes
// what the daemon sends: it peeks at the socket (MSG_PEEK) to learn each
// BatchReady and releases it, so the daemon keeps writing into a socket
// nobody reads until it gives up on the trainer; again and again.
func (h *hostiles) stopReading() {
	for !h.stopped() {
		if h.readUntilCut() {
			h.readersCut.Add(1)
		} else {
			h.pause(20 * time.Millisecond)
		}
	}
}

// readUntilCut is one non-reading trainer; it reports whether the daemon
// disconnected it.
func (h *hostiles) readUntilCut() bool {
	c, err := ipc.Dial(h.socket, ipc.DefaultLimits)
	if err != nil {
		return false
	}
	defer c.Close()
	go func() { // the test ending closes the connection
		<-h.stop
		c.Close()
	}()
	if c.WriteMsg(&ipc.Hello{Version: ipc.Version, Name: "chaos non-reader"}) != nil {
		return false
	}
	if m, _, err := c.ReadMsg(); err != nil || m.Type() != ipc.TypeWelcome {
		return false
	}
	open := &ipc.Open{Job: "non-reader", Split: "train", BatchSize: 1, Fanouts: []int32{2}, Seed: 1, WorldSize: 1, Device: "cpu"}
	if c.WriteMsg(open) != nil {
		return false
	}
	m, fds, err := c.ReadMsg()
	ipc.CloseFDs(fds)
	if err != nil || m.Type() != ipc.TypeOpened {
		return false
	}
	rc, err := c.UnixConn().SyscallConn()
	if err != nil {
		return false
	}
	buf := make([]byte, 1<<20)
	seen, epoch := 0, uint32(0)
	if c.WriteMsg(&ipc.StartEpoch{Epoch: epoch}) != nil {
		return false
	}
	for {
		var k int
		var perr error
		if err := rc.Read(func(fd uintptr) bool {
			k, _, perr = unix.Recvfrom(int(fd), buf, unix.MSG_PEEK)
			return !errors.Is(perr, unix.EAGAIN) // wait in the poller for more
		}); err != nil {
			return false // closed by the test
		}
		if perr != nil || k == 0 {
			return perr == nil || errors.Is(perr, unix.ECONNRESET) // the daemon hung up on us
		}
		if k == seen { // nothing new: the daemon is blocked on our full socket, or gone
			var hup bool
			rc.Control(func(fd uintptr) {
				p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
				n, _ := unix.Poll(p, 0)
				hup = n > 0 && p[0].Revents&(unix.POLLRDHUP|unix.POLLHUP) != 0
			})
			if hup {
				return true // peeking never reaches the end: the unread bytes stay
			}
			time.Sleep(time.Millisecond)
			continue
		}
		for seen+ipc.HeaderSize <= k {
			size := int(binary.LittleEndian.Uint32(buf[seen:])) + 4
			if seen+size > k {
				break
			}
			m, err := ipc.Unmarshal(buf[seen:seen+size], ipc.DefaultLimits)
			seen += size
			if err != nil {
				return false
			}
			switch m := m.(type) {
			case *ipc.BatchReady:
				if c.WriteMsg(&ipc.Release{Slot: m.Slot, Epoch: m.Epoch, Index: m.Index}) != nil {
					return true
				}
			case *ipc.EpochEnd:
				epoch++
				if c.WriteMsg(&ipc.StartEpoch{Epoch: epoch}) != nil {
					return true
				}
			default: // an Error or Goodbye: cut off
				return true
			}
		}
	}
}
