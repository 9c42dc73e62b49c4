// Package store is Shale's object-store layer: a gocloud.dev/blob bucket plus prefix,
// opened from a URL (file://, mem://, s3://, gs://), with exact put-if-absent across OS
// processes on every store, range reads, classified errors and per-operation request
// counters.
//
// Start with Open, which returns a Store for a URL; hand the Store to engine.Open. Branch
// on failures with errors.Is and the classes ErrNotFound, ErrPreconditionFailed,
// ErrTransient, ErrPermanent and ErrOutcomeUnknown; errors.As with *Error gives the
// operation, the store and the key. A Store is safe for concurrent use by any number of
// goroutines, and any number of processes may open the same store.
//
// Contracts:
//   - PutIfAbsent has exactly one winner per key across processes, among writers of
//     distinct bytes. On local disk it writes a temp file, fsyncs it, link(2)s it into
//     place (EEXIST = lost) and fsyncs the directory, because gocloud's fileblob
//     checks-then-renames (shared/reference/deps.md §2b). S3 uses If-None-Match (sent on
//     PutObject and, for objects of 16 MiB and more, on CompleteMultipartUpload), GCS
//     generation 0 (on simple and resumable uploads). Tests hold both large-object paths
//     to this (internal/storetest: the S3 fake enforces If-None-Match on
//     CompleteMultipartUpload the way S3 does, since gofakes3 alone ignores it there).
//   - Open refuses a store that accepts a second put-if-absent (ErrPreconditionsIgnored).
//     Its probe uses small objects; on S3 and GCS the first writable open also probes with
//     multipart-sized objects, for S3-compatible stores that drop If-None-Match on
//     CompleteMultipartUpload, and records the result in the store
//     (ErrLargePreconditionsIgnored, Options.SkipLargeProbe, PreconditionsKey).
//   - PutIfAbsent is idempotent: it succeeds when the key already holds exactly the bytes
//     being written. A "key taken" answer is always decided by reading the key back,
//     because an SDK-level retry can hide that an earlier attempt of the same call landed.
//   - Every returned error is an *Error wrapping one class: ErrNotFound,
//     ErrPreconditionFailed, ErrTransient, ErrPermanent or ErrOutcomeUnknown (and
//     ErrPreconditionsIgnored from Open). Its message names the store and the key.
//   - Transient failures are retried with jittered backoff inside the store, which is the
//     only retry layer: stores opened from s3:// and gs:// URLs have the SDK's own retries
//     turned off, so every attempt is visible, counted and classified here.
//   - Every request attempt is counted under its Op. A fresh store's counters are zero
//     (Open's precondition probe is not counted).
package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
)

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key     string    // relative to the store's prefix, as passed to Get
	Size    int64     // bytes
	ModTime time.Time // when the object was written, as the store reports it (its clock, not ours)
}

// RangeReaderInto is implemented by stores that can read a byte range into the caller's
// buffer (the local store), so a reader that reuses its buffers (data file batches)
// allocates nothing per read. Other stores, and wrappers that do not forward it, are read
// with GetRange.
type RangeReaderInto interface {
	// GetRangeInto is GetRange(ctx, key, offset, len(dst)) into dst: it returns how many
	// bytes it read, fewer than len(dst) only where the object ends. Errors: as GetRange.
	GetRangeInto(ctx context.Context, key string, offset int64, dst []byte) (int, error)
}

// Store is a bucket plus prefix. Keys are relative to the prefix, use '/' separators and
// must be valid object keys: non-empty UTF-8 without NUL, no leading or trailing '/', no
// empty, "." or ".." segments (otherwise the call fails with ErrPermanent).
// All methods are safe for concurrent use.
type Store interface {
	// Get reads a whole object. Errors: ErrNotFound, ErrTransient (after retries), ErrPermanent.
	Get(ctx context.Context, key string) ([]byte, error)
	// GetRange reads length bytes at offset (length < 0 reads to the end). A range that runs
	// past the end of the object is cut short; an offset at or past the end returns an empty
	// slice. One request per attempt. Errors: as Get; a negative offset is ErrPermanent.
	GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error)
	// Head returns the object's attributes. Errors: as Get.
	Head(ctx context.Context, key string) (ObjectInfo, error)
	// Put writes an object unconditionally and atomically (a reader sees the old object,
	// nothing, or the whole new object). Errors: ErrTransient, ErrPermanent,
	// ErrOutcomeUnknown (the object may have been written).
	Put(ctx context.Context, key string, data []byte) error
	// PutIfAbsent creates the object only if the key does not exist. Exactly one of several
	// concurrent callers writing distinct bytes (in any process) succeeds; the others get
	// ErrPreconditionFailed. A caller whose bytes are already stored under the key succeeds
	// (the call is idempotent). A key reported taken is read back (one Head, plus one Get
	// when size and MD5 cannot tell the objects apart). ErrOutcomeUnknown is returned only
	// when an attempt may have landed and the read-back cannot decide.
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// List returns objects whose key starts with prefix, in lexicographic (byte) key order.
	// limit > 0 returns at most limit objects; on S3 and GCS it then makes one request when
	// limit <= 1000, on local disk and in memory always one. limit <= 0 lists everything,
	// one request per page of 1000.
	List(ctx context.Context, prefix string, limit int) ([]ObjectInfo, error)
	// Delete removes an object; deleting a missing object is not an error.
	// Errors: ErrTransient, ErrPermanent, ErrOutcomeUnknown.
	Delete(ctx context.Context, key string) error
	// Counters returns the live request counters.
	Counters() *Counters
	// URL is the store URL with any credentials removed; errors name the store by it.
	URL() string
	// Close releases the bucket (connections, file handles). Calls made after Close
	// fail; close a store only once no goroutine uses it.
	Close() error
}

// Options tune Open and OpenBucket.
type Options struct {
	// ReadOnly skips the put-if-absent probe. A store opened for writing (the default)
	// refuses to open with ErrPreconditionsIgnored when a second put-if-absent of the same
	// key is accepted.
	ReadOnly bool
	// MustExist makes a writable open of a file:// store whose directory does not exist
	// fail with ErrNotFound, as a read-only open does, instead of creating the directory:
	// for programs that only change tables already in a store, so that a mistyped path is
	// reported rather than created. S3 and GCS stores never create their bucket anyway.
	MustExist bool
	// SkipLargeProbe skips the large-object check of a writable open. Without it, a
	// writable Open (or OpenBucket) of a store with a separate large-object write path
	// (see LargeWritePath: s3:// and gs://) runs CheckLargePreconditions after the small
	// probe: the store's first writable open uploads two LargeProbeSize objects and
	// records the result at PreconditionsKey, later opens read the record (one GET). A
	// store that accepts a second put-if-absent of a large object is refused with
	// ErrLargePreconditionsIgnored, as S3-compatible servers that drop If-None-Match on
	// CompleteMultipartUpload do (the small probe cannot see that).
	SkipLargeProbe bool
	// Retries is the number of extra attempts for transient failures (default 5; negative
	// means none).
	Retries int
	// BaseBackoff is the first retry delay; it doubles per attempt, with full jitter
	// (default 20ms).
	BaseBackoff time.Duration
	// MaxBackoff caps one retry delay (default 2s).
	MaxBackoff time.Duration
	// AttemptTimeout bounds one request attempt, including reading its response body.
	// An attempt that times out is retried; for a write its outcome is unknown until a
	// later attempt or a read-back decides it. 0 means no per-attempt limit (the caller's
	// context still applies).
	AttemptTimeout time.Duration
	// Slow, when set, is told about a request of an S3 or GCS store that has gone on for
	// SlowAfter without finishing (retries included), and again every SlowAfter until it
	// finishes: a server that accepts connections but never answers otherwise makes a
	// caller wait without a word (there is no per-attempt limit by default). It is called
	// from another goroutine, must not block, and changes nothing about the request.
	Slow func(SlowRequest)
	// SlowAfter is the period of Slow (default 10s).
	SlowAfter time.Duration
}

// SlowRequest describes a request that has not finished yet (Options.Slow).
type SlowRequest struct {
	Store  string        // the store's redacted URL
	Op     Op            // the request kind
	Key    string        // the object key (for a listing, the prefix)
	Waited time.Duration // since the request started, retries included
}

func (o Options) withDefaults() Options {
	switch {
	case o.Retries == 0:
		o.Retries = 5
	case o.Retries < 0:
		o.Retries = 0
	}
	if o.BaseBackoff <= 0 {
		o.BaseBackoff = 20 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 2 * time.Second
	}
	if o.MaxBackoff < o.BaseBackoff {
		o.MaxBackoff = o.BaseBackoff
	}
	if o.SlowAfter <= 0 {
		o.SlowAfter = 10 * time.Second
	}
	return o
}

// Open opens a store from a URL:
//
//	file:///abs/dir          local disk (created if missing, unless opts.ReadOnly or MustExist)
//	mem://name               process-local memory (same name = same bucket within a process)
//	s3://bucket/prefix?...   S3 (region, endpoint, use_path_style, anonymous, … as
//	                         gocloud's s3blob URL opener defines them; credentials from
//	                         the environment, or ACCESS_KEY_ID:SECRET_ACCESS_KEY@bucket)
//	gs://bucket/prefix       GCS (credentials as gocloud's gcsblob URL opener finds them)
//
// For s3:// and gs:// the SDK's own retries are turned off (see the package comment).
// The URL is checked first with ParseURL. A read-only open creates nothing: a file://
// directory that does not exist is ErrNotFound (as with opts.MustExist). Unless opts.ReadOnly, Open probes that
// the store refuses a second put-if-absent (with small objects; on S3 and GCS with large
// ones too, once per store: see Options.SkipLargeProbe). Errors name the store by its
// redacted URL (see Redact) and never contain its credentials: ErrInvalidURL (before any
// I/O), ErrNotFound, ErrPermanent, ErrPreconditionsIgnored (ErrLargePreconditionsIgnored),
// or the probe's error.
func Open(ctx context.Context, rawURL string, opts Options) (Store, error) {
	opts = opts.withDefaults()
	u, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	// Libraries quote the URL (or the endpoint in it) in some of their errors: every
	// error leaves Open, and every request error leaves the store, without its secrets.
	red := newRedactor(rawURL)
	var s Store
	switch u.Scheme {
	case "file":
		s, err = openLocal(u, opts)
	case "mem":
		s, err = openMem(u, opts)
	case "s3":
		s, err = openS3URL(ctx, u, opts, red)
	case "gs":
		s, err = openGSURL(ctx, u, opts, red)
	}
	if err != nil {
		return nil, red.wrap(err)
	}
	s, err = probed(ctx, s, opts)
	return s, red.wrap(err)
}

// OpenBucket wraps an already-open gocloud bucket (tests use it for fake S3/GCS servers).
// storeURL names the store in errors (credentials are removed). The bucket is closed with
// the store. A GCS bucket's *storage.Client has its retries turned off (the store
// retries); an S3 bucket's client should be built with aws.NopRetryer (the store cannot
// change it). Unless opts.ReadOnly, OpenBucket probes that the store refuses a second
// put-if-absent, on S3 and GCS buckets with large objects too (errors as Open).
func OpenBucket(ctx context.Context, b *blob.Bucket, storeURL string, opts Options) (Store, error) {
	opts = opts.withDefaults()
	disableGCSRetries(b)
	red := newRedactor(storeURL)
	s, err := probed(ctx, &bucketStore{bucket: b, url: Redact(storeURL), opts: opts, redact: red,
		largeWritePath: bucketHasLargeWritePath(b)}, opts)
	return s, red.wrap(err)
}

func probed(ctx context.Context, s Store, opts Options) (Store, error) {
	if !opts.ReadOnly {
		err := ProbePreconditions(ctx, s)
		if err == nil && !opts.SkipLargeProbe && LargeWritePath(s) {
			err = CheckLargePreconditions(ctx, s)
		}
		if err != nil {
			s.Close()
			return nil, err
		}
	}
	s.Counters().reset()
	return s, nil
}

// ProbeKeyPrefix is where the precondition probes write (and then delete) their objects.
const ProbeKeyPrefix = "_probe/"

// LargeProbeSize is the object size of ProbeLargePreconditions: one byte past the 16 MiB
// at which s3blob switches to a multipart upload.
const LargeProbeSize = 16<<20 + 1

// ProbePreconditions writes a small probe key twice with put-if-absent (different bytes)
// and fails with ErrPreconditionsIgnored if the second write is accepted. The probe object
// is deleted afterwards. It costs about 4 requests.
func ProbePreconditions(ctx context.Context, s Store) error {
	return probe(ctx, s, []byte("first"), []byte("second"))
}

// ProbeLargePreconditions is ProbePreconditions with LargeProbeSize objects, which S3
// writes as multipart uploads: it catches an S3-compatible store that honours
// If-None-Match on PutObject but not on CompleteMultipartUpload (the small probe cannot).
// It uploads about 32 MiB and reads back 16 MiB. Open runs it through
// CheckLargePreconditions once per store (see Options.SkipLargeProbe).
// Errors: ErrPreconditionsIgnored, or the store error of a probe request.
func ProbeLargePreconditions(ctx context.Context, s Store) error {
	first := make([]byte, LargeProbeSize)
	second := make([]byte, LargeProbeSize)
	copy(first, "first")
	copy(second, "second")
	return probe(ctx, s, first, second)
}

func probe(ctx context.Context, s Store, first, second []byte) error {
	key := fmt.Sprintf("%s%d-%016x", ProbeKeyPrefix, time.Now().UnixNano(), rand.Uint64())
	if err := s.PutIfAbsent(ctx, key, first); err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		s.Delete(dctx, key)
	}()
	err := s.PutIfAbsent(ctx, key, second)
	switch {
	case errors.Is(err, ErrPreconditionFailed):
		return nil
	case err == nil:
		return &Error{Op: OpPutIfAbsent, Store: s.URL(), Key: key, Class: ErrPreconditionsIgnored,
			Err: fmt.Errorf("a second put-if-absent of the same key (%d bytes) succeeded; refusing to use this store for writing", len(second))}
	default:
		return err
	}
}

var (
	memMu      sync.Mutex
	memBuckets = map[string]*blob.Bucket{}
)

// openMem opens (or creates) the process-wide in-memory bucket named by the URL's host
// and path. Closing the store leaves the bucket in place for other handles.
func openMem(u *url.URL, opts Options) (Store, error) {
	name := u.Host + u.Path
	memMu.Lock()
	b, ok := memBuckets[name]
	if !ok {
		b = memblob.OpenBucket(nil)
		memBuckets[name] = b
	}
	memMu.Unlock()
	return &bucketStore{bucket: b, url: "mem://" + name, opts: opts, noClose: true}, nil
}

// validKey checks the key rules in the Store comment.
func validKey(key string) error {
	if key == "" {
		return errors.New("empty key")
	}
	if !utf8.ValidString(key) || strings.ContainsRune(key, 0) {
		return fmt.Errorf("invalid key %q: not UTF-8 or contains NUL", key)
	}
	for _, part := range strings.Split(key, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("invalid key %q: empty, \".\" or \"..\" segment (or a leading or trailing '/')", key)
		}
	}
	return nil
}
