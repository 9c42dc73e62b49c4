package storetest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/shale-db/shale/store"
)

// S3Bucket is the bucket every S3Server creates.
const S3Bucket = "bkt"

// S3Options configure an S3Server.
type S3Options struct {
	// IgnorePreconditions strips If-None-Match (and If-Match) from every request before
	// the fake sees it: a store that silently ignores preconditions, which store.Open
	// must refuse with ErrPreconditionsIgnored.
	IgnorePreconditions bool
	// NoMultipartGuard leaves gofakes3's own behaviour on CompleteMultipartUpload: it
	// ignores If-None-Match there, so a large conditional object silently overwrites.
	// Only for showing that gap; store.Open's small probe cannot detect it.
	NoMultipartGuard bool
}

// S3Server is an in-process fake S3 (github.com/johannesboyne/gofakes3 with the s3mem
// backend) on an httptest server bound to 127.0.0.1, reached through gocloud's s3blob.
//
// Request path: Faults → (IgnorePreconditions: strip conditional headers) →
// multipart precondition guard → gofakes3.
//
// How large conditional objects are covered. s3blob writes through the AWS transfer
// manager, which switches to a multipart upload at 16 MiB (a fixed threshold; parts of
// 8 MiB). For a conditional write, s3blob sets UploadObjectInput.IfNoneMatch = "*", and
// transfermanager v0.4.16 copies it onto PutObjectInput (single upload) and onto
// CompleteMultipartUploadInput (mapCompleteMultipartUploadInput), whose serializer sends
// it as the If-None-Match header: real S3 then refuses the completion with 412 if the
// key exists, atomically with the commit. gofakes3 v1.2.0 honours If-None-Match only on
// PutObject (s3mem checks it under its lock) and ignores it on CompleteMultipartUpload.
// The guard in this server closes that gap the way S3 does: a CompleteMultipartUpload
// carrying If-None-Match: * takes an exclusive lock (every other object write takes it
// shared), checks the key in the backend, and answers 412 PreconditionFailed if it
// exists, else lets gofakes3 complete the upload under the lock. The guard only acts on
// the header, so a test that gets 412 for a ≥16 MiB object proves the client sent it;
// ConditionalCompletes counts the guarded completions so such a test can also prove the
// multipart path was taken. Package store itself does nothing special for large objects.
type S3Server struct {
	// URL is the server's base URL (http://127.0.0.1:port).
	URL string
	// StoreURL opens the bucket with store.Open: s3://bkt?endpoint=…&use_path_style=true
	// &region=us-east-1&anonymous=true&request_checksum_calculation=when_required. The
	// anonymous parameter avoids any AWS_* environment (gofakes3 does not check
	// signatures), so tests that use it may run in parallel.
	StoreURL string
	// Faults injects failures into every request (empty at start).
	Faults *Faults

	backend *s3mem.Backend
	srv     *httptest.Server

	writeMu              sync.RWMutex
	conditionalCompletes atomic.Int64
	refusedCompletes     atomic.Int64
}

// NewS3Server starts a fake S3 server for the test and stops it at cleanup.
func NewS3Server(t testing.TB, opts S3Options) *S3Server {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(S3Bucket); err != nil {
		t.Fatalf("storetest: create fake S3 bucket: %v", err)
	}
	s := &S3Server{backend: backend}
	fake := gofakes3.New(backend).Server()
	var h http.Handler = fake
	if !opts.NoMultipartGuard {
		h = s.guard(h)
	}
	if opts.IgnorePreconditions {
		h = stripPreconditions(h)
	}
	s.Faults = NewFaults(h)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("storetest: listen: %v", err)
	}
	s.srv = httptest.NewUnstartedServer(s.Faults)
	s.srv.Listener.Close()
	s.srv.Listener = l
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	s.URL = s.srv.URL
	q := url.Values{}
	q.Set("endpoint", s.URL)
	q.Set("use_path_style", "true")
	q.Set("region", "us-east-1")
	q.Set("anonymous", "true")
	q.Set("request_checksum_calculation", "when_required")
	s.StoreURL = "s3://" + S3Bucket + "?" + q.Encode()
	return s
}

// Open opens the bucket through store.Open(StoreURL) and closes it at cleanup.
func (s *S3Server) Open(t testing.TB, opts store.Options) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), s.StoreURL, opts)
	if err != nil {
		t.Fatalf("storetest: open %s: %v", s.StoreURL, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// ConditionalCompletes is the number of CompleteMultipartUpload requests that carried
// If-None-Match: * so far; RefusedCompletes is how many of them got 412.
func (s *S3Server) ConditionalCompletes() int64 { return s.conditionalCompletes.Load() }

// RefusedCompletes: see ConditionalCompletes.
func (s *S3Server) RefusedCompletes() int64 { return s.refusedCompletes.Load() }

// guard enforces If-None-Match: * on CompleteMultipartUpload (see the S3Server comment).
func (s *S3Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := S3Op(r)
		switch {
		case op == S3CompleteMultipartUpload && r.Header.Get("If-None-Match") == "*":
			s.conditionalCompletes.Add(1)
			s.writeMu.Lock()
			defer s.writeMu.Unlock()
			bucket, key := s3BucketKey(r)
			if _, err := s.backend.HeadObject(bucket, key); err == nil {
				s.refusedCompletes.Add(1)
				writeS3Error(w, r, http.StatusPreconditionFailed, "PreconditionFailed",
					"At least one of the pre-conditions you specified did not hold")
				return
			}
		case op == S3PutObject || op == S3CompleteMultipartUpload || op == S3DeleteObject:
			s.writeMu.RLock()
			defer s.writeMu.RUnlock()
		}
		next.ServeHTTP(w, r)
	})
}

func stripPreconditions(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("If-None-Match")
		r.Header.Del("If-Match")
		next.ServeHTTP(w, r)
	})
}
