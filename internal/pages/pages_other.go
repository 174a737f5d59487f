//go:build !linux

package pages

func mmap(int) ([]byte, error) { return nil, ErrUnsupported }

func munmap([]byte) error { return ErrUnsupported }

func mincore([]byte, []byte) error { return ErrUnsupported }
