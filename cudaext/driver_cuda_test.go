//go:build cgo && !nocuda

package cudaext

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestProbeMissingSymbol(t *testing.T) {
	err := probe("libc.so.6")
	if err == nil || !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "cuInit") {
		t.Fatalf("probe(libc) = %v, want an error naming cuInit", err)
	}
	err = probe("libcuda-does-not-exist.so.1")
	if err == nil || !strings.Contains(err.Error(), "libcuda-does-not-exist.so.1") {
		t.Fatalf("probe(missing) = %v", err)
	}
}

// Every driver call made before Init (or after Init failed) is an error
// naming CUDA_ERROR_NOT_INITIALIZED, not a jump through a null entry point.
// It runs in a child process of the test binary, where nothing has called
// Init yet.
func TestCallsBeforeInitAreErrors(t *testing.T) {
	if os.Getenv("GNNLOADER_CUDAEXT_BEFORE_INIT") == "1" {
		callsBeforeInit()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCallsBeforeInitAreErrors$", "-test.v")
	cmd.Env = append(os.Environ(), "GNNLOADER_CUDAEXT_BEFORE_INIT=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the calls before Init crashed or failed: %v\n%s", err, out)
	}
	for _, op := range []string{"cuMemGetInfo", "cuStreamCreate", "cuEventCreate", "cuMemAlloc", "cuStreamWriteValue32",
		"cuStreamBeginCapture", "cuStreamEndCapture", "cuGraphLaunch"} {
		if !strings.Contains(string(out), op+": NOT_INITIALIZED") {
			t.Errorf("no NOT_INITIALIZED error from %s before Init:\n%s", op, out)
		}
	}
}

// callsBeforeInit prints, for each call, "op: NOT_INITIALIZED" when it
// failed with that code.
func callsBeforeInit() {
	report := func(op string, err error) {
		var e *Error
		if errors.As(err, &e) && e.Code == codeNotInitialized && e.Name == "CUDA_ERROR_NOT_INITIALIZED" {
			fmt.Printf("%s: NOT_INITIALIZED\n", op)
			return
		}
		fmt.Printf("%s: %v\n", op, err)
	}
	_, _, err := MemGetInfo()
	report("cuMemGetInfo", err)
	_, err = NewStream()
	report("cuStreamCreate", err)
	_, err = NewEvent(EventDisableTiming)
	report("cuEventCreate", err)
	_, err = MemAlloc(1 << 20)
	report("cuMemAlloc", err)
	// The optional entry points too (stream memory operations, graphs).
	var s Stream
	report("cuStreamWriteValue32", s.WriteValue32(0, 1))
	report("cuStreamBeginCapture", s.BeginCapture())
	_, err = s.EndCapture()
	report("cuStreamEndCapture", err)
	report("cuGraphLaunch", (&Graph{}).Launch(&s))
}
