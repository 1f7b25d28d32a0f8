package cudaext

import (
	"context"
	"errors"
	"testing"
	"time"
)

// PollUntil asks again until done, passes an error on, sleeps between
// calls once its spin phase is over, and ends with its context (also while
// spinning); it needs no GPU.
func TestPollUntil(t *testing.T) {
	calls := 0
	if err := PollUntil(context.Background(), func() (bool, error) { calls++; return calls == 5, nil }); err != nil || calls != 5 {
		t.Fatalf("done on the 5th call: err %v after %d calls", err, calls)
	}
	boom := errors.New("boom")
	if err := PollUntil(context.Background(), func() (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Fatalf("a failing query: %v, want it back", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	var late int // calls after the spin phase
	err := PollUntil(ctx, func() (bool, error) {
		if time.Since(start) > spinPoll {
			late++
		}
		return false, nil
	})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("never done, 20 ms context: %v after %v", err, time.Since(start))
	}
	if late > 40 { // 19.5 ms at intervals of sleepPoll (1 ms)
		t.Fatalf("%d queries after the spin phase in 20 ms: the poll does not sleep", late)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	calls = 0
	err = PollUntil(cctx, func() (bool, error) {
		if calls++; calls == 3 {
			ccancel()
		}
		return false, nil
	})
	if !errors.Is(err, context.Canceled) || calls != 3 {
		t.Fatalf("context cancelled during the spin phase: %v after %d calls, want Canceled after 3", err, calls)
	}
}
