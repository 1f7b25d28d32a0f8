package ipc

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// twinScript decodes hex frames from stdin with python/gnnloader/protocol.py
// (without the package's __init__, which needs torch) and prints, per frame,
// "ok <hex of the re-encoded frame>" or "err <code>".
const twinScript = `
import importlib, sys, types
pkg = types.ModuleType("p"); pkg.__path__ = [sys.argv[1]]; sys.modules["p"] = pkg
P = importlib.import_module("p.protocol")
lim = P.Limits(max_frame=1 << 16)
for line in sys.stdin:
    try:
        print("ok", P.marshal(P.unmarshal(bytes.fromhex(line.strip()), lim)).hex())
    except P.ProtocolError as e:
        print("err", int(e.code))
`

// TestPythonTwin is a differential test of the two implementations: random
// mutations of the golden, bad and gradient-exchange frames must be accepted (re-encoding to
// the same bytes) or refused (with the same code) by both.
func TestPythonTwin(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	var seeds [][]byte
	for _, dir := range []string{"golden", "bad", "ring"} {
		files, _ := filepath.Glob(filepath.Join("testdata", dir, "*.bin"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			seeds = append(seeds, b)
		}
	}
	if len(seeds) == 0 {
		t.Fatal("no golden frames")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	frames := make([][]byte, 0, 20000)
	frames = append(frames, seeds...)
	for len(frames) < cap(frames) {
		b := append([]byte(nil), seeds[rng.IntN(len(seeds))]...)
		for k := 1 + rng.IntN(3); k > 0; k-- {
			switch op := rng.IntN(6); {
			case op < 3 && len(b) > 0: // flip a byte, often a small value
				b[rng.IntN(len(b))] = byte(rng.IntN(4)) ^ byte(rng.IntN(2)*0xff)
			case op == 3 && len(b) > 0: // cut
				b = b[:rng.IntN(len(b))]
			case op == 4: // append
				b = append(b, byte(rng.IntN(256)))
			default: // fix the length field
				if len(b) >= 4 {
					b = setLen(b)
				}
			}
		}
		if rng.IntN(2) == 0 && len(b) >= 4 {
			b = setLen(b)
		}
		frames = append(frames, b)
	}
	var in bytes.Buffer
	for _, f := range frames {
		in.WriteString(hex.EncodeToString(f))
		in.WriteByte('\n')
	}
	cmd := exec.Command(py, "-c", twinScript, filepath.Join("..", "python", "gnnloader"))
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("python: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	accepted, bad := 0, 0
	for i := 0; sc.Scan(); i++ {
		if i >= len(frames) {
			t.Fatal("python printed too many lines")
		}
		var want string
		m, err := Unmarshal(frames[i], Limits{MaxFrame: 1 << 16})
		if err != nil {
			want = fmt.Sprintf("err %d", CodeOf(err))
		} else {
			accepted++
			want = "ok " + hex.EncodeToString(mustMarshal(t, m))
		}
		if got := strings.TrimSpace(sc.Text()); got != want {
			bad++
			if bad <= 5 {
				t.Errorf("frame %x:\n go     %s (%v)\n python %s", frames[i], want, err, got)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d frames decoded differently", bad, len(frames))
	}
	t.Logf("%d frames, %d accepted by both, the rest refused with the same code", len(frames), accepted)
}
