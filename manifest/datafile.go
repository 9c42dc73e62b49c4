package manifest

import "github.com/shale-db/shale/internal/fragment"

// The data file vocabulary a manifest records. The types are defined by the data file
// reader and writer (an internal package of this module); these aliases are their public
// names, so a program outside the module can name, build and inspect them. Every alias is
// the same type as the one it names: values convert without a cast. docs/format.md
// describes the stored layout.

// DataFile describes one stored data file of a fragment: an Arrow IPC file (format
// "ARROW1", metadata V5) whose record batch buffers are compressed per buffer. Its fields:
//
//	Key          string         object key relative to the store root: "<table>/data/<txn-id>/<ulid>.arrow"
//	Size         int64          bytes, so a reader opens the file without a HEAD request
//	Rows         int64          rows in the file (the sum of Batches[i].Rows)
//	FieldIDs     []int32        top-level field ids of the file's columns, in file schema order
//	Compression  Compression    codec of the record batch buffers
//	Stats        []ColumnStats  whole-file statistics, one per column in file schema order
//	Batches      []BatchInfo    one per IPC record batch, in file order
//	FooterCRC32C uint32         CRC32C (Castagnoli) of the footer and trailer
//
// Method BatchStats(i) returns batch i's statistics (the file's when it has one batch).
// A DataFile is a value: copying it is safe, and it is never modified once a manifest
// names it.
type DataFile = fragment.DataFile

// BatchInfo describes one IPC record batch of a DataFile:
//
//	Rows         int64          rows in the batch
//	Stats        []ColumnStats  one per column, in file schema order (nil for a single-batch file: see DataFile.BatchStats)
//	CRC32C       uint32         CRC32C of the batch's IPC block (metadata and body)
//	MetaCRC32C   uint32         CRC32C of the block's metadata alone
//	ColumnCRC32C []uint32       CRC32C of each top-level column's byte span of the body (nil for dictionary schemas)
//
// Readers check every byte they use against these checksums before decoding it.
type BatchInfo = fragment.BatchInfo

// ColumnStats are the statistics of one top-level column over a batch or a whole file:
//
//	FieldID      int32      the column's field id (Schema.FieldIDs)
//	NullCount    int64      exact for every type
//	HasMinMax    bool       HasMin && HasMax
//	Min, Max     StatValue  bounds of the non-null values (NaN ignored)
//	HasMin       bool       Min is set
//	HasMax       bool       Max is set
//	MinTruncated bool       Min is a prefix of the true minimum (still ≤ every value)
//
// Min and Max are kept for integer, unsigned, float, string, binary, bool and temporal
// columns. A string or binary bound longer than MaxStatBytes bytes is cut: a minimum to a
// prefix, a maximum dropped (HasMin without HasMax). Scans prune batches and fragments by
// these statistics; a truncated or missing bound only prunes less.
type ColumnStats = fragment.ColumnStats

// StatValue is one scalar statistic (ColumnStats.Min or Max). Kind says which field holds
// it: Int (int8..int64 and temporal types, as their physical value; the column type gives
// the unit), Uint, Float (float32 widened exactly), Str (strings, and the raw bytes of
// binaries) or Bool. Method Compare(o) orders two values of the same kind (-1, 0, +1;
// strings and binaries bytewise, false < true).
type StatValue = fragment.Value

// StatKind says which field of a StatValue is set.
type StatKind = fragment.ValueKind

// The kinds of StatValue.
const (
	StatNone   StatKind = fragment.KindNone   // no value
	StatInt    StatKind = fragment.KindInt    // Int: int8..int64, date, time, timestamp, duration
	StatUint   StatKind = fragment.KindUint   // Uint: uint8..uint64
	StatFloat  StatKind = fragment.KindFloat  // Float: float32 and float64
	StatString StatKind = fragment.KindString // Str: string types (a valid UTF-8 prefix when truncated)
	StatBinary StatKind = fragment.KindBinary // Str: the raw bytes of binary types
	StatBool   StatKind = fragment.KindBool   // Bool
)

// MaxStatBytes is the longest string or binary statistic kept, in bytes.
const MaxStatBytes = fragment.MaxStatBytes

// Compression names the codec applied to each buffer of a data file's record batches
// (Arrow IPC body compression). The zero value ("") means CompressionZstd.
type Compression = fragment.Compression

// The codecs a data file may use: Arrow IPC body compression (ZSTD and LZ4_FRAME), which
// any Arrow implementation that supports IPC compression reads.
const (
	CompressionZstd Compression = fragment.CompressionZstd // ZSTD (the default): smallest files
	CompressionLZ4  Compression = fragment.CompressionLZ4  // LZ4 frame: faster to write and read, larger
	CompressionNone Compression = fragment.CompressionNone // uncompressed
)

// WriteOptions tune how a write stores data files. Zero values take the defaults:
//
//	Compression         Compression       codec, default CompressionZstd
//	CompressionLevel    int               ZSTD level 1 (fastest, the default) to 22
//	MaxRowsPerBatch     int               rows per IPC record batch, default DefaultMaxRowsPerBatch
//	MaxRowsPerFile      int               rows per data file, default DefaultMaxRowsPerFile
//	Allocator           memory.Allocator  Arrow memory, default memory.DefaultAllocator
//	CompressConcurrency int               goroutines encoding batches and columns at once, default GOMAXPROCS (at most 8)
//
// Batches are the unit of a range read and of statistics pruning: smaller batches prune
// finer and cost more requests. The options change how rows are laid out, never which
// rows a table holds. engine.WriteOptions is the same type.
type WriteOptions = fragment.WriterOptions

// Defaults of WriteOptions, in rows.
const (
	DefaultMaxRowsPerBatch = fragment.DefaultMaxRowsPerBatch
	DefaultMaxRowsPerFile  = fragment.DefaultMaxRowsPerFile
)

// CorruptError reports a data file or deletion vector whose stored bytes cannot be
// decoded: truncated, a bad magic, a checksum mismatch, an IPC structure that does not
// parse, or a file that disagrees with its DataFile (or with the table schema). Fields:
//
//	Key    string  the object key
//	Object string  "data file" or "deletion vector"
//	Class  error   ErrCorrupt or ErrUnsupportedVersion
//	Err    error   the cause (may be nil)
//
// It unwraps to Class and Err, so errors.Is(err, ErrCorrupt) holds for it. Manifests and
// transaction records report the same class as *ObjectError instead.
type CorruptError = fragment.CorruptError

// ErrUnsupportedVersion is wrapped by a *CorruptError for a deletion vector written in a
// newer format than this build reads. Such an object is refused, never guessed at.
// (Manifests and transaction records report a newer format as ErrFormatTooNew.)
var ErrUnsupportedVersion = fragment.ErrUnsupportedVersion
