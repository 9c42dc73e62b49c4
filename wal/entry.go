package wal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/internal/panics"
	"github.com/shale-db/shale/manifest"
)

// Schema metadata keys of an entry (besides fragment.FieldIDsMetadataKey, the field ids).
const (
	metaEpoch       = "shale:wal_epoch"       // the epoch directory the entry is in
	metaPosition    = "shale:wal_position"    // its position
	metaGeneration  = "shale:wal_generation"  // the generation its rows were meant for (informational)
	metaFence       = "shale:wal_fence"       // "1" on a fence entry (no batches)
	metaFencedBy    = "shale:wal_fenced_by"   // on a fence: the epoch that wrote it
	metaIncarnation = "shale:wal_incarnation" // the table incarnation
)

// entryMagic ends every entry object, after the CRC32C of the Arrow IPC stream before it.
var entryMagic = [4]byte{'S', 'H', 'W', 'E'}

// Entry is one decoded WAL entry: the rows of one group commit.
type Entry struct {
	Position    Position            // where it is
	Key         string              // its object key
	Fence       bool                // a fence entry (no rows)
	Generation  uint64              // the generation the writer meant its rows for
	Incarnation string              // the table incarnation it was written for
	FieldIDs    []int32             // the field id of each column
	Schema      *arrow.Schema       // the columns (without WAL metadata)
	Records     []arrow.RecordBatch // its batches; the caller releases them (Release)
	Rows        int64               // rows in Records
	Bytes       int64               // the object's size
}

// Release releases the entry's records.
func (e *Entry) Release() {
	for _, r := range e.Records {
		r.Release()
	}
	e.Records = nil
}

type entryHeader struct {
	pos         Position
	generation  uint64
	fence       bool
	fencedBy    uint64
	incarnation string
}

// encodeEntry writes recs (schema schema, field ids fieldIDs) as one Arrow IPC stream
// followed by its CRC32C and entryMagic.
func encodeEntry(schema *arrow.Schema, fieldIDs []int32, recs []arrow.RecordBatch, h entryHeader, mem memory.Allocator) (_ []byte, err error) {
	defer panics.Recover(&err, "encode WAL entry", "")
	keys := []string{fragment.FieldIDsMetadataKey, metaEpoch, metaPosition, metaGeneration, metaIncarnation}
	ids := make([]string, len(fieldIDs))
	for i, id := range fieldIDs {
		ids[i] = strconv.Itoa(int(id))
	}
	vals := []string{joinComma(ids), strconv.FormatUint(h.pos.Epoch, 10), strconv.FormatUint(h.pos.Pos, 10),
		strconv.FormatUint(h.generation, 10), h.incarnation}
	if h.fence {
		keys = append(keys, metaFence, metaFencedBy)
		vals = append(vals, "1", strconv.FormatUint(h.fencedBy, 10))
	}
	md := arrow.NewMetadata(keys, vals)
	withMeta := arrow.NewSchema(schema.Fields(), &md)
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(withMeta), ipc.WithAllocator(mem))
	for _, r := range recs {
		nr := arrowRecordWithSchema(withMeta, r)
		err := w.Write(nr)
		nr.Release()
		if err != nil {
			_ = w.Close()
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	out := buf.Bytes()
	out = binary.BigEndian.AppendUint32(out, manifest.Checksum(out))
	return append(out, entryMagic[:]...), nil
}

func joinComma(xs []string) string {
	var b bytes.Buffer
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(x)
	}
	return b.String()
}

// decodeEntry checks and decodes the entry object at key (position want). Errors wrap
// ErrCorrupt inside an *ObjectError naming key.
func decodeEntry(table, shard, key string, want Position, b []byte, mem memory.Allocator) (_ *Entry, err error) {
	corrupt := func(format string, args ...any) error {
		return &ObjectError{Table: table, Shard: shard, Key: key, Err: fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))}
	}
	defer func() {
		if r := recover(); r != nil {
			err = corrupt("decoding panicked: %v", r)
		}
	}()
	if len(b) < 8 || [4]byte(b[len(b)-4:]) != entryMagic {
		return nil, corrupt("%d bytes without the entry trailer (truncated?)", len(b))
	}
	body := b[:len(b)-8]
	if got, sum := manifest.Checksum(body), binary.BigEndian.Uint32(b[len(b)-8:]); got != sum {
		return nil, corrupt("checksum %08x, expected %08x", got, sum)
	}
	rd, err := ipc.NewReader(bytes.NewReader(body), ipc.WithAllocator(mem))
	if err != nil {
		return nil, corrupt("%v", err)
	}
	defer rd.Release()
	md := rd.Schema().Metadata()
	get := func(k string) string {
		if i := md.FindKey(k); i >= 0 {
			return md.Values()[i]
		}
		return ""
	}
	e := &Entry{Key: key, Bytes: int64(len(b)), Incarnation: get(metaIncarnation), Fence: get(metaFence) == "1"}
	epoch, err1 := strconv.ParseUint(get(metaEpoch), 10, 64)
	pos, err2 := strconv.ParseUint(get(metaPosition), 10, 64)
	if err1 != nil || err2 != nil || (Position{epoch, pos}) != want {
		return nil, corrupt("metadata names position %q/%q, the key %s", get(metaEpoch), get(metaPosition), want)
	}
	e.Position = want
	e.Generation, _ = strconv.ParseUint(get(metaGeneration), 10, 64)
	if s := get(fragment.FieldIDsMetadataKey); s != "" {
		for _, part := range bytes.Split([]byte(s), []byte(",")) {
			id, err := strconv.Atoi(string(part))
			if err != nil {
				return nil, corrupt("field ids %q", s)
			}
			e.FieldIDs = append(e.FieldIDs, int32(id))
		}
	}
	if len(e.FieldIDs) != rd.Schema().NumFields() {
		return nil, corrupt("%d field ids for %d columns", len(e.FieldIDs), rd.Schema().NumFields())
	}
	e.Schema = arrow.NewSchema(rd.Schema().Fields(), nil)
	for rd.Next() {
		r := rd.RecordBatch()
		r.Retain()
		e.Records = append(e.Records, r)
		e.Rows += r.NumRows()
	}
	if err := rd.Err(); err != nil {
		e.Release()
		return nil, corrupt("%v", err)
	}
	if e.Fence && e.Rows > 0 {
		e.Release()
		return nil, corrupt("a fence entry with %d rows", e.Rows)
	}
	return e, nil
}
