package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gnnloader/gnnloader/gather"
	"github.com/gnnloader/gnnloader/ipc"
)

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

func TestHelpForEveryCommand(t *testing.T) {
	code, out, _ := runCmd(t, "help")
	if code != 0 {
		t.Fatalf("help exited %d", code)
	}
	for name, c := range commands {
		if !strings.Contains(out, name) {
			t.Errorf("loaderd help does not list %s", name)
		}
		if name == "bench" {
			continue
		}
		code, _, errOut := runCmd(t, name, "-h")
		if code != 0 || !strings.Contains(errOut, "usage: loaderd "+name) || (c.example != "" && !strings.Contains(errOut, "example:")) {
			t.Errorf("loaderd %s -h: exit %d, output:\n%s", name, code, errOut)
		}
	}
	if code, _, errOut := runCmd(t, "bench", "-h"); code != 0 || !strings.Contains(errOut, "sample") {
		t.Errorf("loaderd bench -h: exit %d\n%s", code, errOut)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"nope"},
		{"gen", "--like", "products"}, // no --out
		{"gen", "--like", "products", "--out", "x", "--dtype", "int8"},
		{"import", "npz"}, // no input
		{"import", "npz", "in.npz", "--out", "x", "--undirected-reduce", "sum"}, // without --undirected
		{"import", "npz", "in.npz", "--out", "x", "--undirected", "--undirected-reduce", "max"},
		{"import", "npz", "in.npz", "--out", "x", "--dtype", "int8"},
		{"import", "npz", "in.npz", "--out", "x", "--dtype", "uint8"}, // a real type, not a float one
		{"serve", "--memory-budget", "lots"},
		{"serve", "--gpu-sweep", strconv.Itoa(gather.MaxSweepParts + 1)},
		{"serve", "--gpu-sweep", "-1"},
		{"serve", "--gpu-slots", "0"},
		{"serve", "--grad-timeout", "-1s"},
		{"serve", "--max-slots", "16", "--gpu-slots", "32"}, // asked for explicitly: over the cap
		{"bench", "nope"},
	} {
		if code, _, errOut := runCmd(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)\n%s", args, code, errOut)
		}
	}
}

// TestServeMaxSlotsCapsTheGPUDefault: --max-slots under the GPU default (32)
// caps that default instead of refusing to start; the check of --gpu-slots
// passes and parsing goes on to the next flag's (a bad --log-level here).
func TestServeMaxSlotsCapsTheGPUDefault(t *testing.T) {
	code, _, errOut := runCmd(t, "serve", "--max-slots", "16", "--log-level", "nope")
	if code != 2 || strings.Contains(errOut, "--gpu-slots") || !strings.Contains(errOut, "nope") {
		t.Fatalf("serve --max-slots 16: exit %d, want 2 for the log level alone\n%s", code, errOut)
	}
}

// --gpu-cache-headroom: auto is the default headroom (0), a size that many
// bytes, 0 none (-1); sizes that do not fit an int64 are refused, not
// turned negative (which would read as none).
func TestParseHeadroom(t *testing.T) {
	for in, want := range map[string]int64{"auto": 0, " auto ": 0, "0": -1, "0GiB": -1, "10GiB": 10 << 30, "4096": 4096} {
		if got, err := parseHeadroom(in); err != nil || got != want {
			t.Errorf("parseHeadroom(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "-1GiB", "NaN", "Inf", "1e30", "8388608TiB", "9223372036854775808"} {
		if got, err := parseHeadroom(bad); err == nil {
			t.Errorf("parseHeadroom(%q) = %d, accepted", bad, got)
		}
		if got, err := parseBytes(bad); err == nil {
			t.Errorf("parseBytes(%q) = %d, accepted", bad, got)
		}
	}
}

// --gpu-cache-headroom takes a size, 0 or auto, and refuses anything else
// by name; a good one lets parsing go on to the next flag's error.
func TestServeCacheHeadroomFlag(t *testing.T) {
	for _, v := range []string{"10GiB", "0", "auto", "4294967296"} {
		code, _, errOut := runCmd(t, "serve", "--gpu-cache-headroom", v, "--log-level", "nope")
		if code != 2 || strings.Contains(errOut, "--gpu-cache-headroom") || !strings.Contains(errOut, "--log-level") {
			t.Errorf("serve --gpu-cache-headroom %s: exit %d, want 2 for the log level alone\n%s", v, code, errOut)
		}
	}
	for _, v := range []string{"lots", "-1GiB", ""} {
		code, _, errOut := runCmd(t, "serve", "--gpu-cache-headroom", v)
		if code != 2 || !strings.Contains(errOut, "--gpu-cache-headroom: bad size") {
			t.Errorf("serve --gpu-cache-headroom %q: exit %d, want 2 naming the flag\n%s", v, code, errOut)
		}
	}
}

func TestGenVerifyAndBadImport(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "cora")
	if code, _, errOut := runCmd(t, "gen", "--like", "cora", "--scale", "0.2", "--seed", "3", "--out", out); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, errOut)
	}
	code, stdout, errOut := runCmd(t, "verify", out)
	if code != 0 || !strings.Contains(stdout, "ok: 7 files") {
		t.Fatalf("verify: exit %d\n%s%s", code, stdout, errOut)
	}
	// A file that changed after the write: verify names it and fails.
	f := filepath.Join(out, "labels.arrow")
	b, _ := os.ReadFile(f)
	b[len(b)/2] ^= 1
	os.WriteFile(f, b, 0o644)
	if code, _, errOut := runCmd(t, "verify", out); code != 1 || !strings.Contains(errOut, "labels.arrow: checksum mismatch") {
		t.Fatalf("verify of a corrupt dataset: exit %d\n%s", code, errOut)
	}
	// A truncated input: a clear error, exit 1, nothing written.
	bad := filepath.Join(dir, "bad.npz")
	cora, err := os.ReadFile("../../testdata/cora.npz")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(bad, cora[:len(cora)/2], 0o644)
	dst := filepath.Join(dir, "out")
	if code, _, errOut := runCmd(t, "import", "npz", bad, "--out", dst); code != 1 || !strings.Contains(errOut, "bad.npz") {
		t.Fatalf("import of a truncated npz: exit %d\n%s", code, errOut)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Fatalf("a failed import left files behind: %v", ents)
	}
}

// TestImportDType: import --dtype float16 stores Cora's float32 features as
// float16 (half the bytes, each element the nearest float16), and the
// dataset verifies and opens as float16.
func TestImportDType(t *testing.T) {
	dir := t.TempDir()
	full, half16 := filepath.Join(dir, "f32"), filepath.Join(dir, "f16")
	for _, args := range [][]string{
		{"import", "npz", "../../testdata/cora.npz", "--out", full},
		{"import", "npz", "../../testdata/cora.npz", "--out", half16, "--dtype", "float16"},
	} {
		if code, stdout, errOut := runCmd(t, args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, stdout, errOut)
		}
	}
	if code, stdout, errOut := runCmd(t, "verify", half16); code != 0 {
		t.Fatalf("verify: exit %d\n%s%s", code, stdout, errOut)
	}
	checkFloat16Of(t, full, half16)
}

// TestVerifyChecksManifest: loaderd verify refuses a manifest edited after
// the write, and verifies a dataset whose manifest has no checksum (written
// by an older gnnloader) with a warning that says so.
func TestVerifyChecksManifest(t *testing.T) {
	out := filepath.Join(t.TempDir(), "cora")
	if code, _, errOut := runCmd(t, "gen", "--like", "cora", "--scale", "0.2", "--seed", "3", "--out", out); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, errOut)
	}
	mf := filepath.Join(out, "manifest.json")
	orig, _ := os.ReadFile(mf)
	os.WriteFile(mf, bytes.Replace(orig, []byte(`"directed": true`), []byte(`"directed": false`), 1), 0o644)
	if code, _, errOut := runCmd(t, "verify", out); code != 1 || !strings.Contains(errOut, "manifest.json: checksum mismatch") {
		t.Fatalf("verify of an edited manifest: exit %d\n%s", code, errOut)
	}
	os.WriteFile(mf, orig, 0o644)
	os.Remove(filepath.Join(out, "manifest.json.xxh64"))
	code, stdout, errOut := runCmd(t, "verify", out)
	if code != 0 || !strings.Contains(stdout, "ok: 7 files") || !strings.Contains(errOut, "manifest.json has no checksum") {
		t.Fatalf("verify of a dataset without a manifest checksum: exit %d\n%s%s", code, stdout, errOut)
	}
}

// TestOverwriteOnlyReplacesADataset: gen --overwrite into a directory that
// is not a dataset, or onto a file, fails and deletes nothing; over a
// dataset it replaces it.
func TestOverwriteOnlyReplacesADataset(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	os.Mkdir(home, 0o755)
	os.WriteFile(filepath.Join(home, "thesis.tex"), []byte("years of work"), 0o644)
	file := filepath.Join(dir, "notes.txt")
	os.WriteFile(file, []byte("notes"), 0o644)
	for _, out := range []string{home, file} {
		code, _, errOut := runCmd(t, "gen", "--like", "cora", "--scale", "0.2", "--out", out, "--overwrite")
		if code != 1 || !strings.Contains(errOut, "refusing to overwrite") {
			t.Errorf("gen --overwrite --out %s: exit %d\n%s", out, code, errOut)
		}
	}
	if b, err := os.ReadFile(filepath.Join(home, "thesis.tex")); err != nil || string(b) != "years of work" {
		t.Fatalf("the directory's file is gone or changed: %v", err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "notes" {
		t.Fatalf("the file is gone or changed: %v", err)
	}
	ds := filepath.Join(dir, "cora")
	for _, seed := range []string{"1", "2"} {
		if code, _, errOut := runCmd(t, "gen", "--like", "cora", "--scale", "0.2", "--seed", seed, "--out", ds, "--overwrite"); code != 0 {
			t.Fatalf("gen --overwrite over a dataset: exit %d\n%s", code, errOut)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ds, "manifest.json")); !bytes.Contains(b, []byte("--seed 2")) {
		t.Fatalf("the dataset was not replaced:\n%s", b)
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"8GiB": 8 << 30, "512MiB": 512 << 20, "1.5GB": 1.5e9, "1024": 1024} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := parseBytes("-3GiB"); err == nil {
		t.Error("negative size accepted")
	}
}

func TestParseShare(t *testing.T) {
	for _, c := range []struct {
		in    string
		bytes int64
		pct   float64
	}{{"20%", 0, 20}, {" 12.5 % ", 0, 12.5}, {"100%", 0, 100}, {"8GiB", 8 << 30, 0}, {"0", 0, 0}} {
		if b, p, err := parseShare(c.in); err != nil || b != c.bytes || p != c.pct {
			t.Errorf("parseShare(%q) = %d, %g, %v; want %d, %g", c.in, b, p, err, c.bytes, c.pct)
		}
	}
	for _, bad := range []string{"101%", "-1%", "x%", "%", "NaN%", "-3GiB"} {
		if _, _, err := parseShare(bad); err == nil {
			t.Errorf("parseShare(%q) accepted", bad)
		}
	}
}

func TestInfoJSONParses(t *testing.T) {
	code, out, errOut := runCmd(t, "info", "--json")
	if code != 0 {
		t.Fatalf("info --json: exit %d\n%s", code, errOut)
	}
	var info struct {
		GPU     bool              `json:"gpu"`
		Reason  string            `json:"reason"`
		Devices []json.RawMessage `json:"devices"`
		THP     string            `json:"transparent_hugepages"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("info --json is not JSON: %v\n%s", err, out)
	}
	if info.GPU == (info.Reason != "") || info.GPU != (len(info.Devices) > 0) {
		t.Fatalf("inconsistent: gpu=%v reason=%q devices=%d", info.GPU, info.Reason, len(info.Devices))
	}
}

// serveInBackground runs `loaderd serve args...` until the test ends and
// returns its exit status channel.
func serveInBackground(t *testing.T, args ...string) (cancel func(), done <-chan int, stderr func() string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var e syncBuffer
	ch := make(chan int, 1)
	go func() {
		var o bytes.Buffer
		ch <- run(ctx, append([]string{"serve", "--gpu=false", "--dataset", "synthetic:cora:0.1:0"}, args...), &o, &e)
	}()
	t.Cleanup(cancel)
	return cancel, ch, e.String
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeDefaultSocket: without --socket, serve listens where
// ipc.DefaultSocketPath (and the Python client) look, in a directory it
// made private, and a client dialling that default is served.
func TestServeDefaultSocket(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", xdg)
	t.Setenv(ipc.SocketEnv, "")
	want := filepath.Join(xdg, "gnnloader", "loaderd.sock")
	if got := ipc.DefaultSocketPath(); got != want {
		t.Fatalf("DefaultSocketPath = %q, want %q", got, want)
	}
	cancel, done, stderr := serveInBackground(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if st, err := os.Stat(want); err == nil && st.Mode()&os.ModeSocket != 0 {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d before listening at %s:\n%s", code, want, stderr())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no socket at %s after 20 s:\n%s", want, stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := ipc.CheckSocketDir(filepath.Dir(want)); err != nil {
		t.Error(err)
	}
	c, err := ipc.Dial(ipc.DefaultSocketPath(), ipc.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteMsg(&ipc.Hello{Version: ipc.Version, Name: "default"}); err != nil {
		t.Fatal(err)
	}
	if m, _, err := c.ReadMsg(); err != nil || m.Type() != ipc.TypeWelcome {
		t.Fatalf("answer to Hello: %v %v", m, err)
	}
	c.Close()
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, stderr())
	}
}

// TestServeRefusesUnsafeDefaultDir: a default socket directory that others
// may write to (planted by someone else) stops serve before it listens;
// --socket elsewhere still works.
func TestServeRefusesUnsafeDefaultDir(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", xdg)
	t.Setenv(ipc.SocketEnv, "")
	planted := filepath.Join(xdg, "gnnloader")
	if err := os.Mkdir(planted, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(planted, 0o777); err != nil {
		t.Fatal(err)
	}
	cancel, done, stderr := serveInBackground(t)
	select {
	case code := <-done:
		if code != 1 || !strings.Contains(stderr(), "unsafe socket directory") || !strings.Contains(stderr(), planted) {
			t.Errorf("serve exited %d:\n%s", code, stderr())
		}
	case <-time.After(20 * time.Second):
		cancel()
		<-done
		t.Fatalf("serve did not refuse the world-writable %s:\n%s", planted, stderr())
	}
	if _, err := os.Lstat(filepath.Join(planted, "loaderd.sock")); err == nil {
		t.Error("serve listened in the unsafe directory")
	}
}

// --fill-trace to a path that cannot be created fails at once, naming the
// flag, before any dataset is loaded (the dataset named here does not exist,
// and its error never comes).
func TestServeFillTraceBadPath(t *testing.T) {
	code, _, errOut := runCmd(t, "serve", "--gpu=false", "--fill-trace", filepath.Join(t.TempDir(), "no", "such", "dir", "fills"),
		"--dataset", filepath.Join(t.TempDir(), "missing"), "--socket", filepath.Join(t.TempDir(), "s.sock"))
	if code == 0 || !strings.Contains(errOut, "--fill-trace") || strings.Contains(errOut, "missing") {
		t.Fatalf("exit %d, want a --fill-trace error before the dataset's\n%s", code, errOut)
	}
}

// --fill-trace naming a FIFO (or any file that is not a regular one) is
// refused at once: a FIFO without a reader would block the open, one whose
// reader stops would block every fill's write. The run must end within
// seconds with the flag's error.
func TestServeFillTraceNotARegularFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fills")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	type result struct {
		code   int
		errOut string
	}
	done := make(chan result, 1)
	go func() {
		code, _, errOut := runCmd(t, "serve", "--gpu=false", "--fill-trace", fifo,
			"--dataset", filepath.Join(t.TempDir(), "missing"), "--socket", filepath.Join(t.TempDir(), "s.sock"))
		done <- result{code, errOut}
	}()
	select {
	case r := <-done:
		if r.code == 0 || !strings.Contains(r.errOut, "--fill-trace") || strings.Contains(r.errOut, "missing") {
			t.Fatalf("exit %d, want a --fill-trace error before the dataset's\n%s", r.code, r.errOut)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve --fill-trace FIFO blocked")
	}
	// A FIFO with a reader opens, and is refused as not a regular file.
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	code, _, errOut := runCmd(t, "serve", "--gpu=false", "--fill-trace", fifo, "--dataset", filepath.Join(t.TempDir(), "missing"))
	if code == 0 || !strings.Contains(errOut, "not a regular file") {
		t.Fatalf("FIFO with a reader: exit %d, want \"not a regular file\"\n%s", code, errOut)
	}
}
