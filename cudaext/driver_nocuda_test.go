//go:build !cgo || nocuda

package cudaext

import (
	"errors"
	"strings"
	"testing"
)

// TestBuiltWithoutCUDA: in a nocuda build every way in says why there is
// no GPU, as an error that callers already treat as "no driver".
func TestBuiltWithoutCUDA(t *testing.T) {
	const why = "built without CUDA (nocuda)"
	if err := Init(); !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), why) {
		t.Fatalf("Init() = %v, want ErrNoDriver saying %q", err, why)
	}
	if _, err := DeviceCount(); !errors.Is(err, ErrNoDriver) {
		t.Errorf("DeviceCount: %v", err)
	}
	if _, err := GetDevice(0); !errors.Is(err, ErrNoDriver) {
		t.Errorf("GetDevice: %v", err)
	}
	if _, err := MemAlloc(1 << 20); !errors.Is(err, ErrNoDriver) {
		t.Errorf("MemAlloc: %v", err)
	}
	if _, err := NewMonitor(); !errors.Is(err, ErrNoDriver) {
		t.Errorf("NewMonitor: %v", err)
	}
	if si := Info(); si.GPU || !strings.Contains(si.String(), why) {
		t.Errorf("Info() = %s", si)
	}
	// What a nil or never-made handle's cleanup does on the CUDA side too.
	var s *Stream
	var e *Event
	var m *Module
	if err := errors.Join(s.Destroy(), e.Destroy(), m.Unload()); err != nil {
		t.Errorf("cleanup of nothing: %v", err)
	}
}

// NewEvents fails as NewEvent does and leaves nothing behind.
func TestNewEventsFails(t *testing.T) {
	var evs [3]*Event
	if err := NewEvents(evs[:], EventDefault); !errors.Is(err, ErrNoDriver) {
		t.Fatalf("NewEvents = %v, want ErrNoDriver", err)
	}
	for i, e := range evs {
		if e != nil {
			t.Fatalf("event %d left behind after a failure", i)
		}
	}
}
