// Package fragment writes and reads a fragment's data files and deletion vectors through
// internal/store.
//
// A data file is an Arrow IPC file (format "ARROW1", metadata V5) whose record batches are
// compressed per buffer with ZSTD (default), LZ4 or not at all. Its schema carries the
// top-level field ids under the schema metadata key "shale:field_ids", so a file can be
// checked against the manifest that names it. Files are encoded in memory, stored with one
// Put under a fresh ULID key and never modified. The DataFile a Writer returns records,
// per batch, the row count, column statistics and CRC32C checksums of the whole block, of
// its metadata and of each column's byte span, plus a CRC32C of the footer.
//
// Reads use range requests only. OpenFile fetches the file tail (footer and trailer) in one
// GetRange, since the size comes from the DataFile (no HEAD). ReadBatch fetches one record
// batch's metadata and body in one GetRange; for a column subset it fetches the batch
// metadata, then only the byte ranges of the chosen columns' buffers (coalesced), and
// decodes a rebuilt message holding just those columns. Every byte used is checked against
// the DataFile's checksums before any decoder sees it; compressed buffers are decoded by
// this package (ZSTD by libzstd in cgo builds, by klauspost/compress in pure-Go ones)
// rather than by arrow-go's per-batch decoders.
//
// A deletion vector is an immutable object holding a roaring bitmap of deleted row offsets
// inside an envelope with a magic, a format version and a CRC32C checksum.
//
// Errors about stored bytes are *CorruptError values naming the object key and wrapping
// ErrCorrupt (or ErrUnsupportedVersion for a newer deletion vector format); store failures
// are passed through as *store.Error, which also names the key.
package fragment

import (
	"errors"
	"fmt"
)

// Compression names the codec applied to each buffer of a record batch.
type Compression string

// The supported codecs. The zero value means CompressionZstd.
const (
	CompressionZstd Compression = "zstd"
	CompressionLZ4  Compression = "lz4"
	CompressionNone Compression = "none"
)

func (c Compression) normalize() (Compression, error) {
	switch c {
	case "", CompressionZstd:
		return CompressionZstd, nil
	case CompressionLZ4, CompressionNone:
		return c, nil
	}
	return "", fmt.Errorf("fragment: unknown compression %q (want zstd, lz4 or none)", string(c))
}

// Defaults for WriterOptions.
const (
	DefaultMaxRowsPerBatch = 65536
	DefaultMaxRowsPerFile  = 1 << 20
)

// DataFile describes one stored data file. A manifest keeps it per fragment; Size lets a
// reader open the file without a HEAD request.
type DataFile struct {
	Key         string        `cbor:"1,keyasint,omitempty"` // object key relative to the store root, e.g. "<table>/data/<ulid>.arrow"
	Size        int64         `cbor:"2,keyasint,omitempty"` // bytes
	Rows        int64         `cbor:"3,keyasint,omitempty"` // rows in the file (sum of Batches[i].Rows)
	FieldIDs    []int32       `cbor:"4,keyasint,omitempty"` // top-level field ids of the file's columns, in file schema order
	Compression Compression   `cbor:"5,keyasint,omitempty"` // codec of the record batch buffers
	Stats       []ColumnStats `cbor:"6,keyasint,omitempty"` // whole-file statistics, one per column in file schema order
	Batches     []BatchInfo   `cbor:"7,keyasint,omitempty"` // one per IPC record batch, in file order
	// FooterCRC32C is the CRC32C (Castagnoli) of the footer and trailer: the last
	// 10+footer-length bytes. Checked by OpenFile when Batches is set.
	FooterCRC32C uint32 `cbor:"8,keyasint,omitempty"`
}

// BatchStats returns the statistics of batch i: its own, or the file's when the file has
// a single batch (the writer does not store them twice).
func (df *DataFile) BatchStats(i int) []ColumnStats {
	if len(df.Batches) == 1 && df.Batches[0].Stats == nil {
		return df.Stats
	}
	return df.Batches[i].Stats
}

// BatchInfo describes one IPC record batch of a data file.
type BatchInfo struct {
	Rows  int64         `cbor:"1,keyasint,omitempty"`
	Stats []ColumnStats `cbor:"2,keyasint,omitempty"` // one per column, in file schema order
	// CRC32C is the CRC32C (Castagnoli) of the batch's IPC block (metadata and body).
	// ReadBatch checks it whenever it reads the whole block.
	CRC32C uint32 `cbor:"3,keyasint,omitempty"`
	// MetaCRC32C covers the block's metadata alone and ColumnCRC32C each top-level
	// column's byte span of the body (file schema order), so projected reads are checked
	// too. ColumnCRC32C is nil for schemas the projection path does not map (dictionaries).
	MetaCRC32C   uint32   `cbor:"4,keyasint,omitempty"`
	ColumnCRC32C []uint32 `cbor:"5,keyasint,omitempty"`
}

// ErrCorrupt is wrapped by every error that reports stored bytes which cannot be decoded:
// a truncated object, a bad magic, a checksum mismatch, an IPC structure that does not
// parse, or a file that disagrees with its DataFile description.
var ErrCorrupt = errors.New("corrupt object")

// ErrUnsupportedVersion is wrapped when an object carries a format version newer than this
// code understands. Such an object is refused, never guessed at.
var ErrUnsupportedVersion = errors.New("unsupported format version")

// CorruptError reports a stored object that cannot be decoded. It names the object key
// and wraps a class (ErrCorrupt or ErrUnsupportedVersion) and, when there is one, the cause.
type CorruptError struct {
	Key    string // object key
	Object string // what the object is: "data file" or "deletion vector"
	Class  error  // ErrCorrupt or ErrUnsupportedVersion
	Err    error  // cause; may be nil
}

func (e *CorruptError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("%s %s: %v", e.Object, e.Key, e.Class)
	}
	return fmt.Sprintf("%s %s: %v: %v", e.Object, e.Key, e.Class, e.Err)
}

// Unwrap exposes the class and the cause to errors.Is and errors.As.
func (e *CorruptError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Class}
	}
	return []error{e.Class, e.Err}
}

func corruptf(object, key, format string, args ...any) error {
	return &CorruptError{Key: key, Object: object, Class: ErrCorrupt, Err: fmt.Errorf(format, args...)}
}

const (
	objDataFile = "data file"
	objDV       = "deletion vector"
)
