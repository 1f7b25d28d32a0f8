package datasets

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// FeatureAlign is the alignment of the feature rows of an open dataset: a
// 2 MiB (huge page) boundary, what the pinned feature store registers.
const FeatureAlign = 2 << 20

// An open dataset's arrays live in private anonymous memory that Open reads
// each file into once, so a file truncated or overwritten while the dataset
// is open changes nothing it serves (a shared mapping of the file would
// raise SIGBUS on the first read past a truncation). Each file is read in
// checksum-sized chunks on several goroutines, each chunk hashed as soon as
// it is read, so the checksum covers exactly the bytes served.

// image is one data file read into memory.
type image struct {
	data []byte       // the file's bytes
	mem  []byte       // the allocation data lies in
	free func() error // releases mem; nil when the caller owns it
}

func (im *image) release() error {
	if im == nil || im.free == nil {
		return nil
	}
	err := im.free()
	im.free, im.data, im.mem = nil, nil, nil
	return err
}

// readOptions say how readImage places and checks one file.
type readOptions struct {
	size     int64     // the size the manifest records
	checksum *Checksum // nil: do not hash
	workers  int
	sem      chan struct{} // shared by the files read at once; nil: workers
	progress Progress
	// alignValues, when > 0, places the file so that the value buffer of
	// its column starts on that boundary.
	alignValues int64
	// alloc and free replace the default anonymous memory.
	alloc func(int64) ([]byte, error)
	free  func([]byte) error
}

// semaphore bounds the chunks in flight: o.sem, or one of its own.
func (o readOptions) semaphore() chan struct{} {
	if o.sem != nil {
		return o.sem
	}
	return make(chan struct{}, workersOr(o.workers))
}

// readImage reads the file at path into fresh memory, hashing it on the way
// when o.checksum is set. The file must have the recorded size when opened
// and keep it while being read.
func readImage(path string, o readOptions) (im *image, err error) {
	f, err := openSized(path, o.size)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pad := int64(0)
	alloc, free := allocAnon, freeAnon
	if o.alloc != nil {
		alloc, free = o.alloc, o.free
	}
	n := o.size
	if o.alignValues > 0 {
		n += o.alignValues
	}
	mem, err := alloc(max(n, 1))
	if err != nil {
		return nil, fmt.Errorf("%s: allocating %d bytes: %w", path, n, err)
	}
	if int64(len(mem)) < n {
		free(mem)
		return nil, fmt.Errorf("%s: the allocator returned %d bytes, not %d", path, len(mem), n)
	}
	im = &image{mem: mem}
	if free != nil {
		im.free = func() error { return free(mem) }
	}
	defer func() {
		if err != nil {
			im.release()
			im = nil
		}
	}()
	if o.alignValues > 0 {
		// Where the values will be: found from the file's metadata now,
		// checked again on the bytes read (the file may change meanwhile).
		off := hintArrowLayout(f, o.size).valueOff
		base := uintptr(unsafe.Pointer(&mem[0])) + uintptr(off)
		pad = int64((uintptr(o.alignValues) - base%uintptr(o.alignValues)) % uintptr(o.alignValues))
	}
	im.data = mem[pad : pad+o.size : pad+o.size]
	if err := readChunks(f, path, im.data, o); err != nil {
		return nil, err
	}
	return im, nil
}

// openSized opens the regular file at path and checks that it has the
// size the manifest records.
func openSized(path string, size int64) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	switch {
	case err != nil:
	case !st.Mode().IsRegular():
		err = fmt.Errorf("%s: not a regular file", path)
	case st.Size() < size:
		err = fmt.Errorf("%s: truncated: %d bytes, manifest says %d", path, st.Size(), size)
	case st.Size() > size:
		err = fmt.Errorf("%s: longer than recorded: %d bytes, manifest says %d", path, st.Size(), size)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readChunks fills b from f in chunks on o.workers goroutines, hashing each
// chunk when o.checksum is set, and compares the result with it.
func readChunks(f *os.File, path string, b []byte, o readOptions) error {
	progress := orNop(o.progress)
	chunk := int64(DefaultChunkBytes)
	if o.checksum != nil {
		chunk = o.checksum.ChunkBytes
	}
	size := int64(len(b))
	chunks := max(size/chunk+min(size%chunk, 1), 1)
	digests := make([]byte, 8*chunks)
	sem := o.semaphore()
	var g errgroup.Group
	for i := int64(0); i < chunks; i++ {
		g.Go(func() error {
			sem <- struct{}{}
			defer func() { <-sem }()
			lo := i * chunk
			hi := min(lo+chunk, size)
			if err := preadFull(f, b[lo:hi], lo); err != nil {
				return fmt.Errorf("%s: reading bytes %d..%d: %w", path, lo, hi, err)
			}
			if o.checksum != nil {
				putDigest(digests, i, xxhash.Sum64(b[lo:hi]))
			}
			progress.Add(hi - lo)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if o.checksum == nil {
		return nil
	}
	if got := fmt.Sprintf("%016x", xxhash.Sum64(digests)); got != o.checksum.Value {
		return fmt.Errorf("%s: checksum mismatch: file hashes to %s, manifest says %s (the file is corrupt or was changed)", path, got, o.checksum.Value)
	}
	return nil
}

func putDigest(digests []byte, i int64, d uint64) {
	binary.LittleEndian.PutUint64(digests[8*i:], d)
}

// preadFull reads len(b) bytes at off; a file that ends early (it shrank
// after Open checked its size) is an error.
func preadFull(f *os.File, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := f.ReadAt(b, off)
		b, off = b[n:], off+int64(n)
		if err == io.EOF && len(b) > 0 {
			return errors.New("the file shrank while being read")
		}
		if err != nil && err != io.EOF {
			return err
		}
	}
	return nil
}

// arrowHint is where the parts of an Arrow file lie, read from its footer
// and record batch metadata alone: the metadata before the body ends at
// headEnd, the value buffer starts at valueOff, the footer at footerStart.
// All zero when the metadata makes no sense (the full check says why).
type arrowHint struct {
	headEnd, valueOff, footerStart int64
}

func hintArrowLayout(f *os.File, size int64) arrowHint {
	const tail = 10 // footer length + "ARROW1"
	if size < 8+tail {
		return arrowHint{}
	}
	var end [tail]byte
	if preadFull(f, end[:], size-tail) != nil {
		return arrowHint{}
	}
	flen := int64(binary.LittleEndian.Uint32(end[:]))
	if flen < 4 || flen > min(size-8-tail, 16<<20) {
		return arrowHint{}
	}
	fb := make([]byte, flen)
	if preadFull(f, fb, size-tail-flen) != nil {
		return arrowHint{}
	}
	footer, err := fbRoot(fb)
	if err != nil {
		return arrowHint{}
	}
	at, n, _, err := footer.vector(3, 24)
	if err != nil || n != 1 {
		return arrowHint{}
	}
	off := int64(binary.LittleEndian.Uint64(fb[at:]))
	meta := int64(int32(binary.LittleEndian.Uint32(fb[at+8:])))
	if off < 8 || meta < 16 || meta > 16<<20 || off > size-tail-flen-meta {
		return arrowHint{}
	}
	mb := make([]byte, meta-8)
	if preadFull(f, mb, off+8) != nil {
		return arrowHint{}
	}
	msg, err := fbRoot(mb)
	if err != nil {
		return arrowHint{}
	}
	rb, ok, err := msg.table(2)
	if err != nil || !ok {
		return arrowHint{}
	}
	at, n, _, err = rb.vector(2, 16)
	if err != nil || n == 0 {
		return arrowHint{}
	}
	bufOff := int64(binary.LittleEndian.Uint64(mb[at+16*int64(n-1):]))
	if bufOff < 0 || bufOff > size {
		return arrowHint{}
	}
	return arrowHint{headEnd: off + meta, valueOff: off + meta + bufOff, footerStart: size - tail - flen}
}

// allocAnon maps n bytes of private anonymous memory. Sizes from 2 MiB up
// start on a 2 MiB boundary and are advised for transparent huge pages
// (fewer TLB misses on the random reads of sampling and gathering).
func allocAnon(n int64) ([]byte, error) {
	if n <= 0 || n > 1<<50 {
		return nil, fmt.Errorf("cannot allocate %d bytes", n)
	}
	const huge = FeatureAlign
	if n < huge {
		return mmapAnon(uintptr(n), 0)
	}
	// Over-map by one huge page and unmap the unaligned head and the tail
	// after the last page.
	pages := (n + pageSize - 1) &^ (pageSize - 1)
	raw, err := mmapAnon(uintptr(pages+huge), mapNoReserve)
	if err != nil {
		return nil, err
	}
	head := int64((huge - uintptr(unsafe.Pointer(&raw[0]))%huge) % huge)
	if head > 0 {
		if err := freeAnon(raw[:head]); err != nil {
			return nil, err
		}
	}
	if head+pages < int64(len(raw)) {
		if err := freeAnon(raw[head+pages:]); err != nil {
			return nil, err
		}
	}
	mem := raw[head : head+n : head+n]
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE) // advice: 4 KiB pages work too
	return mem, nil
}

var pageSize = int64(os.Getpagesize())

const mapNoReserve = unix.MAP_NORESERVE

// mmapAnon maps n bytes with the mmap system call itself: unlike
// unix.Mmap, whose Munmap only takes whole mappings, parts of this one can
// be unmapped (freeAnon).
func mmapAnon(n uintptr, flags uintptr) ([]byte, error) {
	p, _, e := unix.Syscall6(unix.SYS_MMAP, 0, n, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|flags, ^uintptr(0), 0)
	if e != 0 {
		return nil, fmt.Errorf("mmap of %d bytes: %w", n, e)
	}
	// The memory is not Go's: convert the address without vet's
	// uintptr-to-pointer pattern, which is meant for Go memory.
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), n), nil
}

// freeAnon unmaps b, memory from allocAnon or whole pages of it.
func freeAnon(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if _, _, e := unix.Syscall(unix.SYS_MUNMAP, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0); e != 0 {
		return e
	}
	return nil
}
