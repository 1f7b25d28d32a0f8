package datasets

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sync/errgroup"
)

// ChecksumAlgorithm names the checksum of data files: xxhash64 over a tree of
// fixed-size chunks, so that verifying a 57 GB file uses every core.
//
// value = xxhash64( LE64(xxhash64(chunk 0)) || LE64(xxhash64(chunk 1)) || ... )
// where chunk i is bytes [i*ChunkBytes, (i+1)*ChunkBytes) of the file (the last
// chunk may be shorter; an empty file has one empty chunk). The value is
// written as 16 lower-case hex digits. In Python, with the xxhash package:
//
//	h = [xxhash.xxh64_intdigest(b[i:i+c]) for i in range(0, max(len(b), 1), c)]
//	xxhash.xxh64_hexdigest(b"".join(x.to_bytes(8, "little") for x in h))
const ChecksumAlgorithm = "xxhash64-tree"

// DefaultChunkBytes is the chunk size of new checksums (64 MiB).
const DefaultChunkBytes = 64 << 20

// minChunkBytes and maxChunkBytes bound what a manifest may ask for: tiny
// chunks would make verifying cost 8 bytes of digests per chunk, huge ones
// would leave all but one core idle (every writer has used DefaultChunkBytes).
const (
	minChunkBytes = 64 << 10
	maxChunkBytes = 1 << 30
)

// Checksum is a data file's checksum as stored in the manifest.
type Checksum struct {
	Algorithm  string `json:"algorithm"`
	ChunkBytes int64  `json:"chunk_bytes"`
	Value      string `json:"value"`
}

func (c Checksum) check() error {
	if c.Algorithm != ChecksumAlgorithm {
		return fmt.Errorf("unknown checksum algorithm %q (want %q)", c.Algorithm, ChecksumAlgorithm)
	}
	if c.ChunkBytes < minChunkBytes || c.ChunkBytes > maxChunkBytes {
		return fmt.Errorf("checksum chunk_bytes %d is outside [%d, %d]", c.ChunkBytes, minChunkBytes, maxChunkBytes)
	}
	if len(c.Value) != 16 {
		return fmt.Errorf("checksum value %q is not 16 hex digits", c.Value)
	}
	if _, err := strconv.ParseUint(c.Value, 16, 64); err != nil {
		return fmt.Errorf("checksum value %q is not hex", c.Value)
	}
	return nil
}

// ComputeChecksum hashes b with the tree checksum, chunks in parallel on up to
// workers goroutines (0 = GOMAXPROCS). progress counts hashed bytes.
func ComputeChecksum(b []byte, chunkBytes int64, workers int, progress Progress) Checksum {
	progress = orNop(progress)
	n := int64(len(b))
	chunks := (n + chunkBytes - 1) / chunkBytes
	if chunks == 0 {
		chunks = 1
	}
	digests := make([]byte, 8*chunks)
	var g errgroup.Group
	g.SetLimit(workersOr(workers))
	for i := int64(0); i < chunks; i++ {
		g.Go(func() error {
			lo := i * chunkBytes
			hi := min(lo+chunkBytes, n)
			binary.LittleEndian.PutUint64(digests[8*i:], xxhash.Sum64(b[lo:hi]))
			progress.Add(hi - lo)
			return nil
		})
	}
	_ = g.Wait()
	return Checksum{
		Algorithm:  ChecksumAlgorithm,
		ChunkBytes: chunkBytes,
		Value:      fmt.Sprintf("%016x", xxhash.Sum64(digests)),
	}
}

// treeHasher computes the tree checksum of the bytes written to it, in
// order, on the writing goroutine: Write hashes a file while writing it
// instead of reading it back.
type treeHasher struct {
	chunk   int64
	cur     *xxhash.Digest
	n       int64 // bytes of the current chunk so far
	digests []byte
}

func newTreeHasher(chunkBytes int64) *treeHasher {
	return &treeHasher{chunk: chunkBytes, cur: xxhash.New()}
}

func (h *treeHasher) Write(b []byte) (int, error) {
	written := len(b)
	for len(b) > 0 {
		k := min(int64(len(b)), h.chunk-h.n)
		h.cur.Write(b[:k])
		h.n += k
		b = b[k:]
		if h.n == h.chunk {
			h.digests = binary.LittleEndian.AppendUint64(h.digests, h.cur.Sum64())
			h.cur.Reset()
			h.n = 0
		}
	}
	return written, nil
}

// Checksum is the checksum of everything written so far.
func (h *treeHasher) Checksum() Checksum {
	d := h.digests
	if h.n > 0 || len(d) == 0 {
		d = binary.LittleEndian.AppendUint64(d, h.cur.Sum64())
	}
	return Checksum{Algorithm: ChecksumAlgorithm, ChunkBytes: h.chunk, Value: fmt.Sprintf("%016x", xxhash.Sum64(d))}
}
