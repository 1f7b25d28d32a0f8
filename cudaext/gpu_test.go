package cudaext

import (
	"os"
	"testing"
)

// needGPU skips without a usable driver and device, unless
// GNNLOADER_REQUIRE_GPU=1 (scripts/gpu-check.sh), where that is a failure.
func needGPU(t testing.TB) {
	t.Helper()
	n, err := DeviceCount()
	if err == nil && n == 0 {
		err = ErrNoDevice
	}
	if err != nil {
		if os.Getenv("GNNLOADER_REQUIRE_GPU") == "1" {
			t.Fatalf("GNNLOADER_REQUIRE_GPU=1 but: %v", err)
		}
		t.Skipf("no CUDA driver: %v", err)
	}
}

// primary retains device 0's primary context for the test.
func primary(t testing.TB) *Context {
	t.Helper()
	needGPU(t)
	d, err := GetDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.RetainPrimaryContext()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Release() })
	return c
}
