package ipc

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
)

// FuzzUnmarshal checks, for any input: Unmarshal never panics, fails only
// with a *ProtocolError, allocates at most a small multiple of the input,
// and any frame it accepts re-encodes to the identical bytes. The seed
// corpus in testdata/fuzz/FuzzUnmarshal is the golden and bad frames
// (regenerate with go test ./ipc -run TestGolden -update).
//
//	go test -run='^$' -fuzz=FuzzUnmarshal -fuzztime=20s ./ipc/
func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte{})
	var calls int
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := Limits{MaxFrame: 1 << 16}
		calls++
		measure := calls%16 == 0
		var m0, m1 runtime.MemStats
		if measure {
			runtime.ReadMemStats(&m0)
		}
		m, err := Unmarshal(data, lim)
		if measure {
			runtime.ReadMemStats(&m1)
			// Decoded slices hold at most ~8x the bytes they were decoded
			// from (a 2-byte empty shape list becomes a 24-byte slice
			// header, a Region struct 88 bytes from 22), plus fixed costs
			// and the fuzzing engine's own few KiB in the background.
			if d := m1.TotalAlloc - m0.TotalAlloc; d > 8*uint64(len(data))+64<<10 {
				t.Fatalf("allocated %d bytes decoding %d", d, len(data))
			}
		}
		if err != nil {
			var pe *ProtocolError
			if !errors.As(err, &pe) || pe.Code == 0 {
				t.Fatalf("error %v is not a *ProtocolError", err)
			}
			if m != nil {
				t.Fatalf("message %#v with error %v", m, err)
			}
			return
		}
		b, err := Marshal(m)
		if err != nil {
			t.Fatalf("decoded %#v but cannot re-encode: %v", m, err)
		}
		if !bytes.Equal(b, data) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", data, b)
		}
	})
}
