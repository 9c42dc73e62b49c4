package storetest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Fault is one rule of a Faults middleware. A request that matches a rule with budget left
// is affected by that rule (the first such rule in order) and no other.
type Fault struct {
	// Match selects the requests the rule applies to; nil matches every request. See
	// S3Op for matching by S3 operation.
	Match func(r *http.Request) bool
	// Times is how many matching requests the rule affects; 0 means every one.
	Times int
	// Delay waits before the request is handled (forwarded, or answered with Status). The
	// wait is cut short when the client goes away; the request is then still handled, as a
	// real server would finish a request whose client has given up.
	Delay time.Duration
	// Status, when non-zero, answers with this HTTP status and an S3-style error body
	// (code ServiceUnavailable for 503, SlowDown for 429, InternalError for 500, else
	// Forbidden/BadRequest/…) without forwarding: the store never sees the request.
	Status int
	// Drop forwards the request, so the store applies it, then closes the connection
	// without sending the response: the client cannot know that its write landed.
	Drop bool
}

// FaultRule is a Fault added to a Faults middleware; Hits counts the requests it affected.
type FaultRule struct {
	Fault
	hits int
	f    *Faults
}

// Hits is the number of requests this rule has affected so far.
func (r *FaultRule) Hits() int {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	return r.hits
}

// Faults is an HTTP middleware that injects failures into requests to a fake store
// server: error statuses, delays, and responses dropped after the request was applied.
// Rules are consulted in the order they were added. Safe for concurrent use.
type Faults struct {
	next  http.Handler
	mu    sync.Mutex
	rules []*FaultRule
}

// NewFaults wraps next. With no rules it forwards every request unchanged.
func NewFaults(next http.Handler) *Faults { return &Faults{next: next} }

// Add appends a rule and returns it (for Hits).
func (f *Faults) Add(fault Fault) *FaultRule {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := &FaultRule{Fault: fault, f: f}
	f.rules = append(f.rules, r)
	return r
}

// Clear removes every rule.
func (f *Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

func (f *Faults) pick(r *http.Request) *Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, rule := range f.rules {
		if rule.Times > 0 && rule.hits >= rule.Times {
			continue
		}
		if rule.Match != nil && !rule.Match(r) {
			continue
		}
		rule.hits++
		fault := rule.Fault
		return &fault
	}
	return nil
}

func (f *Faults) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fault := f.pick(r)
	if fault == nil {
		f.next.ServeHTTP(w, r)
		return
	}
	if fault.Delay > 0 {
		// Read the body first: only then does the server notice a client that hangs up.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		t := time.NewTimer(fault.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
	}
	switch {
	case fault.Status != 0:
		writeS3Error(w, r, fault.Status, s3CodeFor(fault.Status), "injected fault")
	case fault.Drop:
		rec := httptest.NewRecorder()
		f.next.ServeHTTP(rec, r) // the store applies the request
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic("storetest: Drop needs an HTTP/1 server whose ResponseWriter can be hijacked")
		}
		conn, _, err := hj.Hijack()
		if err == nil {
			conn.Close()
		}
	default:
		f.next.ServeHTTP(w, r)
	}
}

func s3CodeFor(status int) string {
	switch status {
	case http.StatusServiceUnavailable:
		return "ServiceUnavailable"
	case http.StatusTooManyRequests:
		return "SlowDown"
	case http.StatusInternalServerError:
		return "InternalError"
	case http.StatusForbidden:
		return "AccessDenied"
	case http.StatusPreconditionFailed:
		return "PreconditionFailed"
	default:
		return strings.ReplaceAll(http.StatusText(status), " ", "")
	}
}

// writeS3Error answers like S3 does: an XML error document (no body for HEAD).
func writeS3Error(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Error><Code>%s</Code><Message>%s</Message><Resource>%s</Resource><RequestId>storetest</RequestId></Error>`,
		code, msg, r.URL.Path)
}

// S3 operation names returned by S3Op.
const (
	S3GetObject               = "GetObject"
	S3HeadObject              = "HeadObject"
	S3PutObject               = "PutObject"
	S3DeleteObject            = "DeleteObject"
	S3ListObjects             = "ListObjects"
	S3CreateMultipartUpload   = "CreateMultipartUpload"
	S3UploadPart              = "UploadPart"
	S3CompleteMultipartUpload = "CompleteMultipartUpload"
	S3AbortMultipartUpload    = "AbortMultipartUpload"
	S3Other                   = "Other"
)

// S3Op names the S3 operation of a path-style request (/bucket/key?…).
func S3Op(r *http.Request) string {
	q := r.URL.Query()
	_, key := s3BucketKey(r)
	_, uploads := q["uploads"]
	uploadID := q.Get("uploadId")
	switch {
	case key == "" && r.Method == http.MethodGet:
		return S3ListObjects
	case key == "":
		return S3Other
	case r.Method == http.MethodPost && uploads:
		return S3CreateMultipartUpload
	case r.Method == http.MethodPut && uploadID != "":
		return S3UploadPart
	case r.Method == http.MethodPost && uploadID != "":
		return S3CompleteMultipartUpload
	case r.Method == http.MethodDelete && uploadID != "":
		return S3AbortMultipartUpload
	case r.Method == http.MethodPut:
		return S3PutObject
	case r.Method == http.MethodGet:
		return S3GetObject
	case r.Method == http.MethodHead:
		return S3HeadObject
	case r.Method == http.MethodDelete:
		return S3DeleteObject
	}
	return S3Other
}

// OnS3 returns a Match function selecting the given S3 operations (see S3Op).
func OnS3(ops ...string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		op := S3Op(r)
		for _, o := range ops {
			if o == op {
				return true
			}
		}
		return false
	}
}

// s3BucketKey splits a path-style request path into bucket and key.
func s3BucketKey(r *http.Request) (bucket, key string) {
	bucket, key, _ = strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	return bucket, key
}
