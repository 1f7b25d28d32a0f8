package ipc

import "testing"

type step struct {
	dir Dir
	t   Type
}

func TestStateLegal(t *testing.T) {
	seq := []step{
		{FromClient, TypeHello}, {FromDaemon, TypeWelcome},
		{FromClient, TypeOpen}, {FromDaemon, TypeOpened},
		{FromClient, TypeStartEpoch},
		{FromDaemon, TypeBatchReady}, {FromDaemon, TypeBatchReady}, {FromClient, TypeRelease},
		{FromDaemon, TypeBatchReady}, {FromClient, TypeRelease}, {FromDaemon, TypeEpochEnd},
		{FromClient, TypeRelease},                                // late release after EpochEnd
		{FromClient, TypeStartEpoch}, {FromDaemon, TypeEpochEnd}, // empty epoch
		{FromClient, TypeGoodbye},
	}
	var s State
	for i, st := range seq {
		if err := s.Next(st.dir, st.t); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if s.Phase() != PhaseClosed {
		t.Fatalf("phase %s", s.Phase())
	}
}

func TestStateIllegal(t *testing.T) {
	prefix := []step{{FromClient, TypeHello}, {FromDaemon, TypeWelcome}, {FromClient, TypeOpen}, {FromDaemon, TypeOpened}}
	cases := []struct {
		name  string
		after int // steps of prefix taken first
		extra []step
		bad   step
	}{
		{"Open before Hello", 0, nil, step{FromClient, TypeOpen}},
		{"Hello from daemon", 0, nil, step{FromDaemon, TypeHello}},
		{"Welcome from client", 1, nil, step{FromClient, TypeWelcome}},
		{"second Hello", 2, nil, step{FromClient, TypeHello}},
		{"StartEpoch before Open", 2, nil, step{FromClient, TypeStartEpoch}},
		{"Release before Opened", 3, nil, step{FromClient, TypeRelease}},
		{"second Open", 4, nil, step{FromClient, TypeOpen}},
		{"BatchReady between epochs", 4, nil, step{FromDaemon, TypeBatchReady}},
		{"EpochEnd between epochs", 4, nil, step{FromDaemon, TypeEpochEnd}},
		{"StartEpoch in an epoch", 4, []step{{FromClient, TypeStartEpoch}}, step{FromClient, TypeStartEpoch}},
		{"Release from daemon", 4, []step{{FromClient, TypeStartEpoch}}, step{FromDaemon, TypeRelease}},
		{"anything after Goodbye", 4, []step{{FromDaemon, TypeGoodbye}}, step{FromClient, TypeRelease}},
		{"Error after Error", 1, []step{{FromDaemon, TypeError}}, step{FromDaemon, TypeError}},
		{"unknown type", 4, nil, step{FromClient, Type(42)}},
	}
	for _, c := range cases {
		var s State
		for _, st := range append(append([]step(nil), prefix[:c.after]...), c.extra...) {
			if err := s.Next(st.dir, st.t); err != nil {
				t.Fatalf("%s: setup: %v", c.name, err)
			}
		}
		p := s.Phase()
		if err := s.Next(c.bad.dir, c.bad.t); CodeOf(err) != CodeOutOfOrder {
			t.Errorf("%s: Next = %v, want out_of_order", c.name, err)
		}
		if s.Phase() != p {
			t.Errorf("%s: phase changed on a refused message", c.name)
		}
	}
	// Error and Goodbye are legal in every open phase, from either side.
	for n := 0; n <= len(prefix); n++ {
		for _, d := range []Dir{FromClient, FromDaemon} {
			var s State
			for _, st := range prefix[:n] {
				s.Next(st.dir, st.t)
			}
			if err := s.Next(d, TypeError); err != nil {
				t.Errorf("Error from %s after %d steps: %v", d, n, err)
			}
		}
	}
}
