package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestPutThenPutIfAbsent: on local disk (a BatchSequencer) and in memory (two calls in
// turn), the Put's object is written and durable before between runs and the
// put-if-absent's is created only after it; a taken key is ErrPreconditionFailed with the
// first object in place; between's error and a failed Put create nothing more; no temp
// file is left behind; requests count as one Put and one PutIfAbsent.
func TestPutThenPutIfAbsent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	local, err := Open(ctx, "file://"+dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := Open(ctx, "mem://sequence-test", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := local.(BatchSequencer); !ok {
		t.Fatal("the local store does not overlap the writes")
	}
	for name, s := range map[string]Store{"file": local, "mem": mem} {
		t.Run(name, func(t *testing.T) {
			before := s.Counters().Snapshot()
			sawFirst := false
			putErr, err := PutThenPutIfAbsent(ctx, s, "t/_txn/1-a.txn", []byte("record"), func(ctx context.Context) error {
				b, err := s.Get(ctx, "t/_txn/1-a.txn")
				sawFirst = err == nil && string(b) == "record"
				if _, err := s.Head(ctx, "t/_versions/1"); !errors.Is(err, ErrNotFound) {
					t.Errorf("the second object exists before between ran: %v", err)
				}
				return nil
			}, "t/_versions/1", []byte("manifest"))
			if putErr != nil || err != nil || !sawFirst {
				t.Fatalf("put %v, put-if-absent %v, first object seen by between: %v", putErr, err, sawFirst)
			}
			d := s.Counters().Snapshot().Sub(before)
			if d.ByOp[OpPut] != 1 || d.ByOp[OpPutIfAbsent] != 1 {
				t.Fatalf("requests %v, want one put and one put_if_absent", d.ByOp)
			}
			if b, err := s.Get(ctx, "t/_versions/1"); err != nil || string(b) != "manifest" {
				t.Fatalf("second object: %q %v", b, err)
			}

			putErr, err = PutThenPutIfAbsent(ctx, s, "t/_txn/1-b.txn", []byte("other record"), nil, "t/_versions/1", []byte("other manifest"))
			if putErr != nil || !errors.Is(err, ErrPreconditionFailed) {
				t.Fatalf("taken key: put %v, put-if-absent %v; want ErrPreconditionFailed", putErr, err)
			}
			if b, err := s.Get(ctx, "t/_txn/1-b.txn"); err != nil || string(b) != "other record" {
				t.Fatalf("the record of the losing attempt: %q %v", b, err)
			}

			stop := errors.New("stop")
			putErr, err = PutThenPutIfAbsent(ctx, s, "t/_txn/2-c.txn", []byte("r"), func(context.Context) error { return stop }, "t/_versions/2", []byte("m"))
			if putErr != nil || !errors.Is(err, stop) {
				t.Fatalf("between refused: put %v, %v", putErr, err)
			}
			if _, err := s.Head(ctx, "t/_versions/2"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("created although between refused: %v", err)
			}

			if name != "file" {
				return
			}
			// A Put that fails (its key is a directory of other keys) creates nothing.
			putErr, err = PutThenPutIfAbsent(ctx, s, "t/_txn", []byte("r"), func(context.Context) error {
				t.Error("between ran after a failed put")
				return nil
			}, "t/_versions/3", []byte("m"))
			if putErr == nil || err != nil {
				t.Fatalf("a put over a directory: %v, then %v", putErr, err)
			}
			if _, err := s.Head(ctx, "t/_versions/3"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("created after a failed put: %v", err)
			}
		})
	}
	left, err := os.ReadDir(filepath.Join(dir, TempDir))
	if err != nil || len(left) != 0 {
		t.Fatalf("temp files left: %v %v", left, err)
	}
}
