package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestPutAllThenPutIfAbsent: on local disk (the BatchSequencer) and in memory (calls in
// turn), every Put's object (one in a directory created for it) is in place before
// between runs and the put-if-absent's is created only after; a failed Put creates
// nothing more and leaves no temp file; requests count one Put per object.
func TestPutAllThenPutIfAbsent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	local, err := Open(ctx, "file://"+dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := Open(ctx, "mem://sequence-all-test", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := local.(BatchSequencer); !ok {
		t.Fatal("the local store does not overlap the writes")
	}
	for name, s := range map[string]Store{"file": local, "mem": mem} {
		t.Run(name, func(t *testing.T) {
			puts := []Object{{Key: "t/data/a/f.arrow", Data: []byte("data")}, {Key: "t/_txn/1-a.txn", Data: []byte("record")}}
			before := s.Counters().Snapshot()
			putErr, err := PutAllThenPutIfAbsent(ctx, s, puts, func(ctx context.Context) error {
				for _, o := range puts {
					if b, err := s.Get(ctx, o.Key); err != nil || string(b) != string(o.Data) {
						t.Errorf("%s before between: %q %v", o.Key, b, err)
					}
				}
				if _, err := s.Head(ctx, "t/_versions/1"); !errors.Is(err, ErrNotFound) {
					t.Errorf("the put-if-absent object exists before between ran: %v", err)
				}
				return nil
			}, "t/_versions/1", []byte("manifest"))
			if putErr != nil || err != nil {
				t.Fatalf("puts %v, put-if-absent %v", putErr, err)
			}
			d := s.Counters().Snapshot().Sub(before)
			if d.ByOp[OpPut] != 2 || d.ByOp[OpPutIfAbsent] != 1 {
				t.Fatalf("requests %v, want two puts and one put_if_absent", d.ByOp)
			}
			if b, err := s.Get(ctx, "t/_versions/1"); err != nil || string(b) != "manifest" {
				t.Fatalf("put-if-absent object: %q %v", b, err)
			}
			if name != "file" {
				return
			}
			// One Put fails (its key is a directory of other keys): nothing is created
			// after it, and no temp file is left behind.
			putErr, err = PutAllThenPutIfAbsent(ctx, s, []Object{{Key: "t/data/b/g.arrow", Data: []byte("d")}, {Key: "t/_txn", Data: []byte("r")}}, func(context.Context) error {
				t.Error("between ran after a failed put")
				return nil
			}, "t/_versions/2", []byte("m"))
			if putErr == nil || err != nil {
				t.Fatalf("a put over a directory: %v, then %v", putErr, err)
			}
			if _, err := s.Head(ctx, "t/_versions/2"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("created after a failed put: %v", err)
			}
			tmps, err := os.ReadDir(filepath.Join(dir, TempDir))
			if err != nil || len(tmps) != 0 {
				t.Fatalf("temp files left: %v %v", tmps, err)
			}
		})
	}
}
