package manifest

import (
	"encoding/binary"
	"errors"
	"math"
	"unsafe"

	"github.com/x448/float16"

	"github.com/shale-db/shale/internal/fragment"
)

// A hand-written CBOR codec for the per-fragment records: Fragment and everything below it
// (DataFile, ColumnStats, StatValue, BatchInfo, DeletionFile), and IdempotencyRecord. A
// table's manifest holds one Fragment per fragment and is decoded whole when a version is
// opened and encoded whole on every commit, so these records are most of a manifest's
// bytes and most of its codec time; the reflection codec spent about 10 µs decoding each.
//
// The bytes are exactly those the reflection codec (cborEnc: core deterministic encoding,
// integer keys in ascending order, omitempty fields left out, shortest integer heads,
// shortest exact floats, NaN as f97e00) writes for the same values: format 2 is unchanged,
// and TestFragmentCodecMatchesReflection checks every field of random records against the
// reflection codec. Its filler sets fields reflectively, so a field added to one of these
// records (in internal/fragment) fails that test until this file encodes it.
//
// Decoding takes the canonical encoding fast. Anything else that is valid CBOR (an
// indefinite length, a tag, an unknown or repeated key, a value of an unexpected type, a
// trailing item) is handed to the reflection decoder with the same options, so the result
// for any input, including its errors, is the reflection decoder's.

// fragmentNoCodec and idempotencyNoCodec are the same records without codec methods: the
// reflection codec encodes and decodes them field by field (the reference and the
// fallback).
type (
	fragmentNoCodec    Fragment
	idempotencyNoCodec IdempotencyRecord
)

// errSlowPath: the fast decoder met something it does not take; the reflection decoder
// decides.
var errSlowPath = errors.New("manifest: not the canonical record encoding")

// MarshalCBOR encodes f as the reflection codec would (format 2, integer keys).
func (f Fragment) MarshalCBOR() ([]byte, error) {
	return appendFragment(make([]byte, 0, fragmentSizeHint(&f)), &f), nil
}

// UnmarshalCBOR replaces *f with the fragment data encodes. Errors: data is not a
// fragment record (the caller wraps them as ErrCorrupt).
func (f *Fragment) UnmarshalCBOR(data []byte) error {
	r := cborReader{b: data}
	var v Fragment
	if r.fragment(&v) == nil && r.off == len(data) {
		*f = v
		return nil
	}
	var slow fragmentNoCodec
	if err := cborDec.Unmarshal(data, &slow); err != nil {
		return err
	}
	*f = Fragment(slow)
	return nil
}

// MarshalCBOR encodes r as the reflection codec would.
func (r IdempotencyRecord) MarshalCBOR() ([]byte, error) {
	return appendIdempotency(make([]byte, 0, 16+len(r.Key)+len(r.TxnID)), &r), nil
}

// UnmarshalCBOR replaces *r with the record data encodes. Errors: data is not an
// idempotency record.
func (r *IdempotencyRecord) UnmarshalCBOR(data []byte) error {
	rd := cborReader{b: data}
	var v IdempotencyRecord
	if rd.idempotency(&v) == nil && rd.off == len(data) {
		*r = v
		return nil
	}
	var slow idempotencyNoCodec
	if err := cborDec.Unmarshal(data, &slow); err != nil {
		return err
	}
	*r = IdempotencyRecord(slow)
	return nil
}

// ---- encoding ----

const (
	majorUint  = 0 << 5
	majorNeg   = 1 << 5
	majorText  = 3 << 5
	majorArray = 4 << 5
	majorMap   = 5 << 5
)

func appendHead(b []byte, major byte, n uint64) []byte {
	switch {
	case n < 24:
		return append(b, major|byte(n))
	case n <= math.MaxUint8:
		return append(b, major|24, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, major|25), uint16(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, major|26), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, major|27), n)
}

func appendInt(b []byte, v int64) []byte {
	if v >= 0 {
		return appendHead(b, majorUint, uint64(v))
	}
	return appendHead(b, majorNeg, uint64(^v))
}

func appendText(b []byte, s string) []byte {
	return append(appendHead(b, majorText, uint64(len(s))), s...)
}

// appendFloat writes the shortest float (half, single, double) that holds v exactly, NaN
// as f97e00 and infinities as half floats: the core deterministic encoding.
func appendFloat(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, 0xf9, 0x7e, 0x00)
	case math.IsInf(v, 1):
		return append(b, 0xf9, 0x7c, 0x00)
	case math.IsInf(v, -1):
		return append(b, 0xf9, 0xfc, 0x00)
	}
	f32 := float32(v)
	if float64(f32) != v {
		return binary.BigEndian.AppendUint64(append(b, 0xfb), math.Float64bits(v))
	}
	p := float16.PrecisionFromfloat32(f32)
	f16 := float16.Fromfloat32(f32)
	if p == float16.PrecisionExact || (p == float16.PrecisionUnknown && f16.Float32() == f32) {
		return binary.BigEndian.AppendUint16(append(b, 0xf9), uint16(f16))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xfa), math.Float32bits(f32))
}

func fragmentSizeHint(f *Fragment) int {
	n := 16
	for i := range f.Files {
		df := &f.Files[i]
		n += 48 + len(df.Key) + 3*len(df.FieldIDs) + 40*len(df.Stats)
		for j := range df.Batches {
			n += 24 + 5*len(df.Batches[j].ColumnCRC32C) + 40*len(df.Batches[j].Stats)
		}
	}
	if f.Deletion != nil {
		n += 24 + len(f.Deletion.Key)
	}
	return n
}

func count(present ...bool) uint64 {
	var n uint64
	for _, p := range present {
		if p {
			n++
		}
	}
	return n
}

func appendFragment(b []byte, f *Fragment) []byte {
	b = appendHead(b, majorMap, count(f.ID != 0, len(f.Files) > 0, f.PhysicalRows != 0, f.Deletion != nil))
	if f.ID != 0 {
		b = appendHead(append(b, 0x01), majorUint, uint64(f.ID))
	}
	if len(f.Files) > 0 {
		b = appendHead(append(b, 0x02), majorArray, uint64(len(f.Files)))
		for i := range f.Files {
			b = appendDataFile(b, &f.Files[i])
		}
	}
	if f.PhysicalRows != 0 {
		b = appendInt(append(b, 0x03), f.PhysicalRows)
	}
	if d := f.Deletion; d != nil {
		b = appendHead(append(b, 0x04), majorMap, count(d.Key != "", d.Size != 0, d.Deleted != 0))
		if d.Key != "" {
			b = appendText(append(b, 0x01), d.Key)
		}
		if d.Size != 0 {
			b = appendInt(append(b, 0x02), d.Size)
		}
		if d.Deleted != 0 {
			b = appendInt(append(b, 0x03), d.Deleted)
		}
	}
	return b
}

func appendDataFile(b []byte, df *fragment.DataFile) []byte {
	b = appendHead(b, majorMap, count(df.Key != "", df.Size != 0, df.Rows != 0, len(df.FieldIDs) > 0,
		df.Compression != "", len(df.Stats) > 0, len(df.Batches) > 0, df.FooterCRC32C != 0))
	if df.Key != "" {
		b = appendText(append(b, 0x01), df.Key)
	}
	if df.Size != 0 {
		b = appendInt(append(b, 0x02), df.Size)
	}
	if df.Rows != 0 {
		b = appendInt(append(b, 0x03), df.Rows)
	}
	if len(df.FieldIDs) > 0 {
		b = appendHead(append(b, 0x04), majorArray, uint64(len(df.FieldIDs)))
		for _, id := range df.FieldIDs {
			b = appendInt(b, int64(id))
		}
	}
	if df.Compression != "" {
		b = appendText(append(b, 0x05), string(df.Compression))
	}
	if len(df.Stats) > 0 {
		b = appendStatsList(append(b, 0x06), df.Stats)
	}
	if len(df.Batches) > 0 {
		b = appendHead(append(b, 0x07), majorArray, uint64(len(df.Batches)))
		for i := range df.Batches {
			b = appendBatch(b, &df.Batches[i])
		}
	}
	if df.FooterCRC32C != 0 {
		b = appendHead(append(b, 0x08), majorUint, uint64(df.FooterCRC32C))
	}
	return b
}

func appendBatch(b []byte, bi *fragment.BatchInfo) []byte {
	b = appendHead(b, majorMap, count(bi.Rows != 0, len(bi.Stats) > 0, bi.CRC32C != 0, bi.MetaCRC32C != 0, len(bi.ColumnCRC32C) > 0))
	if bi.Rows != 0 {
		b = appendInt(append(b, 0x01), bi.Rows)
	}
	if len(bi.Stats) > 0 {
		b = appendStatsList(append(b, 0x02), bi.Stats)
	}
	if bi.CRC32C != 0 {
		b = appendHead(append(b, 0x03), majorUint, uint64(bi.CRC32C))
	}
	if bi.MetaCRC32C != 0 {
		b = appendHead(append(b, 0x04), majorUint, uint64(bi.MetaCRC32C))
	}
	if len(bi.ColumnCRC32C) > 0 {
		b = appendHead(append(b, 0x05), majorArray, uint64(len(bi.ColumnCRC32C)))
		for _, c := range bi.ColumnCRC32C {
			b = appendHead(b, majorUint, uint64(c))
		}
	}
	return b
}

func appendStatsList(b []byte, stats []fragment.ColumnStats) []byte {
	b = appendHead(b, majorArray, uint64(len(stats)))
	for i := range stats {
		b = appendStats(b, &stats[i])
	}
	return b
}

func appendStats(b []byte, s *fragment.ColumnStats) []byte {
	b = appendHead(b, majorMap, count(s.FieldID != 0, s.NullCount != 0, s.HasMinMax, !valueEmpty(&s.Min),
		!valueEmpty(&s.Max), s.HasMin, s.HasMax, s.MinTruncated))
	if s.FieldID != 0 {
		b = appendInt(append(b, 0x01), int64(s.FieldID))
	}
	if s.NullCount != 0 {
		b = appendInt(append(b, 0x02), s.NullCount)
	}
	if s.HasMinMax {
		b = append(b, 0x03, 0xf5)
	}
	if !valueEmpty(&s.Min) {
		b = appendValue(append(b, 0x04), &s.Min)
	}
	if !valueEmpty(&s.Max) {
		b = appendValue(append(b, 0x05), &s.Max)
	}
	if s.HasMin {
		b = append(b, 0x06, 0xf5)
	}
	if s.HasMax {
		b = append(b, 0x07, 0xf5)
	}
	if s.MinTruncated {
		b = append(b, 0x08, 0xf5)
	}
	return b
}

// valueEmpty: every field of v is its zero value (a float equal to 0, -0 included), so
// omitempty leaves v out.
func valueEmpty(v *fragment.Value) bool {
	return v.Kind == 0 && v.Int == 0 && v.Uint == 0 && v.Float == 0 && v.Str == "" && !v.Bool
}

func appendValue(b []byte, v *fragment.Value) []byte {
	b = appendHead(b, majorMap, count(v.Kind != 0, v.Int != 0, v.Uint != 0, v.Float != 0, v.Str != "", v.Bool))
	if v.Kind != 0 {
		b = appendHead(append(b, 0x01), majorUint, uint64(v.Kind))
	}
	if v.Int != 0 {
		b = appendInt(append(b, 0x02), v.Int)
	}
	if v.Uint != 0 {
		b = appendHead(append(b, 0x03), majorUint, v.Uint)
	}
	if v.Float != 0 {
		b = appendFloat(append(b, 0x04), v.Float)
	}
	if v.Str != "" {
		b = appendText(append(b, 0x05), v.Str)
	}
	if v.Bool {
		b = append(b, 0x06, 0xf5)
	}
	return b
}

func appendIdempotency(b []byte, r *IdempotencyRecord) []byte {
	b = appendHead(b, majorMap, count(true, true, true))
	b = appendText(append(b, 0x01), r.Key)
	b = appendHead(append(b, 0x02), majorUint, r.Version)
	return appendText(append(b, 0x03), r.TxnID)
}

// ---- decoding ----

// cborReader reads the canonical encoding of the records above. Every method returns
// errSlowPath for anything else, including truncation; it never panics, and it allocates
// no slice longer than the bytes left could fill (one byte per element at least).
//
// A reader that decodes many records carves their small slices and strings from shared
// chunks, so a manifest of a thousand fragments costs a few hundred allocations, not
// ten thousand. A carved slice has its capacity cut to its length, so appending to it copies.
type cborReader struct {
	b   []byte
	off int

	i32      slab[int32]
	u32      slab[uint32]
	colStats slab[fragment.ColumnStats]
	files    slab[fragment.DataFile]
	batches  slab[fragment.BatchInfo]
	strs     []byte // the free part of the current string chunk (see str)
}

// slab hands out small slices carved from shared chunks; chunks grow from 8 elements to
// maxSlabChunk, so a small manifest allocates little.
type slab[T any] struct {
	free []T
	next int // the size of the next chunk
}

const maxSlabChunk = 512

// carve returns n zero elements, from the current chunk when it has room.
func (s *slab[T]) carve(n int) []T {
	if n > len(s.free) {
		s.next = min(max(2*s.next, 8), maxSlabChunk)
		if n > s.next/4 {
			return make([]T, n)
		}
		s.free = make([]T, s.next)
	}
	out := s.free[:n:n]
	s.free = s.free[n:]
	return out
}

// head reads a definite-length head: its major type (high three bits) and argument.
// Small arguments (most keys, lengths and statistics) take the first branch.
func (r *cborReader) head() (byte, uint64, error) {
	if r.off < len(r.b) {
		if c := r.b[r.off]; c&0x1f < 24 {
			r.off++
			return c & 0xe0, uint64(c & 0x1f), nil
		}
	}
	return r.longHead()
}

// longHead is head for arguments in following bytes.
func (r *cborReader) longHead() (byte, uint64, error) {
	if r.off >= len(r.b) {
		return 0, 0, errSlowPath
	}
	c := r.b[r.off]
	major, ai := c&0xe0, c&0x1f
	r.off++
	if ai < 24 {
		return major, uint64(ai), nil
	}
	var n int
	switch ai {
	case 24:
		n = 1
	case 25:
		n = 2
	case 26:
		n = 4
	case 27:
		n = 8
	default:
		return 0, 0, errSlowPath
	}
	if len(r.b)-r.off < n {
		return 0, 0, errSlowPath
	}
	var v uint64
	for _, x := range r.b[r.off : r.off+n] {
		v = v<<8 | uint64(x)
	}
	r.off += n
	return major, v, nil
}

// mapHeader reads a map head; key reads one of its integer keys 1..63, failing on a key
// already seen (seen is the caller's bit set).
func (r *cborReader) mapHeader() (int, error) {
	major, n, err := r.head()
	if err != nil || major != majorMap || n > uint64(len(r.b)-r.off) {
		return 0, errSlowPath
	}
	return int(n), nil
}

func (r *cborReader) key(seen *uint64) (int, error) {
	if r.off >= len(r.b) {
		return 0, errSlowPath
	}
	k := r.b[r.off]
	if k == 0 || k >= 24 || *seen&(1<<k) != 0 {
		return 0, errSlowPath
	}
	*seen |= 1 << k
	r.off++
	return int(k), nil
}

// arrayHeader reads an array head whose length the bytes left could hold.
func (r *cborReader) arrayHeader() (int, error) {
	major, n, err := r.head()
	if err != nil || major != majorArray || n > uint64(len(r.b)-r.off) {
		return 0, errSlowPath
	}
	return int(n), nil
}

func (r *cborReader) int64() (int64, error) {
	major, v, err := r.head()
	if err != nil || v > math.MaxInt64 {
		return 0, errSlowPath
	}
	switch major {
	case majorUint:
		return int64(v), nil
	case majorNeg:
		return -1 - int64(v), nil
	}
	return 0, errSlowPath
}

func (r *cborReader) int32() (int32, error) {
	v, err := r.int64()
	if err != nil || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, errSlowPath
	}
	return int32(v), nil
}

func (r *cborReader) uint(max uint64) (uint64, error) {
	major, v, err := r.head()
	if err != nil || major != majorUint || v > max {
		return 0, errSlowPath
	}
	return v, nil
}

func (r *cborReader) uint32() (uint32, error) {
	v, err := r.uint(math.MaxUint32)
	return uint32(v), err
}

func (r *cborReader) text() (string, error) {
	major, n, err := r.head()
	if err != nil || major != majorText || n > uint64(len(r.b)-r.off) {
		return "", errSlowPath
	}
	s := r.str(r.b[r.off : r.off+int(n)])
	r.off += int(n)
	return s, nil
}

// stringChunk is the size of the byte chunks a reader copies strings into.
const stringChunk = 8 << 10

// str returns a copy of raw as a string. Strings shorter than a quarter chunk are copied
// into a shared chunk: one allocation for many object keys. A chunk's bytes are written
// once, before any string refers to them, and never again, so the strings are immutable
// as Go requires.
func (r *cborReader) str(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	if len(raw) > stringChunk/4 {
		return string(raw)
	}
	if len(raw) > cap(r.strs)-len(r.strs) {
		r.strs = make([]byte, 0, stringChunk)
	}
	at := len(r.strs)
	r.strs = append(r.strs, raw...)
	return unsafe.String(&r.strs[at], len(raw))
}

// compression reads a codec name, sharing the known names' strings.
func (r *cborReader) compression() (fragment.Compression, error) {
	major, n, err := r.head()
	if err != nil || major != majorText || n > uint64(len(r.b)-r.off) {
		return "", errSlowPath
	}
	raw := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	for _, c := range [...]fragment.Compression{fragment.CompressionZstd, fragment.CompressionLZ4, fragment.CompressionNone} {
		if string(raw) == string(c) {
			return c, nil
		}
	}
	return fragment.Compression(r.str(raw)), nil
}

func (r *cborReader) bool() (bool, error) {
	if r.off >= len(r.b) {
		return false, errSlowPath
	}
	c := r.b[r.off]
	r.off++
	switch c {
	case 0xf4:
		return false, nil
	case 0xf5:
		return true, nil
	}
	return false, errSlowPath
}

func (r *cborReader) float() (float64, error) {
	if r.off >= len(r.b) {
		return 0, errSlowPath
	}
	c := r.b[r.off]
	if c != 0xf9 && c != 0xfa && c != 0xfb {
		return 0, errSlowPath
	}
	_, v, err := r.head()
	if err != nil {
		return 0, err
	}
	switch c {
	case 0xf9:
		return float64(float16.Frombits(uint16(v)).Float32()), nil
	case 0xfa:
		return float64(math.Float32frombits(uint32(v))), nil
	}
	return math.Float64frombits(v), nil
}

// mapFields reads a map whose keys are small unsigned integers, each once (canonical
// one-byte heads: anything else is errSlowPath, for the reflection decoder), and calls
// field with each key to read its value; field returns errSlowPath for a key it does not
// know.
func (r *cborReader) mapFields(field func(k int) error) error {
	n, err := r.mapHeader()
	if err != nil {
		return err
	}
	var seen uint64
	for range n {
		k, err := r.key(&seen)
		if err != nil {
			return err
		}
		if err := field(k); err != nil {
			return err
		}
	}
	return nil
}

func (r *cborReader) fragment(f *Fragment) error {
	return r.mapFields(func(k int) (err error) {
		switch k {
		case 1:
			f.ID, err = r.uint32()
		case 2:
			var m int
			if m, err = r.arrayHeader(); err == nil {
				f.Files = r.files.carve(m)
				for i := range f.Files {
					if err = r.dataFile(&f.Files[i]); err != nil {
						break
					}
				}
			}
		case 3:
			f.PhysicalRows, err = r.int64()
		case 4:
			f.Deletion = new(DeletionFile)
			err = r.deletion(f.Deletion)
		default:
			return errSlowPath
		}
		return err
	})
}

func (r *cborReader) deletion(d *DeletionFile) error {
	return r.mapFields(func(k int) (err error) {
		switch k {
		case 1:
			d.Key, err = r.text()
		case 2:
			d.Size, err = r.int64()
		case 3:
			d.Deleted, err = r.int64()
		default:
			return errSlowPath
		}
		return err
	})
}

func (r *cborReader) dataFile(df *fragment.DataFile) error {
	return r.mapFields(func(k int) (err error) {
		switch k {
		case 1:
			df.Key, err = r.text()
		case 2:
			df.Size, err = r.int64()
		case 3:
			df.Rows, err = r.int64()
		case 4:
			var m int
			if m, err = r.arrayHeader(); err == nil {
				df.FieldIDs = r.i32.carve(m)
				for i := range df.FieldIDs {
					if df.FieldIDs[i], err = r.int32(); err != nil {
						break
					}
				}
			}
		case 5:
			df.Compression, err = r.compression()
		case 6:
			df.Stats, err = r.statsList()
		case 7:
			var m int
			if m, err = r.arrayHeader(); err == nil {
				df.Batches = r.batches.carve(m)
				for i := range df.Batches {
					if err = r.batch(&df.Batches[i]); err != nil {
						break
					}
				}
			}
		case 8:
			df.FooterCRC32C, err = r.uint32()
		default:
			return errSlowPath
		}
		return err
	})
}

func (r *cborReader) batch(bi *fragment.BatchInfo) error {
	return r.mapFields(func(k int) (err error) {
		switch k {
		case 1:
			bi.Rows, err = r.int64()
		case 2:
			bi.Stats, err = r.statsList()
		case 3:
			bi.CRC32C, err = r.uint32()
		case 4:
			bi.MetaCRC32C, err = r.uint32()
		case 5:
			var m int
			if m, err = r.arrayHeader(); err == nil {
				bi.ColumnCRC32C = r.u32.carve(m)
				for i := range bi.ColumnCRC32C {
					if bi.ColumnCRC32C[i], err = r.uint32(); err != nil {
						break
					}
				}
			}
		default:
			return errSlowPath
		}
		return err
	})
}

func (r *cborReader) statsList() ([]fragment.ColumnStats, error) {
	m, err := r.arrayHeader()
	if err != nil {
		return nil, err
	}
	out := r.colStats.carve(m)
	for i := range out {
		if err := r.stats(&out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r *cborReader) stats(s *fragment.ColumnStats) error {
	return r.mapFields(func(k int) (err error) {
		switch k {
		case 1:
			s.FieldID, err = r.int32()
		case 2:
			s.NullCount, err = r.int64()
		case 3:
			s.HasMinMax, err = r.bool()
		case 4:
			err = r.value(&s.Min)
		case 5:
			err = r.value(&s.Max)
		case 6:
			s.HasMin, err = r.bool()
		case 7:
			s.HasMax, err = r.bool()
		case 8:
			s.MinTruncated, err = r.bool()
		default:
			return errSlowPath
		}
		return err
	})
}

func (r *cborReader) value(v *fragment.Value) error {
	return r.mapFields(func(k int) (err error) {
		switch k {
		case 1:
			var kind uint64
			kind, err = r.uint(math.MaxUint8)
			v.Kind = fragment.ValueKind(kind)
		case 2:
			v.Int, err = r.int64()
		case 3:
			v.Uint, err = r.uint(math.MaxUint64)
		case 4:
			v.Float, err = r.float()
		case 5:
			v.Str, err = r.text()
		case 6:
			v.Bool, err = r.bool()
		default:
			return errSlowPath
		}
		return err
	})
}

func (r *cborReader) idempotency(rec *IdempotencyRecord) error {
	return r.mapFields(func(k int) (err error) {
		switch k {
		case 1:
			rec.Key, err = r.text()
		case 2:
			rec.Version, err = r.uint(math.MaxUint64)
		case 3:
			rec.TxnID, err = r.text()
		default:
			return errSlowPath
		}
		return err
	})
}
