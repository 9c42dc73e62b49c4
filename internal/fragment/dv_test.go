package fragment

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/shale-db/shale/store"
)

func TestDeletionVectorRoundTrip(t *testing.T) {
	ctx := context.Background()
	r := seeded(t)
	random := roaring.New()
	for i := 0; i < 5000; i++ {
		random.Add(r.Uint32N(1 << 20))
	}
	runs := roaring.New()
	runs.AddRange(100, 200000)
	runs.Add(1<<32 - 1)
	cases := map[string]*roaring.Bitmap{"empty": roaring.New(), "one": roaring.BitmapOf(7), "random": random, "runs": runs}
	for _, s := range []store.Store{memStore(t), fileStore(t)} {
		for name, bm := range cases {
			key := "t/_deletions/" + name + ".dv"
			size, err := WriteDeletionVector(ctx, s, key, bm)
			if err != nil {
				t.Fatal(err)
			}
			info, err := s.Head(ctx, key)
			if err != nil || info.Size != size {
				t.Fatalf("%s: head %v, size %d vs %d", name, err, info.Size, size)
			}
			got, err := ReadDeletionVector(ctx, s, key)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equals(bm) {
				t.Fatalf("%s: read back %d offsets, wrote %d", name, got.GetCardinality(), bm.GetCardinality())
			}
			// Immutable: a second write of the same key loses.
			if _, err := WriteDeletionVector(ctx, s, key, roaring.BitmapOf(1)); !errors.Is(err, store.ErrPreconditionFailed) {
				t.Fatalf("%s: second write: %v", name, err)
			}
		}
		if _, err := ReadDeletionVector(ctx, s, "t/_deletions/none.dv"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("missing DV: %v", err)
		}
	}
	if size, _ := WriteDeletionVector(ctx, memStore(t), "x.dv", runs); size > 100 {
		t.Fatalf("a 200k-row run took %d bytes; run optimization missing", size)
	}
}

func TestDeletionVectorCorruption(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	bm := roaring.BitmapOf(1, 2, 3, 1000, 70000)
	data, err := EncodeDeletionVector(bm)
	if err != nil {
		t.Fatal(err)
	}
	const key = "t/_deletions/bad.dv"
	for pos := range data {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			b := append([]byte(nil), data...)
			b[pos] ^= mask
			_ = s.Delete(ctx, key)
			if err := s.Put(ctx, key, b); err != nil {
				t.Fatal(err)
			}
			_, err := ReadDeletionVector(ctx, s, key)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), key) {
				t.Fatalf("flip %02x at %d: %v", mask, pos, err)
			}
		}
	}
	for _, n := range []int{0, 3, 20, len(data) - 1} {
		if _, err := DecodeDeletionVector(key, data[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	// A newer format version with a valid checksum is refused, not guessed at.
	newer := append([]byte(nil), data...)
	binary.LittleEndian.PutUint16(newer[4:], DVFormatVersion+1)
	body := newer[:len(newer)-4]
	binary.LittleEndian.PutUint32(newer[len(newer)-4:], crc32.Checksum(body, castagnoli))
	_, err = DecodeDeletionVector(key, newer)
	if !errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), key) {
		t.Fatalf("newer version: %v", err)
	}
}
