package datasets

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mappedFile is a read-only shared mapping of a whole file.
type mappedFile struct {
	data []byte
}

func mapFile(path string) (*mappedFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() == 0 {
		return &mappedFile{data: []byte{}}, nil
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return &mappedFile{data: b}, nil
}

func (m *mappedFile) unmap() error {
	if m == nil || len(m.data) == 0 {
		return nil
	}
	err := unix.Munmap(m.data)
	m.data = nil
	return err
}
