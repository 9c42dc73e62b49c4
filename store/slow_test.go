package store_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"gocloud.dev/blob/gcsblob"

	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/store"
)

// silentServer accepts TCP connections and never answers: a store endpoint that hangs.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// TestSlowRequestsAreReported: a request to an S3 server that accepts the connection and
// never answers is reported to Options.Slow after SlowAfter, and again every SlowAfter
// (the op, the key, the redacted store URL, the time waited, growing), until the
// caller's context ends it; a store without Slow reports nothing and still ends with its
// context.
func TestSlowRequestsAreReported(t *testing.T) {
	addr := silentServer(t)
	raw := "s3://AKID:SLOWs3cret@bkt/p?endpoint=http://" + addr + "&use_path_style=true&region=us-east-1"
	reports := make(chan store.SlowRequest, 100)
	s, err := store.Open(context.Background(), raw, store.Options{ReadOnly: true, SlowAfter: 50 * time.Millisecond,
		Slow: func(r store.SlowRequest) { reports <- r }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		_, err := s.Get(ctx, "tbl/_versions/x.manifest")
		got <- err
	}()
	var seen []store.SlowRequest
	deadline := time.After(time.Minute)
	for len(seen) < 3 {
		select {
		case r := <-reports:
			seen = append(seen, r)
		case err := <-got:
			t.Fatalf("Get of a silent server returned %v", err)
		case <-deadline:
			t.Fatalf("no slow-request reports within a minute: %+v", seen)
		}
	}
	cancel()
	if err := <-got; err == nil || !errors.Is(err, context.Canceled) && !errors.Is(err, store.ErrTransient) {
		t.Fatalf("Get after cancel: %v", err)
	}
	for i, r := range seen {
		if r.Op != store.OpGet || r.Key != "tbl/_versions/x.manifest" || strings.Contains(r.Store, "SLOWs3cret") ||
			!strings.HasPrefix(r.Store, "s3://") || (i > 0 && r.Waited <= seen[i-1].Waited) || r.Waited < 50*time.Millisecond {
			t.Fatalf("report %d: %+v (all: %+v)", i, r, seen)
		}
	}
	quiet, err := store.Open(context.Background(), raw, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Close()
	qctx, qcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer qcancel()
	if _, err := quiet.Head(qctx, "k"); err == nil {
		t.Fatal("Head of a silent server succeeded")
	}
}

// TestGCSOpenWithoutCredentialsPrintsNothing: opening a gs:// store on a machine without
// Google default credentials (and no emulator) writes nothing to standard output, where
// gocloud's default opener printed "Warning: unable to load GCP Default Credentials: …"
// into a query's CSV or a --json report; the store opens (unauthenticated requests).
func TestGCSOpenWithoutCredentialsPrintsNothing(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("STORAGE_EMULATOR_HOST_GRPC", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	t.Setenv("HOME", t.TempDir()) // no ~/.config/gcloud/application_default_credentials.json
	t.Setenv("CLOUDSDK_CONFIG", t.TempDir())
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	s, err := store.Open(context.Background(), "gs://shale-no-creds/p", store.Options{ReadOnly: true})
	os.Stdout = stdout
	w.Close()
	printed, _ := io.ReadAll(r)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	s.Close()
	if len(printed) != 0 {
		t.Fatalf("opening a gs:// store printed on stdout: %q", printed)
	}
}

// TestMissingBucketIsPermanentAndNamed: listings and writes of an S3 or GCS bucket that
// does not exist (and S3 reads) fail as ErrPermanent wrapping ErrNoBucket, naming the
// bucket without the SDK's request ids, not as ErrNotFound ("object not found", as if
// only the key were absent).
func TestMissingBucketIsPermanentAndNamed(t *testing.T) {
	ctx := testCtx(t)
	srv := storetest.NewS3Server(t, storetest.S3Options{})
	s3, err := store.Open(ctx, strings.Replace(srv.StoreURL, "s3://"+storetest.S3Bucket, "s3://nosuchbkt", 1), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()

	gsrv, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true})
	if err != nil {
		t.Fatal(err)
	}
	defer gsrv.Stop()
	b, err := gcsblob.OpenBucket(ctx, nil, "nosuchbkt", &gcsblob.Options{Client: gsrv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	gs, err := store.OpenBucket(ctx, b, "gs://nosuchbkt", store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer gs.Close()

	for name, s := range map[string]store.Store{"s3": s3, "gs": gs} {
		_, lerr := s.List(ctx, "t/", 0)
		perr := s.PutIfAbsent(ctx, "t/k", []byte("x"))
		errs := map[string]error{"list": lerr, "put_if_absent": perr}
		if name == "s3" {
			// S3 says NoSuchBucket to a GET too; GCS answers an object read in a missing
			// bucket as for a missing object, so its Get stays ErrNotFound.
			_, errs["get"] = s.Get(ctx, "t/k")
		}
		for op, err := range errs {
			if !errors.Is(err, store.ErrNoBucket) || !errors.Is(err, store.ErrPermanent) || errors.Is(err, store.ErrNotFound) ||
				!strings.Contains(err.Error(), `bucket does not exist: "nosuchbkt"`) || strings.Contains(err.Error(), "RequestID") {
				t.Errorf("%s %s of a missing bucket: %v", name, op, err)
			}
		}
	}
}
