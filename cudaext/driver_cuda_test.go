//go:build cgo && !nocuda

package cudaext

import (
	"errors"
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
