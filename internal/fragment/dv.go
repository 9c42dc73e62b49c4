package fragment

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/shale-db/shale/store"
)

// Deletion vector envelope (little endian):
//
//	offset  size  field
//	0       4     magic "SHDV"
//	4       2     format version (DVFormatVersion)
//	6       2     flags (0)
//	8       8     cardinality: number of deleted row offsets
//	16      8     payload length N
//	24      N     roaring bitmap, portable serialization (run-optimized)
//	24+N    4     CRC32C (Castagnoli) of bytes [0, 24+N)
const (
	dvMagic     = "SHDV"
	dvHeaderLen = 24
	dvTrailer   = 4
	// DVFormatVersion is the deletion vector format this code writes and the newest it reads.
	DVFormatVersion = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeDeletionVector returns the stored form of a deletion vector.
func EncodeDeletionVector(deleted *roaring.Bitmap) ([]byte, error) {
	bm := deleted.Clone()
	bm.RunOptimize()
	var payload bytes.Buffer
	if _, err := bm.WriteTo(&payload); err != nil {
		return nil, fmt.Errorf("fragment: serialize deletion vector: %w", err)
	}
	out := make([]byte, dvHeaderLen, dvHeaderLen+payload.Len()+dvTrailer)
	copy(out, dvMagic)
	binary.LittleEndian.PutUint16(out[4:], DVFormatVersion)
	binary.LittleEndian.PutUint64(out[8:], bm.GetCardinality())
	binary.LittleEndian.PutUint64(out[16:], uint64(payload.Len()))
	out = append(out, payload.Bytes()...)
	out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
	return out, nil
}

// DecodeDeletionVector parses the stored form of a deletion vector read from key.
// Errors: *CorruptError naming key, wrapping ErrCorrupt (bad magic, length, checksum or
// bitmap) or ErrUnsupportedVersion (a newer format version).
func DecodeDeletionVector(key string, data []byte) (bm *roaring.Bitmap, err error) {
	if len(data) < dvHeaderLen+dvTrailer {
		return nil, corruptf(objDV, key, "%d bytes is shorter than the %d-byte envelope", len(data), dvHeaderLen+dvTrailer)
	}
	if string(data[:4]) != dvMagic {
		return nil, corruptf(objDV, key, "bad magic %q", data[:4])
	}
	body, sum := data[:len(data)-dvTrailer], binary.LittleEndian.Uint32(data[len(data)-dvTrailer:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, corruptf(objDV, key, "CRC32C mismatch: stored %08x, computed %08x", sum, got)
	}
	if v := binary.LittleEndian.Uint16(data[4:]); v > DVFormatVersion {
		return nil, &CorruptError{Key: key, Object: objDV, Class: ErrUnsupportedVersion,
			Err: fmt.Errorf("format version %d, this build reads up to %d", v, DVFormatVersion)}
	}
	card := binary.LittleEndian.Uint64(data[8:])
	n := binary.LittleEndian.Uint64(data[16:])
	if n != uint64(len(body)-dvHeaderLen) {
		return nil, corruptf(objDV, key, "payload length %d, envelope holds %d", n, len(body)-dvHeaderLen)
	}
	defer func() {
		if p := recover(); p != nil {
			bm, err = nil, corruptf(objDV, key, "roaring bitmap: %v", p)
		}
	}()
	bm = roaring.New()
	if _, err := bm.ReadFrom(bytes.NewReader(body[dvHeaderLen:])); err != nil {
		return nil, corruptf(objDV, key, "roaring bitmap: %w", err)
	}
	if bm.GetCardinality() != card {
		return nil, corruptf(objDV, key, "bitmap holds %d row offsets, envelope says %d", bm.GetCardinality(), card)
	}
	return bm, nil
}

// WriteDeletionVector stores deleted (row offsets of one fragment) at key with
// put-if-absent and returns the object size in bytes. Errors: *store.Error wrapping
// store.ErrPreconditionFailed when key already exists (deletion vectors are immutable;
// use a fresh key), or another store error.
func WriteDeletionVector(ctx context.Context, s store.Store, key string, deleted *roaring.Bitmap) (size int64, err error) {
	data, err := EncodeDeletionVector(deleted)
	if err != nil {
		return 0, err
	}
	if err := s.PutIfAbsent(ctx, key, data); err != nil {
		return 0, err
	}
	return int64(len(data)), nil
}

// ReadDeletionVector reads the deletion vector at key with one GET. Errors: *store.Error
// (ErrNotFound, …) and *CorruptError as DecodeDeletionVector.
func ReadDeletionVector(ctx context.Context, s store.Store, key string) (*roaring.Bitmap, error) {
	data, err := s.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return DecodeDeletionVector(key, data)
}
