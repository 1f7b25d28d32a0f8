// Package cudatest holds the helpers GPU tests share: skip without a usable
// driver and device, except on the GPU machine, where scripts/gpu-check.sh
// sets GNNLOADER_REQUIRE_GPU=1 and a missing GPU is a failure; and the
// primary contexts of the devices, released when the test ends.
package cudatest

import (
	"os"
	"testing"

	"github.com/gnnloader/gnnloader/cudaext"
)

// Devices returns the number of CUDA devices (at least 1), or skips the test
// (fails it under GNNLOADER_REQUIRE_GPU=1) when there is no usable one.
func Devices(t testing.TB) int {
	t.Helper()
	n, err := count(t)
	if err != nil {
		t.Skipf("no CUDA driver: %v", err)
	}
	return n
}

// Available reports whether a usable device is there, for tests that run
// their CPU part either way (it fails the test under
// GNNLOADER_REQUIRE_GPU=1 when there is none).
func Available(t testing.TB) bool {
	t.Helper()
	if _, err := count(t); err != nil {
		t.Logf("no CUDA driver: %v", err)
		return false
	}
	return true
}

// count is the number of devices, or why none can be used.
func count(t testing.TB) (int, error) {
	t.Helper()
	n, err := cudaext.DeviceCount()
	if err == nil && n == 0 {
		err = cudaext.ErrNoDevice
	}
	if err != nil && os.Getenv("GNNLOADER_REQUIRE_GPU") == "1" {
		t.Fatalf("GNNLOADER_REQUIRE_GPU=1 but: %v", err)
	}
	return n, err
}

// Contexts returns every device's primary context, retained for the test.
func Contexts(t testing.TB) []*cudaext.Context {
	t.Helper()
	n := Devices(t)
	out := make([]*cudaext.Context, 0, n)
	for i := 0; i < n; i++ {
		d, err := cudaext.GetDevice(i)
		if err != nil {
			t.Fatal(err)
		}
		c, err := d.RetainPrimaryContext()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Release() })
		out = append(out, c)
	}
	return out
}

// Context returns device 0's primary context, retained for the test.
func Context(t testing.TB) *cudaext.Context {
	t.Helper()
	return Contexts(t)[0]
}
