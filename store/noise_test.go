package store_test

import (
	"bytes"
	"io"
	"log"
	"os"
	"testing"

	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/store"
)

// captureStderr points os.Stderr and the standard logger at a temporary file while fn
// runs and returns what was written there. The AWS SDK's default logger writes to the
// os.Stderr it finds when the client's configuration is loaded, so the store must be
// opened inside fn. Not for parallel tests (os.Stderr is process-wide).
func captureStderr(t *testing.T, fn func()) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stderr-")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved := os.Stderr
	savedLog := log.Writer()
	os.Stderr = f
	log.SetOutput(f)
	func() {
		defer func() {
			os.Stderr = saved
			log.SetOutput(savedLog)
		}()
		fn()
	}()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every ranged GET on an S3-protocol server used to print the SDK's "DEBUG Response has
// no supported checksum" line: a user of the store must see only Shale's own messages.
// This covers a writable open (its put-if-absent probe), writes, whole and ranged reads,
// Head, List, Delete, a missing key and a lost put-if-absent.
func TestS3RequestsWriteNothingToStderr(t *testing.T) {
	srv := storetest.NewS3Server(t, storetest.S3Options{})
	got := captureStderr(t, func() {
		ctx := testCtx(t)
		s, err := store.Open(ctx, srv.StoreURL, storetest.FastOptions)
		if err != nil {
			t.Errorf("open: %v", err)
			return
		}
		defer s.Close()
		data := bytes.Repeat([]byte("0123456789"), 1000)
		if err := s.PutIfAbsent(ctx, "a/obj", data); err != nil {
			t.Errorf("put: %v", err)
		}
		if err := s.PutIfAbsent(ctx, "a/obj", []byte("other")); err == nil {
			t.Errorf("second put-if-absent succeeded")
		}
		for _, r := range [][2]int64{{0, 10}, {100, 1000}, {9990, -1}, {9000, 5000}} {
			b, err := s.GetRange(ctx, "a/obj", r[0], r[1])
			if err != nil || len(b) == 0 {
				t.Errorf("GetRange(%d, %d) = %d bytes, %v", r[0], r[1], len(b), err)
			}
		}
		if _, err := s.Get(ctx, "a/obj"); err != nil {
			t.Errorf("get: %v", err)
		}
		if _, err := s.Get(ctx, "a/missing"); err == nil {
			t.Errorf("get of a missing key succeeded")
		}
		if _, err := s.Head(ctx, "a/obj"); err != nil {
			t.Errorf("head: %v", err)
		}
		if _, err := s.List(ctx, "a/", 0); err != nil {
			t.Errorf("list: %v", err)
		}
		if err := s.Delete(ctx, "a/obj"); err != nil {
			t.Errorf("delete: %v", err)
		}
	})
	if got != "" {
		t.Fatalf("S3 requests wrote to stderr:\n%s", got)
	}
}
