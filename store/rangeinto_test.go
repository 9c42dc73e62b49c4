package store

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// TestLocalGetRangeInto: the local store's GetRangeInto reads what GetRange reads, into
// the caller's buffer (short only at the object's end), counts the request and bytes like
// GetRange, and fails like it (a missing object is ErrNotFound, a negative offset
// ErrPermanent).
func TestLocalGetRangeInto(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, "file://"+t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ri, ok := s.(RangeReaderInto)
	if !ok {
		t.Fatalf("the local store (%T) does not implement RangeReaderInto", s)
	}
	data := bytes.Repeat([]byte("0123456789"), 1000)
	if err := s.Put(ctx, "a/obj", data); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ off, n, want int }{{0, 10, 10}, {5, 100, 100}, {9990, 10, 10}, {9995, 10, 5}, {10000, 4, 0}, {20000, 4, 0}} {
		before := s.Counters().Snapshot()
		dst := bytes.Repeat([]byte{0xff}, c.n)
		got, err := ri.GetRangeInto(ctx, "a/obj", int64(c.off), dst)
		if err != nil {
			t.Fatalf("GetRangeInto(%d, %d): %v", c.off, c.n, err)
		}
		want, err := s.GetRange(ctx, "a/obj", int64(c.off), int64(c.n))
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want || !bytes.Equal(dst[:got], want) {
			t.Fatalf("GetRangeInto(%d, %d) = %d bytes %q, GetRange %q", c.off, c.n, got, dst[:got], want)
		}
		d := s.Counters().Snapshot().Sub(before)
		if d.ByOp[OpGetRange] != 2 || d.BytesRead != int64(2*got) {
			t.Fatalf("GetRangeInto(%d, %d) counted %v, read %d bytes; want 2 range reads (with GetRange's), %d bytes", c.off, c.n, d.ByOp, d.BytesRead, 2*got)
		}
	}
	if _, err := ri.GetRangeInto(ctx, "a/missing", 0, make([]byte, 4)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing object: %v, want ErrNotFound", err)
	}
	if _, err := ri.GetRangeInto(ctx, "a/obj", -1, make([]byte, 4)); !errors.Is(err, ErrPermanent) {
		t.Fatalf("negative offset: %v, want ErrPermanent", err)
	}
}
