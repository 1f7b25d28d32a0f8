package datasets

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Overwriting. Write with Overwrite replaces only a gnnloader dataset
// directory (a manifest it can read, nothing but that dataset's files) or an
// empty directory; a plain file, a symbolic link, or a directory holding
// anything else is refused and left alone. The new dataset, complete and
// synced in ".<name>.tmp-<pid>", takes the old one's place in one atomic
// renameat2(RENAME_EXCHANGE); the old one, now at the temporary name, is
// then deleted file by file. Where the filesystem refuses the exchange, the
// old dataset is renamed to ".<name>.old-<pid>" first and the new one into
// place second; a crash between the two leaves no dataset at <name> and
// the old one as the only copy, which the next Write to <name> renames back
// before anything else.

// writeHook, when set (tests), is called at each step of an overwrite:
// "exchanged", "old-moved", "new-moved".
var writeHook func(step string)

func hook(step string) {
	if writeHook != nil {
		writeHook(step)
	}
}

// renameExchange swaps from and to atomically (a variable: tests make it
// fail as a filesystem without RENAME_EXCHANGE does).
var renameExchange = func(from, to string) error {
	return unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_EXCHANGE)
}

// exchangeUnsupported reports whether err means the kernel or filesystem
// has no RENAME_EXCHANGE.
func exchangeUnsupported(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP)
}

// replaceable checks that dir may be overwritten and returns the names of
// the files that make up the dataset there (none for an empty directory).
func replaceable(dir string) ([]string, error) {
	refuse := func(why string, args ...any) error {
		return fmt.Errorf("refusing to overwrite %s: %s (overwrite replaces only a gnnloader dataset directory; nothing was changed)", dir, fmt.Sprintf(why, args...))
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, refuse("it is not a directory (%s)", st.Mode().Type())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, nil
	}
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, refuse("not a dataset: %v", err)
	}
	own := datasetFiles(m)
	for _, e := range entries {
		if !own[e.Name()] || !e.Type().IsRegular() {
			return nil, refuse("it holds %q, which is not one of the dataset's files", e.Name())
		}
	}
	names := make([]string, 0, len(own))
	for name := range own {
		names = append(names, name)
	}
	return names, nil
}

// datasetFiles are the names of m's dataset: its data files, the manifest
// and the manifest's checksum.
func datasetFiles(m *Manifest) map[string]bool {
	own := map[string]bool{ManifestName: true, ManifestSumName: true}
	for _, f := range m.Files {
		own[f.Name] = true
	}
	return own
}

// removeDataset deletes the dataset files names from dir, data files first
// and the manifest last (a removal cut short still has a manifest saying
// what is left), then dir, which is kept when anything else is in it.
func removeDataset(dir string, names []string) error {
	sort.Slice(names, func(i, j int) bool {
		rank := func(n string) int { return map[string]int{ManifestSumName: 1, ManifestName: 2}[n] }
		return rank(names[i]) < rank(names[j])
	})
	for _, n := range names {
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := os.Remove(dir); err != nil {
		return fmt.Errorf("the previous dataset's directory %s was kept: %w", dir, err)
	}
	return nil
}

// swapIn puts the complete dataset at tmp in the place of the dataset at
// dir, whose files are old, and deletes the old one.
func swapIn(parent, base, tmp, dir string, old []string) error {
	err := renameExchange(tmp, dir)
	if err == nil {
		hook("exchanged")
		if err := syncDir(parent); err != nil {
			return err
		}
		return removeDataset(tmp, old)
	}
	if !exchangeUnsupported(err) {
		return err
	}
	aside := filepath.Join(parent, fmt.Sprintf(".%s.old-%d", base, os.Getpid()))
	if err := os.Rename(dir, aside); err != nil {
		return err
	}
	hook("old-moved")
	if err := os.Rename(tmp, dir); err != nil {
		return errors.Join(err, os.Rename(aside, dir))
	}
	hook("new-moved")
	if err := syncDir(parent); err != nil {
		return err
	}
	return removeDataset(aside, old)
}

// recoverStale tidies what earlier writes to parent/base left when their
// process died. A ".<base>.old-<pid>" with no dataset at base is the only
// copy of a dataset an overwrite was replacing: it goes back to base (the
// newest, if there are several). Otherwise old ones that are still plain
// datasets are deleted, others left alone, and ".<base>.tmp-<pid>"
// directories removed: they hold an unfinished new dataset, or an old one
// whose replacement is already in place.
func recoverStale(parent, base string) error {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	dir := filepath.Join(parent, base)
	var olds []string
	for _, e := range entries {
		name := e.Name()
		for _, kind := range []string{".tmp-", ".old-"} {
			prefix := "." + base + kind
			pid, err := strconv.Atoi(strings.TrimPrefix(name, prefix))
			if !strings.HasPrefix(name, prefix) || err != nil || processAlive(pid) {
				continue
			}
			if kind == ".tmp-" {
				os.RemoveAll(filepath.Join(parent, name))
			} else {
				olds = append(olds, filepath.Join(parent, name))
			}
		}
	}
	sort.Slice(olds, func(i, j int) bool { return modTime(olds[i]) > modTime(olds[j]) })
	for _, old := range olds {
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			if err := os.Rename(old, dir); err != nil {
				return fmt.Errorf("restoring the dataset an interrupted overwrite left at %s: %w", old, err)
			}
			if err := syncDir(parent); err != nil {
				return err
			}
			continue
		}
		if names, err := replaceable(old); err == nil {
			removeDataset(old, names)
		}
	}
	return nil
}

func modTime(path string) int64 {
	st, err := os.Lstat(path)
	if err != nil {
		return 0
	}
	return st.ModTime().UnixNano()
}

func processAlive(pid int) bool {
	if pid == os.Getpid() {
		return false // our own leftovers from an earlier failed attempt
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
