// Package storetest is Shale's shared store test harness: real stores of every kind,
// opened in process for one test and torn down at its cleanup, a fault-injecting HTTP
// middleware for the fake S3 server, and a conformance suite that every store.Store
// must pass.
//
//	Mem(t)    mem:// under a name unique to this call
//	Local(t)  file:// under t.TempDir()
//	S3(t)     gofakes3 (s3mem) on 127.0.0.1, opened with store.Open(s3://…) (see S3Server)
//	GCS(t)    fake-gcs-server in process, opened with gcsblob + store.OpenBucket
//	All(t)    one of each, by kind name; Kinds lists the factories
//
// Stores are opened with FastOptions (fast retries, no large-object probe); every helper
// fails the test if the store cannot be opened, including when its put-if-absent probe
// fails.
package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"gocloud.dev/blob/gcsblob"

	"github.com/shale-db/shale/store"
)

// FastOptions are the store options the helpers open stores with: the default number of
// retries with short backoff, so fault-injection tests stay fast, and no large-object
// precondition check (store.Options.SkipLargeProbe), so a fresh S3 or GCS store holds no
// record object and opens without uploading 32 MiB. Tests of that check clear it.
var FastOptions = store.Options{BaseBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, SkipLargeProbe: true}

// Kind is one store kind with a factory that opens a fresh, empty store for a test.
type Kind struct {
	Name string // "mem", "local", "s3", "gcs"
	Open func(t testing.TB) store.Store
	// LargeWritePath: objects past some size take a different write path (S3 multipart
	// upload at 16 MiB, GCS resumable upload past one 16 MiB chunk), so the conformance
	// suite also writes a LargeObjectSize conditional object.
	LargeWritePath bool
}

// Kinds lists every store kind, in a fixed order.
func Kinds() []Kind {
	return []Kind{
		{Name: "mem", Open: Mem},
		{Name: "local", Open: Local},
		{Name: "s3", Open: func(t testing.TB) store.Store { _, s := S3(t); return s }, LargeWritePath: true},
		{Name: "gcs", Open: GCS, LargeWritePath: true},
	}
}

// All opens one fresh store of every kind, keyed by kind name.
func All(t testing.TB) map[string]store.Store {
	t.Helper()
	out := map[string]store.Store{}
	for _, k := range Kinds() {
		out[k.Name] = k.Open(t)
	}
	return out
}

var memSeq atomic.Int64

// Mem opens a mem:// store under a name no other call uses. Its objects are deleted at
// cleanup.
func Mem(t testing.TB) store.Store {
	t.Helper()
	name := fmt.Sprintf("storetest-%s-%d", sanitize(t.Name()), memSeq.Add(1))
	s, err := store.Open(context.Background(), "mem://"+name, FastOptions)
	if err != nil {
		t.Fatalf("storetest: open mem://%s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		objs, _ := s.List(ctx, "", 0)
		for _, o := range objs {
			s.Delete(ctx, o.Key)
		}
		s.Close()
	})
	return s
}

// Local opens a file:// store in a new directory under t.TempDir().
func Local(t testing.TB) store.Store {
	t.Helper()
	return LocalAt(t, t.TempDir())
}

// LocalAt opens a file:// store at dir (several handles, or processes, may share one).
func LocalAt(t testing.TB, dir string) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), "file://"+dir, FastOptions)
	if err != nil {
		t.Fatalf("storetest: open file://%s: %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// S3 starts a fake S3 server (see S3Server) and opens its bucket with store.Open.
// It returns the store URL and the store.
func S3(t testing.TB) (string, store.Store) {
	t.Helper()
	srv := NewS3Server(t, S3Options{})
	return srv.StoreURL, srv.Open(t, FastOptions)
}

// GCSBucket is the bucket GCS creates.
const GCSBucket = "bkt"

// GCS starts fake-gcs-server in process (no listener: its client talks to the handler
// directly) and opens its bucket through gcsblob and store.OpenBucket, which turns the
// storage client's own retries off. fake-gcs-server honours ifGenerationMatch=0 on
// simple, multipart and resumable uploads, so conditional objects of every size are
// exact.
func GCS(t testing.TB) store.Store {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true})
	if err != nil {
		t.Fatalf("storetest: start fake GCS: %v", err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: GCSBucket})
	client := srv.Client()
	t.Cleanup(func() { client.Close() })
	ctx := context.Background()
	b, err := gcsblob.OpenBucket(ctx, nil, GCSBucket, &gcsblob.Options{Client: client})
	if err != nil {
		t.Fatalf("storetest: open fake GCS bucket: %v", err)
	}
	s, err := store.OpenBucket(ctx, b, "gs://"+GCSBucket, FastOptions)
	if err != nil {
		t.Fatalf("storetest: open gs://%s: %v", GCSBucket, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, name)
}
