package datasets

import (
	"fmt"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sync/errgroup"
)

// Verify checks the dataset at dir as Open does, every checksum included,
// and releases it: the work of `loaderd verify`. The feature table, most
// of a dataset's bytes, is not kept: it is hashed through small buffers and
// its Arrow structure checked from its metadata, so verifying needs memory
// for the graph, labels and splits, not for the table.
func Verify(dir string, workers int, progress Progress) (*Manifest, error) {
	ds, err := Open(dir, &OpenOptions{Workers: workers, Progress: progress, NoFeatures: true, NoEdgeFeatures: true, streamFeatures: true, AllowHetero: true})
	if err != nil {
		return nil, err
	}
	m := ds.Manifest
	return m, ds.Close()
}

// streamPiece is the read size of streamCheck: each worker holds one.
const streamPiece = 4 << 20

// streamCheck checks the file at path like readImage and readColumn
// without holding it: the checksum chunks are read in streamPiece pieces
// on o.workers goroutines, and the Arrow structure is checked on a sparse
// image of the file, an untouched anonymous mapping of its size (zero pages
// cost no memory) with only the metadata regions read into it.
func streamCheck(path string, o readOptions, want column) error {
	f, err := openSized(path, o.size)
	if err != nil {
		return err
	}
	defer f.Close()
	progress := orNop(o.progress)
	chunk := o.checksum.ChunkBytes
	chunks := max(o.size/chunk+min(o.size%chunk, 1), 1)
	digests := make([]byte, 8*chunks)
	sem := o.semaphore()
	bufs := make(chan []byte, cap(sem))
	for range cap(sem) {
		bufs <- make([]byte, min(streamPiece, max(o.size, 1)))
	}
	var g errgroup.Group
	for i := int64(0); i < chunks; i++ {
		g.Go(func() error {
			sem <- struct{}{}
			defer func() { <-sem }()
			buf := <-bufs
			defer func() { bufs <- buf }()
			h := xxhash.New()
			lo, hi := i*chunk, min((i+1)*chunk, o.size)
			for off := lo; off < hi; off += int64(len(buf)) {
				b := buf[:min(int64(len(buf)), hi-off)]
				if err := preadFull(f, b, off); err != nil {
					return fmt.Errorf("%s: reading bytes %d..%d: %w", path, off, off+int64(len(b)), err)
				}
				h.Write(b)
				progress.Add(int64(len(b)))
			}
			putDigest(digests, i, h.Sum64())
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if got := fmt.Sprintf("%016x", xxhash.Sum64(digests)); got != o.checksum.Value {
		return fmt.Errorf("%s: checksum mismatch: file hashes to %s, manifest says %s (the file is corrupt or was changed)", path, got, o.checksum.Value)
	}

	img, err := mmapAnon(uintptr(max(o.size, 1)), mapNoReserve)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer freeAnon(img)
	img = img[:o.size]
	// The metadata regions, or at least both ends when the footer makes no
	// sense (the check then says what is wrong with it).
	h := hintArrowLayout(f, o.size)
	const ends = 64 << 10
	regions := [][2]int64{{0, min(max(h.headEnd, ends), o.size)}, {max(min(h.footerStart, o.size-ends), 0), o.size}}
	for _, r := range regions {
		if err := preadFull(f, img[r[0]:r[1]], r[0]); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	_, err = readColumn(path, img, want)
	return err
}
