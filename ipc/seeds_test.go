//go:build linux

package ipc

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestSeedsState(t *testing.T) {
	var s State
	for i, st := range []step{
		{FromClient, TypeHello}, {FromDaemon, TypeWelcome},
		{FromClient, TypeSeeds}, // stays in open
		{FromClient, TypeOpen}, {FromDaemon, TypeOpened},
	} {
		if err := s.Next(st.dir, st.t); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if s.Phase() != PhaseIdle {
		t.Fatalf("phase %s, want idle", s.Phase())
	}
	// Seeds anywhere but in phase open is out of order.
	for _, prefix := range [][]step{
		nil,
		{{FromClient, TypeHello}},
		{{FromClient, TypeHello}, {FromDaemon, TypeWelcome}, {FromClient, TypeOpen}},
		{{FromClient, TypeHello}, {FromDaemon, TypeWelcome}, {FromClient, TypeOpen}, {FromDaemon, TypeOpened}},
	} {
		var s State
		for _, st := range prefix {
			if err := s.Next(st.dir, st.t); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Next(FromClient, TypeSeeds); CodeOf(err) != CodeOutOfOrder {
			t.Errorf("Seeds in phase %s: %v, want out_of_order", s.Phase(), err)
		}
	}
	var d State
	d.Next(FromClient, TypeHello)
	d.Next(FromDaemon, TypeWelcome)
	if err := d.Next(FromDaemon, TypeSeeds); CodeOf(err) != CodeOutOfOrder {
		t.Errorf("Seeds from the daemon: %v", err)
	}
}

func TestSeedsCarriesOneFD(t *testing.T) {
	if FDsFor(&Seeds{Count: 3}) != 1 {
		t.Fatal("FDsFor(Seeds) != 1")
	}
	a, b := socketpair(t)
	ca, cb := NewConn(a, Limits{}), NewConn(b, Limits{})
	if err := ca.WriteMsg(&Seeds{Count: 1}); err == nil {
		t.Error("WriteMsg accepted Seeds without its memfd")
	}
	fd := memfd(t, []byte{7, 0, 0, 0, 0, 0, 0, 0})
	defer unix.Close(fd)
	if err := ca.WriteMsg(&Seeds{Count: 1}, fd); err != nil {
		t.Fatal(err)
	}
	m, fds, err := cb.ReadMsg()
	if err != nil {
		t.Fatal(err)
	}
	defer CloseFDs(fds)
	if s, ok := m.(*Seeds); !ok || s.Count != 1 || len(fds) != 1 {
		t.Fatalf("ReadMsg = %#v with %d fds", m, len(fds))
	}
	buf := make([]byte, 8)
	if n, err := unix.Pread(fds[0], buf, 0); n != 8 || err != nil || buf[0] != 7 {
		t.Fatalf("memfd content %v, %d, %v", buf, n, err)
	}
	// The same frame without its descriptor is refused.
	rawSend(t, a, mustMarshal(t, &Seeds{Count: 1}))
	if _, _, err := cb.ReadMsg(); CodeOf(err) != CodeBadFrame {
		t.Fatalf("Seeds without fd: %v, want bad_frame", err)
	}
}
