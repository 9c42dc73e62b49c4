package objstore

import (
	"context"
	"errors"
	"io"
)

// ReaderAt reads one object through range requests. It implements io.ReaderAt, io.Reader
// and io.Seeker (arrow-go's ipc.ReadAtSeeker), so an Arrow IPC file reader can read the
// footer and then only the record batches it needs. Each ReadAt is one GetRange request.
// The size must be known (from a manifest or a Head), so opening costs no request.
type ReaderAt struct {
	ctx  context.Context
	s    Store
	key  string
	size int64
	pos  int64
}

// NewReaderAt returns a reader over key, whose size in bytes is size.
func NewReaderAt(ctx context.Context, s Store, key string, size int64) *ReaderAt {
	return &ReaderAt{ctx: ctx, s: s, key: key, size: size}
}

// Size is the object size in bytes.
func (r *ReaderAt) Size() int64 { return r.size }

// ReadAt reads len(p) bytes at off with one range request. Reading past the end returns
// io.EOF with the bytes that exist.
func (r *ReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("objstore: negative offset")
	}
	if off >= r.size {
		return 0, io.EOF
	}
	n := int64(len(p))
	if off+n > r.size {
		n = r.size - off
	}
	if n == 0 {
		return 0, nil
	}
	b, err := r.s.GetRange(r.ctx, r.key, off, n)
	if err != nil {
		return 0, err
	}
	c := copy(p, b)
	if int64(c) < int64(len(p)) {
		return c, io.EOF
	}
	return c, nil
}

// Read reads from the current position.
func (r *ReaderAt) Read(p []byte) (int, error) {
	n, err := r.ReadAt(p, r.pos)
	r.pos += int64(n)
	return n, err
}

// Seek sets the position for the next Read (io.SeekEnd is relative to the object size).
func (r *ReaderAt) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.pos
	case io.SeekEnd:
		offset += r.size
	default:
		return 0, errors.New("objstore: bad whence")
	}
	if offset < 0 {
		return 0, errors.New("objstore: negative position")
	}
	r.pos = offset
	return offset, nil
}
