package datasets

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMain doubles as the crashing writer of TestOverwriteCrash: with
// GNNLOADER_TEST_CRASH_AT set, the test binary overwrites the dataset at
// GNNLOADER_TEST_CRASH_DIR and SIGKILLs itself at that step of the swap, as
// a power cut or an OOM kill would.
func TestMain(m *testing.M) {
	if step := os.Getenv("GNNLOADER_TEST_CRASH_AT"); step != "" {
		if os.Getenv("GNNLOADER_TEST_NO_EXCHANGE") != "" {
			renameExchange = func(string, string) error { return unix.EINVAL }
		}
		writeHook = func(s string) {
			if s == step {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}
		err := Write(os.Getenv("GNNLOADER_TEST_CRASH_DIR"), smallData(nil, 20, Float32, 3, 2), &WriteOptions{Overwrite: true})
		fmt.Fprintf(os.Stderr, "the write never reached %s (error %v)\n", step, err)
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// TestOverwriteRefusesWhatIsNotADataset: --overwrite replaces a dataset,
// nothing else: a plain file, a directory of other files, a dataset with a
// file of someone else's in it, a dataset with a subdirectory, a symbolic
// link to a dataset. Each is refused with nothing changed; a dataset and an
// empty directory are replaced.
func TestOverwriteRefusesWhatIsNotADataset(t *testing.T) {
	d := smallData(t, 10, Float32, 2, 1)
	mkDataset := func(t *testing.T, dir string) {
		if err := Write(dir, smallData(t, 12, Float32, 2, 7), nil); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, out string)
		ok    bool
	}{
		{"plain file", func(t *testing.T, out string) { os.WriteFile(out, []byte("thesis draft"), 0o644) }, false},
		{"directory of other files", func(t *testing.T, out string) {
			os.Mkdir(out, 0o755)
			os.WriteFile(filepath.Join(out, "photo.jpg"), []byte("x"), 0o644)
		}, false},
		{"dataset plus a file", func(t *testing.T, out string) {
			mkDataset(t, out)
			os.WriteFile(filepath.Join(out, "notes.txt"), []byte("mine"), 0o644)
		}, false},
		{"dataset plus a directory", func(t *testing.T, out string) {
			mkDataset(t, out)
			os.Mkdir(filepath.Join(out, "runs"), 0o755)
		}, false},
		{"symlink to a dataset", func(t *testing.T, out string) {
			target := out + "-target"
			mkDataset(t, target)
			os.Symlink(target, out)
		}, false},
		{"dataset", mkDataset, true},
		{"empty directory", func(t *testing.T, out string) { os.Mkdir(out, 0o755) }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			out := filepath.Join(parent, "out")
			c.setup(t, out)
			before := snapshot(t, parent)
			err := Write(out, d, &WriteOptions{Overwrite: true})
			if !c.ok {
				if err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
					t.Fatalf("got %v, want a refusal", err)
				}
				if after := snapshot(t, parent); !slices.Equal(before, after) {
					t.Fatalf("the refused write changed things:\nbefore %q\nafter  %q", before, after)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ds, err := Open(out, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			sameData(t, d, &ds.Data)
			if ents, _ := os.ReadDir(parent); len(ents) != 1 {
				t.Fatalf("left beside the dataset: %v", ents)
			}
		})
	}
}

// snapshot lists every path under root with its size and content hash.
func snapshot(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %s %d", p, info.Mode().Type(), info.Size())
		if info.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			line += fmt.Sprintf(" %x", ComputeChecksum(b, DefaultChunkBytes, 1, nil).Value)
		}
		out = append(out, line)
		return nil
	})
	return out
}

// TestStaleOverwriteRestoresOldDataset: an overwrite killed between moving
// the old dataset aside and moving the new one in (what a filesystem without
// RENAME_EXCHANGE needs) leaves no dataset at its place and the old one as
// ".ds.old-<pid>". The next write must put it back, not delete it as a
// stale temporary.
func TestStaleOverwriteRestoresOldDataset(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "ds")
	old := smallData(t, 15, Float32, 2, 3)
	if err := Write(dir, old, nil); err != nil {
		t.Fatal(err)
	}
	// The dead writer's state (pid 2^22+1 is above Linux's pid_max default):
	// the old dataset aside, the new one complete in its temporary directory.
	if err := os.Rename(dir, filepath.Join(parent, ".ds.old-4194305")); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(parent, ".ds.tmp-4194305"), smallData(t, 9, Float32, 2, 4), nil); err != nil {
		t.Fatal(err)
	}
	err := Write(dir, smallData(t, 11, Float32, 2, 5), nil)
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("a write without overwrite: %v (want: the old dataset is back, so it exists)", err)
	}
	ds, err := Open(dir, nil)
	if err != nil {
		t.Fatalf("the old dataset was not restored: %v", err)
	}
	defer ds.Close()
	sameData(t, old, &ds.Data)
	if ents, _ := os.ReadDir(parent); len(ents) != 1 {
		t.Fatalf("left beside the dataset: %v", ents)
	}
}

// TestOverwriteCrash kills a writer at each step of an overwrite, with and
// without RENAME_EXCHANGE, and checks that a dataset survives every crash
// (the old one until the new one is in place) and that the next write
// leaves exactly the dataset it writes.
func TestOverwriteCrash(t *testing.T) {
	for _, c := range []struct {
		step       string
		noExchange bool
		// what is at the dataset's place after the crash: "old", "new"
		// or "" (nothing)
		at string
	}{
		{"exchanged", false, "new"},
		{"old-moved", true, ""},
		{"new-moved", true, "new"},
	} {
		t.Run(c.step, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "ds")
			old := smallData(t, 15, Float32, 2, 3)
			if err := Write(dir, old, nil); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "GNNLOADER_TEST_CRASH_AT="+c.step, "GNNLOADER_TEST_CRASH_DIR="+dir)
			if c.noExchange {
				cmd.Env = append(cmd.Env, "GNNLOADER_TEST_NO_EXCHANGE=1")
			}
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the writer was not killed at %s: %v\n%s", c.step, err, out)
			}
			ds, err := Open(dir, nil)
			switch c.at {
			case "":
				if err == nil {
					ds.Close()
					t.Fatal("a dataset at its place after a crash between the renames")
				}
			case "new":
				if err != nil {
					t.Fatalf("after the crash: %v", err)
				}
				sameData(t, smallData(t, 20, Float32, 3, 2), &ds.Data)
				ds.Close()
			}
			// The next write (no overwrite) finds the dataset the user
			// last had: the old one put back, or the new one.
			if err := Write(dir, smallData(t, 5, Float32, 2, 9), nil); err == nil || !strings.Contains(err.Error(), "already exists") {
				t.Fatalf("next write: %v", err)
			}
			ds, err = Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.at == "" {
				sameData(t, old, &ds.Data)
			}
			ds.Close()
			// And an overwrite then leaves only itself.
			next := smallData(t, 8, Float32, 2, 11)
			if err := Write(dir, next, &WriteOptions{Overwrite: true}); err != nil {
				t.Fatal(err)
			}
			ds, err = Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			sameData(t, next, &ds.Data)
			ds.Close()
			if ents, _ := os.ReadDir(parent); len(ents) != 1 {
				t.Fatalf("left beside the dataset: %v", ents)
			}
		})
	}
}

// TestOverwriteWithoutExchange: where the filesystem refuses the exchange,
// the two renames replace the dataset all the same.
func TestOverwriteWithoutExchange(t *testing.T) {
	defer func(f func(string, string) error) { renameExchange = f }(renameExchange)
	calls := 0
	renameExchange = func(string, string) error { calls++; return unix.EINVAL }
	dir := filepath.Join(t.TempDir(), "ds")
	if err := Write(dir, smallData(t, 15, Float32, 2, 3), nil); err != nil {
		t.Fatal(err)
	}
	d := smallData(t, 9, Float16, 2, 4)
	if err := Write(dir, d, &WriteOptions{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	ds, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	sameData(t, d, &ds.Data)
	if calls != 1 {
		t.Fatalf("exchange tried %d times", calls)
	}
	if ents, _ := os.ReadDir(filepath.Dir(dir)); len(ents) != 1 {
		t.Fatalf("left beside the dataset: %v", ents)
	}
}
