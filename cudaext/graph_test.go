package cudaext

import (
	"bytes"
	"testing"
)

// A captured graph runs nothing until launched, then runs what was
// captured, in order, each time it is launched; the stream keeps working
// as a stream after the capture.
func TestGraphCaptureAndLaunch(t *testing.T) {
	c := primary(t)
	err := c.Do(func() error {
		s, err := NewStream()
		if err != nil {
			return err
		}
		defer s.Destroy()
		const n = 1 << 16
		a, err := MemAlloc(n)
		if err != nil {
			return err
		}
		defer MemFree(a)
		b, err := MemAlloc(n)
		if err != nil {
			return err
		}
		defer MemFree(b)
		zero := func() error {
			if err := MemsetD8Async(a, 0, n, s); err != nil {
				return err
			}
			return MemsetD8Async(b, 0, n, s)
		}
		read := func(p DevicePtr) ([]byte, error) {
			got := make([]byte, n)
			return got, CopyToHost(got, p, s)
		}
		if err := zero(); err != nil {
			return err
		}
		if err := s.BeginCapture(); err != nil {
			return err
		}
		// Captured: a = 0x7e, then b = a.
		if err := MemsetD8Async(a, 0x7e, n, s); err != nil {
			return err
		}
		if err := MemcpyDtoDAsync(b, a, n, s); err != nil {
			return err
		}
		g, err := s.EndCapture()
		if err != nil {
			return err
		}
		defer g.Destroy()
		if err := s.Synchronize(); err != nil {
			return err
		}
		got, err := read(b)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, make([]byte, n)) {
			t.Error("the captured work ran before the graph was launched")
		}
		want := bytes.Repeat([]byte{0x7e}, n)
		for i := range 3 {
			if err := zero(); err != nil {
				return err
			}
			if err := g.Launch(s); err != nil {
				return err
			}
			if got, err = read(b); err != nil {
				return err
			}
			if !bytes.Equal(got, want) {
				t.Errorf("launch %d: b is not the captured memset's value", i)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
