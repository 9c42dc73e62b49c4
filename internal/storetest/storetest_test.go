package storetest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shale-db/shale/store"
)

// Every factory gives a fresh, isolated store of its kind.
func TestKindsAreFreshAndIsolated(t *testing.T) {
	ctx := context.Background()
	a, b := All(t), All(t)
	if len(a) != 4 {
		t.Fatalf("All opened %d stores, want 4", len(a))
	}
	prefixes := map[string]string{"mem": "mem://", "local": "file://", "s3": "s3://", "gcs": "gs://"}
	for name, s := range a {
		if !strings.HasPrefix(s.URL(), prefixes[name]) {
			t.Errorf("%s store has URL %s", name, s.URL())
		}
		if err := s.Put(ctx, "k", []byte(name)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if objs, err := s.List(ctx, "", 0); err != nil || len(objs) != 1 {
			t.Fatalf("%s: a fresh store lists %v, %v; want only k", name, objs, err)
		}
		if _, err := b[name].Get(ctx, "k"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s: a second store sees the first one's object (%v)", name, err)
		}
	}
}

func TestLocalAtSharesADirectory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, b := LocalAt(t, dir), LocalAt(t, dir)
	if err := a.PutIfAbsent(ctx, "k", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, "k", []byte("b")); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("second handle's put-if-absent: %v", err)
	}
}

// serveCounting is a handler that counts the requests it handles.
func serveCounting(n *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.Copy(io.Discard, r.Body)
		w.Write([]byte("ok"))
	})
}

func TestFaultsStatusTimesAndOrder(t *testing.T) {
	var handled atomic.Int64
	f := NewFaults(serveCounting(&handled))
	srv := httptest.NewServer(f)
	defer srv.Close()
	isPut := func(r *http.Request) bool { return r.Method == http.MethodPut }
	first := f.Add(Fault{Match: isPut, Times: 2, Status: http.StatusServiceUnavailable})
	second := f.Add(Fault{Match: isPut, Times: 1, Status: http.StatusForbidden})
	do := func(method string) int {
		req, _ := http.NewRequest(method, srv.URL+"/bkt/key", strings.NewReader("body"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusServiceUnavailable && !strings.Contains(string(b), "<Code>ServiceUnavailable</Code>") {
			t.Fatalf("503 body %q is not an S3 error document", b)
		}
		return resp.StatusCode
	}
	got := []int{do(http.MethodGet), do(http.MethodPut), do(http.MethodPut), do(http.MethodPut), do(http.MethodPut)}
	want := []int{200, 503, 503, 403, 200}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("statuses %v, want %v", got, want)
		}
	}
	if first.Hits() != 2 || second.Hits() != 1 || handled.Load() != 2 {
		t.Fatalf("hits %d %d, handled %d; want 2 1 2", first.Hits(), second.Hits(), handled.Load())
	}
}

// Drop lets the request through to the store and then denies the client its response.
func TestFaultsDropAppliesThenHangsUp(t *testing.T) {
	var handled atomic.Int64
	f := NewFaults(serveCounting(&handled))
	srv := httptest.NewServer(f)
	defer srv.Close()
	f.Add(Fault{Times: 1, Drop: true})
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/bkt/key", strings.NewReader("body"))
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("dropped request got a response: %s", resp.Status)
	}
	if handled.Load() != 1 {
		t.Fatalf("the store handled %d requests, want 1", handled.Load())
	}
}

// Delay holds a request; a client that gives up ends the wait early.
func TestFaultsDelay(t *testing.T) {
	var handled atomic.Int64
	f := NewFaults(serveCounting(&handled))
	srv := httptest.NewServer(f)
	defer srv.Close()
	f.Add(Fault{Times: 1, Delay: 50 * time.Millisecond})
	start := time.Now()
	resp, err := http.Get(srv.URL + "/bkt/key")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Fatalf("delayed request answered after %v", el)
	}

	f.Add(Fault{Times: 1, Delay: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL+"/bkt/key", strings.NewReader("body"))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("request delayed by an hour was answered")
	}
	// The server finishes the abandoned request, as a real one would.
	deadline := time.Now().Add(10 * time.Second)
	for handled.Load() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("abandoned request never reached the store (handled %d)", handled.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestS3OpNames(t *testing.T) {
	cases := []struct{ method, target, want string }{
		{"GET", "/bkt?list-type=2&prefix=a", S3ListObjects},
		{"GET", "/bkt/a/b", S3GetObject},
		{"HEAD", "/bkt/a/b", S3HeadObject},
		{"PUT", "/bkt/a/b", S3PutObject},
		{"DELETE", "/bkt/a/b", S3DeleteObject},
		{"POST", "/bkt/a/b?uploads", S3CreateMultipartUpload},
		{"PUT", "/bkt/a/b?partNumber=1&uploadId=x", S3UploadPart},
		{"POST", "/bkt/a/b?uploadId=x", S3CompleteMultipartUpload},
		{"DELETE", "/bkt/a/b?uploadId=x", S3AbortMultipartUpload},
	}
	for _, c := range cases {
		r := httptest.NewRequest(c.method, c.target, nil)
		if got := S3Op(r); got != c.want {
			t.Errorf("%s %s = %s, want %s", c.method, c.target, got, c.want)
		}
	}
}
