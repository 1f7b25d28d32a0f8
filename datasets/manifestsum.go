package datasets

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// ManifestSumName is the manifest's checksum file: one line in the format
// of xxhsum, "<xxhash64 of manifest.json, 16 hex digits>  manifest.json",
// so `xxhsum -c manifest.json.xxh64` checks it too. Writers always write it;
// a dataset written before it existed opens with a warning
// (Manifest.Warnings).
//
// A file beside the manifest rather than a field inside it: the checksum is
// of the manifest's exact bytes, with nothing to canonicalise, and a
// manifest written by a later version with fields this one does not know
// still checks here (a checksum of re-encoded JSON would drop them).
const ManifestSumName = ManifestName + ".xxh64"

// maxManifestBytes bounds what ReadManifest reads: manifests are a few KB.
const maxManifestBytes = 16 << 20

// manifestSum is the content of the checksum file for manifest bytes b.
func manifestSum(b []byte) []byte {
	return fmt.Appendf(nil, "%016x  %s\n", xxhash.Sum64(b), ManifestName)
}

// readBounded reads the file at path, refusing one larger than limit.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes: not a gnnloader file", path, limit)
	}
	return b, nil
}

// checkManifestSum checks manifest bytes b of dir against the checksum
// file. It returns a warning, not an error, when there is none.
func checkManifestSum(dir string, b []byte) (warning string, err error) {
	path := filepath.Join(dir, ManifestSumName)
	sum, err := readBounded(path, 4096)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("%s has no checksum (no %s: the dataset was written before gnnloader checked manifests); its data files are still checked",
			filepath.Join(dir, ManifestName), ManifestSumName), nil
	}
	if err != nil {
		return "", err
	}
	fields := strings.Fields(string(sum))
	if len(fields) != 2 || len(fields[0]) != 16 || fields[1] != ManifestName {
		return "", fmt.Errorf("%s: want one line \"<16 hex digits>  %s\"", path, ManifestName)
	}
	want, err := strconv.ParseUint(fields[0], 16, 64)
	if err != nil {
		return "", fmt.Errorf("%s: %q is not hex", path, fields[0])
	}
	if got := xxhash.Sum64(b); got != want {
		return "", fmt.Errorf("%s: checksum mismatch: the manifest hashes to %016x, %s says %016x (the manifest is corrupt or was edited)",
			filepath.Join(dir, ManifestName), got, ManifestSumName, want)
	}
	return "", nil
}
