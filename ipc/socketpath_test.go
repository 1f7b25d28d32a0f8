//go:build linux

package ipc

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

type socketCase struct {
	Env map[string]string `json:"env"`
	UID int               `json:"uid"`
}

var socketCases = []socketCase{
	{map[string]string{}, 0},
	{map[string]string{}, 1000},
	{map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000"}, 1000},
	{map[string]string{"XDG_RUNTIME_DIR": "/run/user/0"}, 0},
	{map[string]string{"XDG_RUNTIME_DIR": ""}, 1001},
	{map[string]string{"GNNLOADER_SOCKET": "/srv/l.sock", "XDG_RUNTIME_DIR": "/run/user/7"}, 7},
	{map[string]string{"GNNLOADER_SOCKET": "", "XDG_RUNTIME_DIR": "/run/user/7"}, 7},
	{map[string]string{"GNNLOADER_SOCKET": "rel/l.sock"}, 0},
	{map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000/"}, 1000},
	{map[string]string{"XDG_RUNTIME_DIR": "//run/user//9/./x/.."}, 9},
	{map[string]string{"XDG_RUNTIME_DIR": "rel/dir"}, 9},
}

func (c socketCase) getenv(k string) string { return c.Env[k] }

func TestDefaultSocketPath(t *testing.T) {
	want := []string{
		"/run/gnnloader/loaderd.sock",
		"/tmp/gnnloader-1000/loaderd.sock",
		"/run/user/1000/gnnloader/loaderd.sock",
		"/run/user/0/gnnloader/loaderd.sock",
		"/tmp/gnnloader-1001/loaderd.sock",
		"/srv/l.sock",
		"/run/user/7/gnnloader/loaderd.sock",
		"rel/l.sock",
		"/run/user/1000/gnnloader/loaderd.sock",
		"/run/user/9/gnnloader/loaderd.sock",
		"rel/dir/gnnloader/loaderd.sock",
	}
	for i, c := range socketCases {
		if got := defaultSocketPath(c.getenv, c.UID); got != want[i] {
			t.Errorf("%+v: %q, want %q", c, got, want[i])
		}
	}
}

// twinSocketScript prints gnnloader.trust.default_socket_path for each JSON
// case on stdin. It loads the module without the package's __init__ (which
// needs torch): trust.py uses the standard library only.
const twinSocketScript = `
import json, sys, types
pkg = types.ModuleType("gnnloader"); pkg.__path__ = [sys.argv[1]]; sys.modules["gnnloader"] = pkg
from gnnloader import trust
for line in sys.stdin:
    c = json.loads(line)
    print(trust.default_socket_path(c["env"], c["uid"]))
`

// TestDefaultSocketPathTwin: the daemon's rule and the Python client's give
// the same path for the same environment and uid.
func TestDefaultSocketPathTwin(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	var in strings.Builder
	for _, c := range socketCases {
		b, _ := json.Marshal(c)
		in.Write(append(b, '\n'))
	}
	cmd := exec.Command(py, "-c", twinSocketScript, filepath.Join("..", "python", "gnnloader"))
	cmd.Stdin = strings.NewReader(in.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for i, c := range socketCases {
		if !sc.Scan() {
			t.Fatalf("python printed %d paths for %d cases", i, len(socketCases))
		}
		if got, want := sc.Text(), defaultSocketPath(c.getenv, c.UID); got != want {
			t.Errorf("%+v: Python %q, Go %q", c, got, want)
		}
	}
}

func TestDefaultSocketDir(t *testing.T) {
	t.Setenv(SocketEnv, "/srv/x.sock")
	if d := DefaultSocketDir(); d != "" {
		t.Errorf("with $%s set: %q, want \"\"", SocketEnv, d)
	}
	t.Setenv(SocketEnv, "")
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/5")
	if d := DefaultSocketDir(); d != "/run/user/5/gnnloader" {
		t.Errorf("DefaultSocketDir = %q", d)
	}
}

func TestCheckSocketDir(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode fs.FileMode) string {
		d := filepath.Join(base, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	if err := CheckSocketDir(mk("private", 0o700)); err != nil {
		t.Errorf("0700 own directory: %v", err)
	}
	if err := CheckSocketDir(mk("shared", 0o755)); err != nil {
		t.Errorf("0755 own directory: %v", err)
	}
	for _, tc := range []struct {
		dir  string
		want string
	}{
		{mk("world", 0o777), "mode 0777"},
		{mk("group", 0o770), "mode 0770"},
		{mk("sticky", 0o777|fs.ModeSticky), "mode 0777"},
	} {
		err := CheckSocketDir(tc.dir)
		if !errors.Is(err, ErrUnsafeSocketDir) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an unsafe-directory error with %q", tc.dir, err, tc.want)
		}
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(filepath.Join(base, "private"), link); err != nil {
		t.Fatal(err)
	}
	if err := CheckSocketDir(link); !errors.Is(err, ErrUnsafeSocketDir) {
		t.Errorf("symbolic link: %v", err)
	}
	if err := CheckSocketDir(filepath.Join(base, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	if os.Getuid() == 0 {
		other := mk("other", 0o700)
		if err := os.Chown(other, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		if err := CheckSocketDir(other); !errors.Is(err, ErrUnsafeSocketDir) || !strings.Contains(err.Error(), "uid 4242") {
			t.Errorf("directory of uid 4242: %v", err)
		}
	}
}

func TestPrepareSocketDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gnnloader")
	if err := PrepareSocketDir(dir); err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := fs.FileMode(0o700)
	if os.Getuid() == 0 {
		want = 0o755
	}
	if st.Mode().Perm() != want {
		t.Errorf("mode %#o, want %#o", st.Mode().Perm(), want)
	}
	if err := PrepareSocketDir(dir); err != nil { // exists: only checked
		t.Errorf("second call: %v", err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := PrepareSocketDir(dir); !errors.Is(err, ErrUnsafeSocketDir) {
		t.Errorf("world-writable existing directory: %v", err)
	}
}
