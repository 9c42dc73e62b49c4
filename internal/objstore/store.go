// Package objstore is Shale's object-store layer: a gocloud.dev/blob bucket plus prefix,
// opened from a URL (file://, mem://, s3://, gs://), with exact put-if-absent across OS
// processes on every store, range reads, classified errors and per-operation request
// counters.
//
// Contracts:
//   - PutIfAbsent has exactly one winner per key across processes. On local disk it writes a
//     temp file, fsyncs it, link(2)s it into place (EEXIST = lost) and fsyncs the directory,
//     because gocloud's fileblob checks-then-renames (shared/reference/deps.md §2b). S3 uses
//     If-None-Match and GCS generation 0.
//   - Every returned error is an *Error wrapping one class: ErrNotFound,
//     ErrPreconditionFailed, ErrTransient, ErrPermanent or ErrOutcomeUnknown.
//   - Transient failures are retried with jittered backoff inside the store; a write whose
//     outcome is ambiguous is decided by reading the key back, and reported as
//     ErrOutcomeUnknown only when that read cannot decide.
//   - Every request attempt is counted under its Op.
package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/gcsblob" // gs:// URLs
	"gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob" // s3:// URLs
)

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key     string
	Size    int64 // bytes
	ModTime time.Time
}

// Store is a bucket plus prefix. Keys are relative to the prefix and use '/' separators.
// All methods are safe for concurrent use.
type Store interface {
	// Get reads a whole object. Errors: ErrNotFound, ErrTransient (after retries), ErrPermanent.
	Get(ctx context.Context, key string) ([]byte, error)
	// GetRange reads length bytes at offset (length < 0 reads to the end).
	GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error)
	// Head returns the object's attributes. Errors: ErrNotFound, …
	Head(ctx context.Context, key string) (ObjectInfo, error)
	// Put writes an object unconditionally and atomically (a reader sees the old object,
	// nothing, or the whole new object).
	Put(ctx context.Context, key string, data []byte) error
	// PutIfAbsent creates the object only if the key does not exist. Exactly one of several
	// concurrent callers (in any process) succeeds; the others get ErrPreconditionFailed.
	// An ambiguous attempt is decided by reading the key back (identical bytes = ours), and
	// ErrOutcomeUnknown is returned only when that cannot decide.
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// List returns objects whose key starts with prefix, in lexicographic key order. limit > 0
	// returns at most limit objects and makes one request; limit <= 0 lists everything.
	List(ctx context.Context, prefix string, limit int) ([]ObjectInfo, error)
	// Delete removes an object; deleting a missing object is not an error.
	Delete(ctx context.Context, key string) error
	// Counters returns the live request counters.
	Counters() *Counters
	// URL is the store URL with any credentials removed; errors name the store by it.
	URL() string
	Close() error
}

// Options tune Open.
type Options struct {
	// ReadOnly skips the put-if-absent probe. A store opened for writing (the default)
	// refuses to open with ErrPreconditionsIgnored when a second put-if-absent of the same
	// key is accepted.
	ReadOnly bool
	// Retries is the number of extra attempts for transient failures (default 5).
	Retries int
	// BaseBackoff is the first retry delay; it doubles with full jitter (default 20ms).
	BaseBackoff time.Duration
}

func (o Options) withDefaults() Options {
	if o.Retries == 0 {
		o.Retries = 5
	}
	if o.BaseBackoff == 0 {
		o.BaseBackoff = 20 * time.Millisecond
	}
	return o
}

// Open opens a store from a URL:
//
//	file:///abs/dir          local disk (created if missing)
//	mem://name               process-local memory (same name = same bucket within a process)
//	s3://bucket/prefix?...   S3 (region, endpoint, use_path_style as gocloud's s3blob defines)
//	gs://bucket/prefix       GCS
//
// Unless opts.ReadOnly, Open probes that the store refuses a second put-if-absent.
func Open(ctx context.Context, rawURL string, opts Options) (Store, error) {
	opts = opts.withDefaults()
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, &Error{Op: "open", Store: redact(rawURL), Class: ErrPermanent, Err: err}
	}
	var s Store
	switch u.Scheme {
	case "file":
		s, err = openLocal(u, opts)
	case "mem":
		s, err = openMem(u, opts)
	case "s3", "gs":
		s, err = openBlobURL(ctx, u, opts)
	default:
		return nil, &Error{Op: "open", Store: redact(rawURL), Class: ErrPermanent,
			Err: fmt.Errorf("unsupported store scheme %q (want file, mem, s3 or gs)", u.Scheme)}
	}
	if err != nil {
		return nil, err
	}
	if !opts.ReadOnly {
		if err := ProbePreconditions(ctx, s); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// OpenBucket wraps an already-open gocloud bucket (tests use it for fake S3/GCS servers).
// prefix is applied to every key; storeURL names the store in errors.
func OpenBucket(ctx context.Context, b *blob.Bucket, storeURL string, opts Options) (Store, error) {
	opts = opts.withDefaults()
	s := &bucketStore{bucket: b, url: redact(storeURL), opts: opts}
	if !opts.ReadOnly {
		if err := ProbePreconditions(ctx, s); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// ProbePreconditions writes a probe key twice with put-if-absent and fails with
// ErrPreconditionsIgnored if the second write is accepted.
func ProbePreconditions(ctx context.Context, s Store) error {
	key := fmt.Sprintf("_probe/%d-%x", time.Now().UnixNano(), rand.Uint64())
	if err := s.PutIfAbsent(ctx, key, []byte("first")); err != nil {
		return err
	}
	defer s.Delete(context.WithoutCancel(ctx), key)
	err := s.PutIfAbsent(ctx, key, []byte("second"))
	switch {
	case errors.Is(err, ErrPreconditionFailed):
		return nil
	case err == nil:
		return &Error{Op: OpPutIfAbsent, Store: s.URL(), Key: key, Class: ErrPreconditionsIgnored,
			Err: errors.New("a second put-if-absent of the same key succeeded; refusing to use this store for writing")}
	default:
		return err
	}
}

var memBuckets = map[string]*blob.Bucket{}

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

func openBlobURL(ctx context.Context, u *url.URL, opts Options) (Store, error) {
	prefix := strings.TrimPrefix(u.Path, "/")
	bu := *u
	bu.Path = ""
	b, err := blob.OpenBucket(ctx, bu.String())
	if err != nil {
		return nil, &Error{Op: "open", Store: redact(u.String()), Class: classify(err, false), Err: err}
	}
	if prefix != "" {
		if !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		b = blob.PrefixedBucket(b, prefix)
	}
	return &bucketStore{bucket: b, url: redact(u.String()), opts: opts}, nil
}

// redact removes user info and secret-looking query parameters from a store URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.User = nil
	q := u.Query()
	for k := range q {
		lk := strings.ToLower(k)
		if strings.Contains(lk, "secret") || strings.Contains(lk, "token") || strings.Contains(lk, "key") {
			q.Set(k, "REDACTED")
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// bucketStore implements Store over a gocloud bucket. Conditional writes use
// WriterOptions.IfNotExist, which is exact on memblob, s3blob and gcsblob.
type bucketStore struct {
	bucket   *blob.Bucket
	url      string
	opts     Options
	counters Counters
	noClose  bool
}

func (s *bucketStore) Counters() *Counters { return &s.counters }
func (s *bucketStore) URL() string         { return s.url }
func (s *bucketStore) Close() error {
	if s.noClose {
		return nil
	}
	return s.bucket.Close()
}

func (s *bucketStore) fail(op Op, key string, err error, written bool) error {
	return &Error{Op: op, Store: s.url, Key: key, Class: classify(err, written), Err: err}
}

func (s *bucketStore) Get(ctx context.Context, key string) ([]byte, error) {
	var out []byte
	err := retry(ctx, s.opts, func() error {
		s.counters.add(OpGet)
		b, err := s.bucket.ReadAll(ctx, key)
		if err != nil {
			return s.fail(OpGet, key, err, false)
		}
		s.counters.read(int64(len(b)))
		out = b
		return nil
	})
	return out, err
}

func (s *bucketStore) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	var out []byte
	err := retry(ctx, s.opts, func() error {
		s.counters.add(OpGetRange)
		r, err := s.bucket.NewRangeReader(ctx, key, offset, length, nil)
		if err != nil {
			return s.fail(OpGetRange, key, err, false)
		}
		defer r.Close()
		var buf []byte
		if length >= 0 {
			buf = make([]byte, length)
			n, err := io.ReadFull(r, buf)
			if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
				return s.fail(OpGetRange, key, err, false)
			}
			buf = buf[:n]
		} else {
			buf, err = io.ReadAll(r)
			if err != nil {
				return s.fail(OpGetRange, key, err, false)
			}
		}
		s.counters.read(int64(len(buf)))
		out = buf
		return nil
	})
	return out, err
}

func (s *bucketStore) Head(ctx context.Context, key string) (ObjectInfo, error) {
	var out ObjectInfo
	err := retry(ctx, s.opts, func() error {
		s.counters.add(OpHead)
		a, err := s.bucket.Attributes(ctx, key)
		if err != nil {
			return s.fail(OpHead, key, err, false)
		}
		out = ObjectInfo{Key: key, Size: a.Size, ModTime: a.ModTime}
		return nil
	})
	return out, err
}

func (s *bucketStore) Put(ctx context.Context, key string, data []byte) error {
	return retry(ctx, s.opts, func() error {
		s.counters.add(OpPut)
		if err := s.bucket.WriteAll(ctx, key, data, nil); err != nil {
			return s.fail(OpPut, key, err, true)
		}
		s.counters.wrote(int64(len(data)))
		return nil
	})
}

func (s *bucketStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return putIfAbsentDecided(ctx, s, key, data, func() error {
		s.counters.add(OpPutIfAbsent)
		if err := s.bucket.WriteAll(ctx, key, data, &blob.WriterOptions{IfNotExist: true}); err != nil {
			return s.fail(OpPutIfAbsent, key, err, true)
		}
		s.counters.wrote(int64(len(data)))
		return nil
	})
}

// putIfAbsentDecided runs attempt with retries. After an attempt whose outcome is ambiguous
// (transient or unknown), a later ErrPreconditionFailed may be our own earlier write: the key
// is read back and identical bytes count as success.
func putIfAbsentDecided(ctx context.Context, s Store, key string, data []byte, attempt func() error) error {
	ambiguous := false
	err := retry(ctx, storeOpts(s), func() error {
		err := attempt()
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrPreconditionFailed) && ambiguous {
			got, gerr := s.Get(ctx, key)
			if gerr != nil {
				return &Error{Op: OpPutIfAbsent, Store: s.URL(), Key: key, Class: ErrOutcomeUnknown, Err: gerr}
			}
			if bytes.Equal(got, data) {
				return nil
			}
			return err
		}
		if errors.Is(err, ErrTransient) || errors.Is(err, ErrOutcomeUnknown) {
			ambiguous = true
			if errors.Is(err, ErrOutcomeUnknown) {
				// Decide now: if our bytes are there we won; if other bytes are there we lost.
				got, gerr := s.Get(ctx, key)
				switch {
				case gerr == nil && bytes.Equal(got, data):
					return nil
				case gerr == nil:
					return &Error{Op: OpPutIfAbsent, Store: s.URL(), Key: key, Class: ErrPreconditionFailed}
				case errors.Is(gerr, ErrNotFound):
					return &Error{Op: OpPutIfAbsent, Store: s.URL(), Key: key, Class: ErrTransient, Err: err}
				}
			}
		}
		return err
	})
	return err
}

func storeOpts(s Store) Options {
	switch v := s.(type) {
	case *bucketStore:
		return v.opts
	case *localStore:
		return v.opts
	}
	return Options{}.withDefaults()
}

func (s *bucketStore) List(ctx context.Context, prefix string, limit int) ([]ObjectInfo, error) {
	return listPages(ctx, s.opts, &s.counters, s.url, s.bucket, prefix, limit, nil)
}

func listPages(ctx context.Context, opts Options, c *Counters, storeURL string, b *blob.Bucket, prefix string, limit int, skip func(string) bool) ([]ObjectInfo, error) {
	var out []ObjectInfo
	token := blob.FirstPageToken
	pageSize := 1000
	if limit > 0 && limit < pageSize {
		pageSize = limit
	}
	for {
		var page []*blob.ListObject
		var next []byte
		err := retry(ctx, opts, func() error {
			c.add(OpList)
			var err error
			page, next, err = b.ListPage(ctx, token, pageSize, &blob.ListOptions{Prefix: prefix})
			if err != nil {
				return &Error{Op: OpList, Store: storeURL, Key: prefix, Class: classify(err, false), Err: err}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		for _, o := range page {
			if o.IsDir || (skip != nil && skip(o.Key)) {
				continue
			}
			out = append(out, ObjectInfo{Key: o.Key, Size: o.Size, ModTime: o.ModTime})
			if limit > 0 && len(out) >= limit {
				return out, nil
			}
		}
		if len(next) == 0 {
			return out, nil
		}
		token = next
	}
}

func (s *bucketStore) Delete(ctx context.Context, key string) error {
	return retry(ctx, s.opts, func() error {
		s.counters.add(OpDelete)
		err := s.bucket.Delete(ctx, key)
		if err != nil {
			e := s.fail(OpDelete, key, err, true)
			if errors.Is(e, ErrNotFound) {
				return nil
			}
			return e
		}
		return nil
	})
}

// retry runs f until it succeeds, returns a non-transient error, the context ends, or the
// attempts are spent. Backoff doubles from opts.BaseBackoff with full jitter.
func retry(ctx context.Context, opts Options, f func() error) error {
	var err error
	for attempt := 0; ; attempt++ {
		err = f()
		if err == nil || !errors.Is(err, ErrTransient) || attempt >= opts.Retries {
			return err
		}
		d := opts.BaseBackoff << attempt
		d = time.Duration(rand.Int64N(int64(d) + 1))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}
