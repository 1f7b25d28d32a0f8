package serve

// The trainer and memory budgets: what is refused, and what a disconnect
// gives back.

import (
	"testing"

	"github.com/gnnloader/gnnloader/ipc"
)

func TestDisconnectFreesSlots(t *testing.T) {
	srv, _ := testServer(t, Config{})
	c := dial(t, srv)
	c.handshake(openReq())
	c.send(&ipc.StartEpoch{})
	c.recv()
	if srv.Trainers() != 1 || srv.SlotBytes() == 0 {
		t.Fatalf("trainers %d slot bytes %d", srv.Trainers(), srv.SlotBytes())
	}
	c.conn.Close() // no Goodbye
	waitFor(t, func() bool { return srv.Trainers() == 0 && srv.SlotBytes() == 0 && srv.BudgetUsed() == 0 })
}

func TestMemoryBudgetAndTrainerLimit(t *testing.T) {
	srv, _ := testServer(t, Config{MaxTrainers: 1})
	a := dial(t, srv)
	a.handshake(openReq())
	b := dial(t, srv)
	b.send(&ipc.Hello{Version: ipc.Version})
	b.recv()
	o := openReq()
	b.send(&o)
	b.expectError(ipc.CodeBusy, "limit 1")

	// Slots that can never fit are a limit; slots that do not fit now,
	// beside another trainer's, make the daemon busy.
	srv2, _ := testServer(t, Config{MemoryBudget: 1024})
	c := dial(t, srv2)
	c.send(&ipc.Hello{Version: ipc.Version})
	c.recv()
	c.send(&o)
	c.expectError(ipc.CodeLimit, "exceed the whole memory budget")

	probe, _ := testServer(t, Config{})
	p := dial(t, probe)
	p.handshake(openReq())
	one := probe.BudgetUsed()
	srv3, _ := testServer(t, Config{MemoryBudget: one + one/2})
	first := dial(t, srv3)
	first.handshake(openReq())
	second := dial(t, srv3)
	second.send(&ipc.Hello{Version: ipc.Version})
	second.recv()
	second.send(&o)
	second.expectError(ipc.CodeBusy, "do not fit the memory budget")
}
