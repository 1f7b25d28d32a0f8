package cudaext

import (
	"context"
	"errors"
	"testing"
	"time"
)

// PollUntil asks again until done, passes an error on, and ends with its
// context; it needs no GPU.
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
	start, calls := time.Now(), 0
	err := PollUntil(ctx, func() (bool, error) { calls++; return false, nil })
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("never done, 20 ms context: %v after %v", err, time.Since(start))
	}
	if calls > 1000 { // 20 ms at intervals of at least 20 us
		t.Fatalf("%d queries in 20 ms: the poll does not sleep", calls)
	}
}
