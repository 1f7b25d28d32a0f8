//go:build unix

package ipc

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Conn is one protocol connection over a SOCK_STREAM Unix socket. It reads
// and writes whole frames and passes file descriptors with SCM_RIGHTS.
//
// One goroutine may call ReadMsg while another calls WriteMsg; concurrent
// calls of the same method are serialised. Deadlines are set on UnixConn().
type Conn struct {
	uc  *net.UnixConn
	lim Limits

	rmu  sync.Mutex
	oob  []byte
	rlim Limits // lim, with MaxFrame possibly lowered for reads (LimitReadFrame)

	wmu      sync.Mutex
	wtimeout atomic.Int64 // nanoseconds a WriteMsg may block; 0 = no limit
}

// NewConn wraps uc; zero fields of lim take their defaults. The Conn owns uc.
func NewConn(uc *net.UnixConn, lim Limits) *Conn {
	return &Conn{
		uc:   uc,
		lim:  lim.WithDefaults(),
		rlim: lim.WithDefaults(),
		oob:  make([]byte, unix.CmsgSpace(4*MaxFDs)),
	}
}

// LimitReadFrame lowers the largest frame ReadMsg accepts to n bytes (when
// n is below Limits().MaxFrame). A daemon applies it to what clients send,
// which is small (docs/protocol.md, "Limits"), so a peer can never make it
// buffer more than n bytes of a partial frame.
func (c *Conn) LimitReadFrame(n int) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if n >= HeaderSize && n < c.rlim.MaxFrame {
		c.rlim.MaxFrame = n
	}
}

// SetWriteTimeout bounds how long each WriteMsg may wait for the peer to
// take the frame (0 = no bound). A write that times out fails with an error
// wrapping os.ErrDeadlineExceeded, and the connection must then be closed.
func (c *Conn) SetWriteTimeout(d time.Duration) { c.wtimeout.Store(int64(d)) }

// Dial connects to the daemon's socket at path and, before anything is
// sent, checks who listens there: a process whose uid is not this client's,
// root's or one in $GNNLOADER_DAEMON_UID is refused with an
// *UntrustedDaemonError (see CheckDaemon).
func Dial(path string, lim Limits) (*Conn, error) {
	trusted, err := TrustedDaemonUIDs()
	if err != nil {
		return nil, err
	}
	uc, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	if err := CheckDaemon(uc, path, trusted); err != nil {
		uc.Close()
		return nil, err
	}
	return NewConn(uc, lim), nil
}

// UnixConn returns the underlying socket (for deadlines and PeerCred).
func (c *Conn) UnixConn() *net.UnixConn { return c.uc }

// Limits returns the limits the Conn applies (defaults filled in).
func (c *Conn) Limits() Limits { return c.lim }

// Close closes the socket. A ReadMsg blocked in another goroutine returns.
func (c *Conn) Close() error { return c.uc.Close() }

// ReadMsg reads one frame and decodes it. fds are the descriptors that came
// with the frame, exactly FDsFor(m) of them; the caller owns them (they are
// close-on-exec). On any error no descriptor is left open. A clean end of
// stream at a frame boundary returns io.EOF; every other failure caused by
// the peer is a *ProtocolError, and after one the connection must be closed
// (the stream is no longer at a frame boundary).
func (c *Conn) ReadMsg() (m Msg, fds []int, err error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	defer func() {
		if err != nil {
			CloseFDs(fds)
			fds = nil
			m = nil
		}
	}()
	var hdr [HeaderSize]byte
	if fds, err = c.readFull(hdr[:], fds, true); err != nil {
		return nil, fds, err
	}
	typ, err := parseHeader(hdr[:], c.rlim)
	if err != nil {
		return nil, fds, err
	}
	payload := make([]byte, binary.LittleEndian.Uint32(hdr[:])-(HeaderSize-4))
	if fds, err = c.readFull(payload, fds, false); err != nil {
		return nil, fds, err
	}
	if m, err = decodePayload(typ, payload, c.rlim); err != nil {
		return nil, fds, err
	}
	if want := FDsFor(m); len(fds) != want {
		return nil, fds, perr(CodeBadFrame, "%s came with %d file descriptors, want %d", typ, len(fds), want)
	}
	return m, fds, nil
}

// readFull fills buf, collecting descriptors from control messages. Reads
// never go past buf, so every descriptor collected belongs to this frame.
func (c *Conn) readFull(buf []byte, fds []int, atStart bool) ([]int, error) {
	got := 0
	for got < len(buf) {
		n, oobn, flags, _, err := c.uc.ReadMsgUnix(buf[got:], c.oob)
		if oobn > 0 {
			var perr2 error
			fds, perr2 = appendRights(fds, c.oob[:oobn])
			if perr2 != nil && err == nil {
				err = perr2
			}
		}
		if flags&unix.MSG_CTRUNC != 0 && err == nil {
			err = perr(CodeBadFrame, "control data truncated: more than %d file descriptors", MaxFDs)
		}
		if len(fds) > MaxFDs && err == nil {
			err = perr(CodeBadFrame, "%d file descriptors, at most %d", len(fds), MaxFDs)
		}
		got += n
		if n == 0 && oobn == 0 && err == nil {
			err = io.EOF
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if atStart && got == 0 && len(fds) == 0 {
					return fds, io.EOF
				}
				return fds, &ProtocolError{Code: CodeBadFrame, Msg: "truncated frame", Err: io.ErrUnexpectedEOF}
			}
			return fds, err
		}
	}
	return fds, nil
}

func appendRights(fds []int, oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return fds, perr(CodeBadFrame, "control data: %v", err)
	}
	var bad error
	for i := range msgs {
		if msgs[i].Header.Level != unix.SOL_SOCKET || msgs[i].Header.Type != unix.SCM_RIGHTS {
			continue
		}
		r, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			bad = perr(CodeBadFrame, "control data: %v", err)
			continue
		}
		fds = append(fds, r...)
	}
	return fds, bad
}

// WriteMsg encodes m and writes it as one frame, with fds attached to its
// first byte. len(fds) must be FDsFor(m). The descriptors stay owned by the
// caller (the kernel duplicates them into the peer). A frame larger than
// Limits().MaxFrame is not sent.
func (c *Conn) WriteMsg(m Msg, fds ...int) error {
	if want := FDsFor(m); len(fds) != want {
		return perr(CodeInternal, "%s needs %d file descriptors, got %d", m.Type(), want, len(fds))
	}
	frame, err := Marshal(m)
	if err != nil {
		return err
	}
	if len(frame) > c.lim.MaxFrame {
		return perr(CodeLimit, "%s: frame of %d bytes exceeds the limit of %d", m.Type(), len(frame), c.lim.MaxFrame)
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if d := time.Duration(c.wtimeout.Load()); d > 0 {
		c.uc.SetWriteDeadline(time.Now().Add(d))
	}
	n, _, err := c.uc.WriteMsgUnix(frame, oob, nil)
	for err == nil && n < len(frame) {
		var k int
		k, err = c.uc.Write(frame[n:])
		n += k
	}
	return err
}

// CloseFDs closes every descriptor in fds, ignoring errors.
func CloseFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
