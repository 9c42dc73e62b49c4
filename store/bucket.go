package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"gocloud.dev/blob"
)

// bucketStore implements Store over a gocloud bucket (memblob, s3blob, gcsblob).
// Conditional writes use WriterOptions.IfNotExist, which is exact on all three: memblob
// checks under its lock, s3blob sends If-None-Match: * on PutObject and on
// CompleteMultipartUpload (transfermanager maps it onto both), gcsblob sends
// ifGenerationMatch=0 on simple and resumable uploads.
type bucketStore struct {
	bucket   *blob.Bucket
	url      string
	opts     Options
	counters Counters
	noClose  bool
	redact   redactor // removes the store URL's credentials from driver errors
	// largeWritePath: S3 or GCS, where large objects are uploaded another way.
	largeWritePath bool
}

func (s *bucketStore) Counters() *Counters { return &s.counters }
func (s *bucketStore) URL() string         { return s.url }
func (s *bucketStore) Close() error {
	if s.noClose {
		return nil
	}
	return s.bucket.Close()
}

func (s *bucketStore) namer(op Op, key string) errorNamer {
	return errorNamer{op: op, store: s.url, key: key}
}

// fail classifies a driver error for op on key.
func (s *bucketStore) fail(op Op, key string, err error) error {
	write := op == OpPut || op == OpPutIfAbsent || op == OpDelete
	class := classify(err, write)
	// On GCS a write answered 404 has no object to miss: its bucket is (GCS says no more;
	// S3 names the bucket's absence, NoSuchBucket, and has 404s of its own for writes,
	// NoSuchUpload).
	gcsWrite404 := class == ErrNotFound && (op == OpPut || op == OpPutIfAbsent) && strings.HasPrefix(s.url, "gs://")
	if noBucket(err) || gcsWrite404 {
		// Not "object not found" with the SDK's request ids: the store itself is missing.
		bucket := "?"
		if u, perr := url.Parse(s.url); perr == nil {
			bucket = u.Host
		}
		return &Error{Op: op, Store: s.url, Key: key, Class: ErrPermanent,
			Err: fmt.Errorf("%w: %q (create it, or correct the store URL)", ErrNoBucket, bucket)}
	}
	return &Error{Op: op, Store: s.url, Key: key, Class: class, Err: s.redact.wrap(err)}
}

func (s *bucketStore) checkKey(op Op, key string) error {
	if err := validKey(key); err != nil {
		return s.namer(op, key).fail(ErrPermanent, err)
	}
	return nil
}

func (s *bucketStore) Get(ctx context.Context, key string) ([]byte, error) {
	if err := s.checkKey(OpGet, key); err != nil {
		return nil, err
	}
	defer watchSlow(s.opts, s.url, OpGet, key)()
	var out []byte
	err := retry(ctx, s.opts, func(ctx context.Context) error {
		s.counters.add(OpGet)
		b, err := s.bucket.ReadAll(ctx, key)
		if err != nil {
			return s.fail(OpGet, key, err)
		}
		s.counters.read(int64(len(b)))
		out = b
		return nil
	})
	return out, err
}

func (s *bucketStore) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := s.checkKey(OpGetRange, key); err != nil {
		return nil, err
	}
	defer watchSlow(s.opts, s.url, OpGetRange, key)()
	if offset < 0 {
		return nil, s.namer(OpGetRange, key).fail(ErrPermanent, fmt.Errorf("negative offset %d", offset))
	}
	var out []byte
	err := retry(ctx, s.opts, func(ctx context.Context) error {
		s.counters.add(OpGetRange)
		r, err := s.bucket.NewRangeReader(ctx, key, offset, length, nil)
		if err != nil {
			if st, ok := httpStatus(err); ok && st == http.StatusRequestedRangeNotSatisfiable {
				// S3 answers 416 for an offset at or past the end of an existing object.
				out = []byte{}
				return nil
			}
			return s.fail(OpGetRange, key, err)
		}
		defer r.Close()
		// The reader knows the object size, so the buffer is never larger than the bytes
		// that exist, whatever length the caller passed.
		n := r.Size() - offset
		if n < 0 {
			n = 0
		}
		if length >= 0 && length < n {
			n = length
		}
		buf := make([]byte, n)
		got, err := io.ReadFull(r, buf)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return s.fail(OpGetRange, key, err)
		}
		s.counters.read(int64(got))
		out = buf[:got]
		return nil
	})
	return out, err
}

func (s *bucketStore) Head(ctx context.Context, key string) (ObjectInfo, error) {
	if err := s.checkKey(OpHead, key); err != nil {
		return ObjectInfo{}, err
	}
	defer watchSlow(s.opts, s.url, OpHead, key)()
	var out ObjectInfo
	err := retry(ctx, s.opts, func(ctx context.Context) error {
		a, err := s.attributes(ctx, key)
		if err != nil {
			return err
		}
		out = ObjectInfo{Key: key, Size: a.Size, ModTime: a.ModTime}
		return nil
	})
	return out, err
}

// attributes is one counted Head attempt.
func (s *bucketStore) attributes(ctx context.Context, key string) (*blob.Attributes, error) {
	s.counters.add(OpHead)
	a, err := s.bucket.Attributes(ctx, key)
	if err != nil {
		return nil, s.fail(OpHead, key, err)
	}
	return a, nil
}

func (s *bucketStore) Put(ctx context.Context, key string, data []byte) error {
	if err := s.checkKey(OpPut, key); err != nil {
		return err
	}
	defer watchSlow(s.opts, s.url, OpPut, key)()
	return retry(ctx, s.opts, func(ctx context.Context) error {
		s.counters.add(OpPut)
		if err := s.bucket.WriteAll(ctx, key, data, nil); err != nil {
			return s.fail(OpPut, key, err)
		}
		s.counters.wrote(int64(len(data)))
		return nil
	})
}

func (s *bucketStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := s.checkKey(OpPutIfAbsent, key); err != nil {
		return err
	}
	defer watchSlow(s.opts, s.url, OpPutIfAbsent, key)()
	rb := readBack{
		head: func(ctx context.Context) (int64, []byte, error) {
			a, err := s.attributes(ctx, key)
			if err != nil {
				return 0, nil, err
			}
			return a.Size, a.MD5, nil
		},
		get: func(ctx context.Context) ([]byte, error) {
			s.counters.add(OpGet)
			b, err := s.bucket.ReadAll(ctx, key)
			if err != nil {
				return nil, s.fail(OpGet, key, err)
			}
			s.counters.read(int64(len(b)))
			return b, nil
		},
	}
	return putIfAbsent(ctx, s.opts, s.namer(OpPutIfAbsent, key), data, rb, func(ctx context.Context) error {
		s.counters.add(OpPutIfAbsent)
		if err := s.bucket.WriteAll(ctx, key, data, &blob.WriterOptions{IfNotExist: true}); err != nil {
			return s.fail(OpPutIfAbsent, key, err)
		}
		s.counters.wrote(int64(len(data)))
		return nil
	})
}

// listPageSize is the page size of an unlimited listing (S3's maximum).
const listPageSize = 1000

func (s *bucketStore) List(ctx context.Context, prefix string, limit int) ([]ObjectInfo, error) {
	var out []ObjectInfo
	token := blob.FirstPageToken
	pageSize := listPageSize
	if limit > 0 && limit < pageSize {
		pageSize = limit
	}
	for {
		var page []*blob.ListObject
		var next []byte
		stop := watchSlow(s.opts, s.url, OpList, prefix)
		err := retry(ctx, s.opts, func(ctx context.Context) error {
			s.counters.add(OpList)
			var err error
			page, next, err = s.bucket.ListPage(ctx, token, pageSize, &blob.ListOptions{Prefix: prefix})
			if err != nil {
				return s.fail(OpList, prefix, err)
			}
			return nil
		})
		stop()
		if err != nil {
			return nil, err
		}
		for _, o := range page {
			if o.IsDir {
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
	if err := s.checkKey(OpDelete, key); err != nil {
		return err
	}
	defer watchSlow(s.opts, s.url, OpDelete, key)()
	return retry(ctx, s.opts, func(ctx context.Context) error {
		s.counters.add(OpDelete)
		if err := s.bucket.Delete(ctx, key); err != nil {
			if e := s.fail(OpDelete, key, err); !errors.Is(e, ErrNotFound) {
				return e
			}
		}
		return nil
	})
}
