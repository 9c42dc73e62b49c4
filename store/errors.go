package store

import (
	"errors"
	"fmt"
	"net"
	"net/http"

	"cloud.google.com/go/storage"
	"gocloud.dev/gcerrors"
	"google.golang.org/api/googleapi"
)

// Error classes. Every error returned by a Store wraps exactly one of these, so callers
// branch with errors.Is and never on message text.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("object not found")
	// ErrPreconditionFailed: a put-if-absent lost because the key already holds another object.
	ErrPreconditionFailed = errors.New("precondition failed: object already exists")
	// ErrTransient: a failure that may succeed on retry (throttling, 5xx, connection refused
	// before the request was sent, a read that timed out). Stores retry these with jittered
	// backoff before returning them.
	ErrTransient = errors.New("transient store error")
	// ErrPermanent: a failure that will not succeed on retry (access denied, bad request,
	// invalid key).
	ErrPermanent = errors.New("permanent store error")
	// ErrOutcomeUnknown: a write whose request may or may not have landed (timeout or broken
	// connection after the request was sent, and a read-back could not decide). A caller must
	// not delete anything the write may have created.
	ErrOutcomeUnknown = errors.New("outcome unknown: the write may have landed")
	// ErrPreconditionsIgnored: the store accepted a second put-if-absent of the same key, so
	// it cannot be used for commits by more than one writer. Returned by Open and OpenBucket.
	ErrPreconditionsIgnored = errors.New("store ignores put-if-absent preconditions")
	// ErrLargePreconditionsIgnored: the store refuses a second put-if-absent of a small
	// object but accepts one of a large (multipart) object, as an S3-compatible server that
	// drops If-None-Match on CompleteMultipartUpload does. It wraps ErrPreconditionsIgnored.
	// A writable Open refuses such a store (see Options.SkipLargeProbe); reads still work.
	ErrLargePreconditionsIgnored = fmt.Errorf("%w on large (multipart) objects", ErrPreconditionsIgnored)
	// ErrInvalidURL: the store URL is malformed (not a URL, a bare path, a file URL naming
	// a host, an unsupported scheme, no bucket, an s3:// or gs:// query parameter unknown
	// to the opener or with a value it cannot parse); the message suggests what was meant.
	// Returned by ParseURL, Open and OpenBucket before any I/O.
	ErrInvalidURL = errors.New("invalid store URL")
)

// ErrNoBucket is not a class: it is the cause of an *Error of class ErrPermanent (not
// ErrNotFound: no object is absent, the whole store is) from a request that found that
// the S3 or GCS bucket the store URL names does not exist; the message names the bucket.
var ErrNoBucket = errors.New("bucket does not exist")

// Error describes a failed store request: the operation, the store URL (credentials
// removed), the object key (or the listed prefix), the class (one of the Err* values
// above) and the cause. Its message names the store and the key.
type Error struct {
	Op    Op     // the request that failed (OpOpen for Open's own failures)
	Store string // the store URL with credentials removed (Store.URL)
	Key   string // the object key, or the listed prefix for OpList
	Class error  // exactly one of ErrNotFound, ErrPreconditionFailed, ErrTransient, ErrPermanent, ErrOutcomeUnknown, ErrPreconditionsIgnored
	Err   error  // the driver's error, or nil
}

// Error returns "<op> <key> (store <url>): <class>: <cause>".
func (e *Error) Error() string {
	if e.Op == OpOpen && e.Key == "" {
		if e.Err == nil {
			return fmt.Sprintf("open store %s: %v", e.Store, e.Class)
		}
		return fmt.Sprintf("open store %s: %v: %v", e.Store, e.Class, e.Err)
	}
	if e.Err == nil {
		return fmt.Sprintf("%s %q (store %s): %v", e.Op, e.Key, e.Store, e.Class)
	}
	return fmt.Sprintf("%s %q (store %s): %v: %v", e.Op, e.Key, e.Store, e.Class, e.Err)
}

// Unwrap exposes both the class and the cause to errors.Is / errors.As.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Class}
	}
	return []error{e.Class, e.Err}
}

// classify maps a driver error to one of the error classes. write reports whether the request changes
// the store; a write that failed after its request may have been sent (no HTTP response,
// a broken connection, a timeout or cancellation) is ErrOutcomeUnknown rather than
// ErrTransient. An HTTP response is a definite answer: 408, 429 and 5xx are transient, other 4xx
// permanent.
func classify(err error, write bool) error {
	if err == nil {
		return nil
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return ErrNotFound
	case gcerrors.FailedPrecondition:
		return ErrPreconditionFailed
	case gcerrors.PermissionDenied, gcerrors.InvalidArgument, gcerrors.Unimplemented:
		return ErrPermanent
	case gcerrors.ResourceExhausted:
		return ErrTransient
	}
	if status, ok := httpStatus(err); ok {
		switch {
		case status == http.StatusNotFound:
			return ErrNotFound
		case status == http.StatusPreconditionFailed:
			return ErrPreconditionFailed
		case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500:
			return ErrTransient
		case status >= 400:
			return ErrPermanent
		}
	}
	// No HTTP answer: a network failure, a timeout or a cancellation.
	if isDialError(err) {
		return ErrTransient // the request never left this process
	}
	switch gcerrors.Code(err) {
	case gcerrors.Unknown, gcerrors.Internal, gcerrors.DeadlineExceeded, gcerrors.Canceled:
		if write {
			return ErrOutcomeUnknown // the request may have been sent and applied
		}
		return ErrTransient
	}
	return ErrPermanent
}

// httpStatus finds the HTTP status of a service response in err's chain (AWS SDK and
// Google API errors).
func httpStatus(err error) (int, bool) {
	var aws interface{ HTTPStatusCode() int }
	if errors.As(err, &aws) {
		if c := aws.HTTPStatusCode(); c != 0 {
			return c, true
		}
	}
	var g *googleapi.Error
	if errors.As(err, &g) && g.Code != 0 {
		return g.Code, true
	}
	return 0, false
}

// isDialError reports a failure to connect: the request was certainly not sent.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// noBucket reports a driver error saying the bucket does not exist (S3's NoSuchBucket
// error code, GCS's storage.ErrBucketNotExist).
func noBucket(err error) bool {
	var api interface{ ErrorCode() string }
	if errors.As(err, &api) && api.ErrorCode() == "NoSuchBucket" {
		return true
	}
	return errors.Is(err, storage.ErrBucketNotExist)
}
