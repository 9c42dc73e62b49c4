package objstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
)

var memMu sync.Mutex

// TempDir is the directory under a local store's root that holds in-flight writes. Keys
// under it are never listed; GC may remove entries older than its grace period.
const TempDir = ".shale-tmp"

// localStore is a directory on local disk. Reads and listings go through gocloud's fileblob
// (no .attrs sidecars); writes are temp file + fsync + rename (Put) or link(2) (PutIfAbsent),
// then an fsync of the directory, so both are durable and PutIfAbsent is exact across
// processes.
type localStore struct {
	bucketStore
	root string
}

func openLocal(u *url.URL, opts Options) (Store, error) {
	root := u.Path
	if u.Host != "" && u.Host != "localhost" {
		root = filepath.Join(u.Host, u.Path) // file://relative/dir is tolerated
	}
	if root == "" {
		return nil, &Error{Op: "open", Store: u.String(), Class: ErrPermanent, Err: errors.New("file:// URL has no path")}
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, &Error{Op: "open", Store: u.String(), Class: ErrPermanent, Err: err}
	}
	if err := os.MkdirAll(filepath.Join(root, TempDir), 0o755); err != nil {
		return nil, &Error{Op: "open", Store: "file://" + root, Class: ErrPermanent, Err: err}
	}
	b, err := fileblob.OpenBucket(root, &fileblob.Options{Metadata: fileblob.MetadataDontWrite})
	if err != nil {
		return nil, &Error{Op: "open", Store: "file://" + root, Class: ErrPermanent, Err: err}
	}
	return &localStore{bucketStore: bucketStore{bucket: b, url: "file://" + root, opts: opts}, root: root}, nil
}

// Root is the absolute directory of a local store.
func (s *localStore) Root() string { return s.root }

func (s *localStore) path(key string) (string, error) {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "\x00") {
		return "", fmt.Errorf("invalid key %q", key)
	}
	for _, part := range strings.Split(key, "/") {
		if part == ".." || part == "." || part == "" {
			return "", fmt.Errorf("invalid key %q", key)
		}
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// writeTemp writes data to a new fsynced temp file under the store's temp directory.
func (s *localStore) writeTemp(data []byte) (string, error) {
	f, err := os.CreateTemp(filepath.Join(s.root, TempDir), "w-*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(name)
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(name)
		return "", err
	}
	if err := f.Close(); err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (s *localStore) localFail(op Op, key string, err error) error {
	class := ErrPermanent
	switch {
	case errors.Is(err, fs.ErrExist):
		class = ErrPreconditionFailed
	case errors.Is(err, fs.ErrNotExist):
		class = ErrNotFound
	}
	return &Error{Op: op, Store: s.url, Key: key, Class: class, Err: err}
}

func (s *localStore) Put(ctx context.Context, key string, data []byte) error {
	s.counters.add(OpPut)
	final, err := s.path(key)
	if err != nil {
		return s.localFail(OpPut, key, err)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return s.localFail(OpPut, key, err)
	}
	tmp, err := s.writeTemp(data)
	if err != nil {
		return s.localFail(OpPut, key, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return s.localFail(OpPut, key, err)
	}
	if err := syncDir(filepath.Dir(final)); err != nil {
		return s.localFail(OpPut, key, err)
	}
	s.counters.wrote(int64(len(data)))
	return nil
}

func (s *localStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	s.counters.add(OpPutIfAbsent)
	final, err := s.path(key)
	if err != nil {
		return s.localFail(OpPutIfAbsent, key, err)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return s.localFail(OpPutIfAbsent, key, err)
	}
	tmp, err := s.writeTemp(data)
	if err != nil {
		return s.localFail(OpPutIfAbsent, key, err)
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, final); err != nil {
		return s.localFail(OpPutIfAbsent, key, err)
	}
	if err := syncDir(filepath.Dir(final)); err != nil {
		return s.localFail(OpPutIfAbsent, key, err)
	}
	s.counters.wrote(int64(len(data)))
	return nil
}

func (s *localStore) List(ctx context.Context, prefix string, limit int) ([]ObjectInfo, error) {
	return listPages(ctx, s.opts, &s.counters, s.url, s.bucket, prefix, limit, func(k string) bool {
		return strings.HasPrefix(k, TempDir+"/")
	})
}

func (s *localStore) Delete(ctx context.Context, key string) error {
	s.counters.add(OpDelete)
	p, err := s.path(key)
	if err != nil {
		return s.localFail(OpDelete, key, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return s.localFail(OpDelete, key, err)
	}
	return nil
}

var _ Store = (*localStore)(nil)
var _ *blob.Bucket = (*blob.Bucket)(nil)
