package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// TempDir is the directory under a local store's root that holds in-flight writes. Keys
// under it are never listed and cannot be written; GC may remove entries older than its
// grace period.
const TempDir = ".shale-tmp"

// localStore is a directory on local disk, accessed with plain file system calls (no
// gocloud fileblob: its put-if-absent checks then renames, so two processes can both win;
// and its listing order is not byte order across directories).
//
//   - Put: temp file under TempDir, fsync, rename(2) over the key, fsync of the directory.
//   - PutIfAbsent: temp file, fsync, link(2) to the key (EEXIST = the key is taken), fsync
//     of the directory. link(2) never replaces an existing name, so exactly one of any
//     number of processes wins.
//   - Directories created for a key are fsynced into their parents.
//   - A key cannot also be a "directory" of other keys ("a" and "a/b" cannot both exist);
//     writing one over the other fails with ErrPermanent.
//   - Each call is one counted request; file system errors are not retried.
type localStore struct {
	root     string
	url      string
	opts     Options
	counters Counters
}

func openLocal(u *url.URL, opts Options) (Store, error) {
	// ParseURL has refused file URLs that name a host other than localhost.
	root := u.Path
	if root == "" {
		return nil, &Error{Op: OpOpen, Store: u.String(), Class: ErrPermanent, Err: errors.New("file:// URL has no path")}
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, &Error{Op: OpOpen, Store: u.String(), Class: ErrPermanent, Err: err}
	}
	storeURL := (&url.URL{Scheme: "file", Path: root}).String()
	if opts.ReadOnly || opts.MustExist {
		// A read-only open creates nothing, so a mistyped path is reported, not created;
		// MustExist asks the same of a writable open.
		fi, err := os.Stat(root)
		switch {
		case errors.Is(err, fs.ErrNotExist) && opts.ReadOnly:
			return nil, &Error{Op: OpOpen, Store: storeURL, Class: ErrNotFound,
				Err: fmt.Errorf("directory %s does not exist (a read-only open creates nothing)", root)}
		case errors.Is(err, fs.ErrNotExist):
			return nil, &Error{Op: OpOpen, Store: storeURL, Class: ErrNotFound,
				Err: fmt.Errorf("directory %s does not exist (the store must exist: nothing was created)", root)}
		case err != nil:
			return nil, &Error{Op: OpOpen, Store: storeURL, Class: ErrPermanent, Err: err}
		case !fi.IsDir():
			return nil, &Error{Op: OpOpen, Store: storeURL, Class: ErrPermanent, Err: fmt.Errorf("%s is not a directory", root)}
		}
	}
	if !opts.ReadOnly {
		if err := os.MkdirAll(filepath.Join(root, TempDir), 0o755); err != nil {
			return nil, &Error{Op: OpOpen, Store: storeURL, Class: ErrPermanent, Err: err}
		}
	}
	return &localStore{root: root, url: storeURL, opts: opts}, nil
}

func (s *localStore) Counters() *Counters { return &s.counters }
func (s *localStore) URL() string         { return s.url }
func (s *localStore) Close() error        { return nil }

// Root is the absolute directory of a local store.
func (s *localStore) Root() string { return s.root }

func (s *localStore) namer(op Op, key string) errorNamer {
	return errorNamer{op: op, store: s.url, key: key}
}

// start validates the key and the context and counts the request.
func (s *localStore) start(ctx context.Context, op Op, key string) (string, error) {
	if err := validKey(key); err != nil {
		return "", s.namer(op, key).fail(ErrPermanent, err)
	}
	if key == TempDir || strings.HasPrefix(key, TempDir+"/") {
		return "", s.namer(op, key).fail(ErrPermanent, fmt.Errorf("key %q is inside the store's temp directory", key))
	}
	if err := ctx.Err(); err != nil {
		return "", s.namer(op, key).fail(ErrTransient, err)
	}
	s.counters.add(op)
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// readFail classifies a read error: a missing file, a missing parent, or a directory
// where the key's file would be are all "not found".
func (s *localStore) readFail(op Op, key string, err error) error {
	class := ErrPermanent
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) {
		class = ErrNotFound
	}
	return s.namer(op, key).fail(class, err)
}

func (s *localStore) Get(ctx context.Context, key string) ([]byte, error) {
	p, err := s.start(ctx, OpGet, key)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, s.readFail(OpGet, key, err)
	}
	s.counters.read(int64(len(b)))
	return b, nil
}

func (s *localStore) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	p, err := s.start(ctx, OpGetRange, key)
	if err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, s.namer(OpGetRange, key).fail(ErrPermanent, fmt.Errorf("negative offset %d", offset))
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, s.readFail(OpGetRange, key, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, s.readFail(OpGetRange, key, err)
	}
	if fi.IsDir() {
		return nil, s.readFail(OpGetRange, key, syscall.EISDIR)
	}
	n := max(fi.Size()-offset, 0)
	if length >= 0 && length < n {
		n = length
	}
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, s.readFail(OpGetRange, key, err)
	}
	s.counters.read(int64(got))
	return buf[:got], nil
}

// GetRangeInto implements RangeReaderInto: GetRange into dst, without a new buffer.
func (s *localStore) GetRangeInto(ctx context.Context, key string, offset int64, dst []byte) (int, error) {
	p, err := s.start(ctx, OpGetRange, key)
	if err != nil {
		return 0, err
	}
	if offset < 0 {
		return 0, s.namer(OpGetRange, key).fail(ErrPermanent, fmt.Errorf("negative offset %d", offset))
	}
	f, err := os.Open(p)
	if err != nil {
		return 0, s.readFail(OpGetRange, key, err)
	}
	defer f.Close()
	got, err := f.ReadAt(dst, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		if fi, serr := f.Stat(); serr == nil && fi.IsDir() {
			err = syscall.EISDIR
		}
		return 0, s.readFail(OpGetRange, key, err)
	}
	s.counters.read(int64(got))
	return got, nil
}

func (s *localStore) Head(ctx context.Context, key string) (ObjectInfo, error) {
	p, err := s.start(ctx, OpHead, key)
	if err != nil {
		return ObjectInfo{}, err
	}
	fi, err := os.Stat(p)
	if err == nil && !fi.Mode().IsRegular() {
		err = syscall.EISDIR
	}
	if err != nil {
		return ObjectInfo{}, s.readFail(OpHead, key, err)
	}
	return ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// ensureDir creates dir and any missing parents below the root, fsyncing each parent
// after a child is created in it so the new names survive a crash.
func (s *localStore) ensureDir(dir string) error {
	parents, err := s.makeDirs(dir)
	if err != nil {
		return err
	}
	return syncDirs(parents)
}

// makeDirs creates dir and any missing parents below the root and returns the
// directories that gained an entry (each created directory's parent, outermost first):
// the new names are durable once those are fsynced (syncDirs).
func (s *localStore) makeDirs(dir string) ([]string, error) {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return nil, fmt.Errorf("%s is an object, not a directory: %w", dir, syscall.ENOTDIR)
		}
		return nil, nil
	}
	parent := filepath.Dir(dir)
	if parent == dir || !strings.HasPrefix(dir, s.root) {
		return nil, fmt.Errorf("cannot create %s", dir)
	}
	parents, err := s.makeDirs(parent)
	if err != nil {
		return nil, err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return append(parents, parent), nil
}

// syncDirs fsyncs dirs, all at once.
func syncDirs(dirs []string) error {
	switch len(dirs) {
	case 0:
		return nil
	case 1:
		return syncDir(dirs[0])
	}
	errs := make(chan error, len(dirs))
	for _, d := range dirs {
		go func() { errs <- syncDir(d) }()
	}
	var first error
	for range dirs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// writeTemp writes data to a new fsynced temp file under the store's temp directory.
func (s *localStore) writeTemp(data []byte) (string, error) {
	tmpDir := filepath.Join(s.root, TempDir)
	f, err := os.CreateTemp(tmpDir, "w-*")
	if errors.Is(err, fs.ErrNotExist) {
		// A read-only open does not create the temp directory.
		if err = s.ensureDir(tmpDir); err == nil {
			f, err = os.CreateTemp(tmpDir, "w-*")
		}
	}
	if err != nil {
		return "", err
	}
	name := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
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

// prepare makes the key's directory and a durable temp file holding data. The fsyncs
// that make new directories durable run while the temp file is written and fsynced; both
// are done before prepare returns, so the key's directory entry (the rename or link that
// follows) is only ever made in a durable directory, from durable bytes.
func (s *localStore) prepare(final string, data []byte) (string, error) {
	parents, err := s.makeDirs(filepath.Dir(final))
	if err != nil {
		return "", err
	}
	if len(parents) == 0 {
		return s.writeTemp(data)
	}
	synced := make(chan error, 1)
	go func() { synced <- syncDirs(parents) }()
	tmp, err := s.writeTemp(data)
	if serr := <-synced; err == nil && serr != nil {
		os.Remove(tmp)
		err = serr
	}
	if err != nil {
		return "", err
	}
	return tmp, nil
}

func (s *localStore) Put(ctx context.Context, key string, data []byte) error {
	final, err := s.start(ctx, OpPut, key)
	if err != nil {
		return err
	}
	tmp, err := s.prepare(final, data)
	if err != nil {
		return s.namer(OpPut, key).fail(ErrPermanent, err)
	}
	return s.place(key, final, tmp, data)
}

// place renames the durable temp file tmp over the key's file and fsyncs its directory
// (the second half of Put).
func (s *localStore) place(key, final, tmp string, data []byte) error {
	fail := func(err error) error { return s.namer(OpPut, key).fail(ErrPermanent, err) }
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return fail(err)
	}
	if err := syncDir(filepath.Dir(final)); err != nil {
		// The object is in place but its name may not survive a crash.
		return s.namer(OpPut, key).fail(ErrOutcomeUnknown, err)
	}
	s.counters.wrote(int64(len(data)))
	return nil
}

func (s *localStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	final, err := s.start(ctx, OpPutIfAbsent, key)
	if err != nil {
		return err
	}
	tmp, err := s.prepare(final, data)
	if err != nil {
		return s.namer(OpPutIfAbsent, key).fail(ErrPermanent, err)
	}
	return s.link(ctx, key, final, tmp, data)
}

// PutAllThenPutIfAbsent (BatchSequencer): every temp file is written and fsynced at once
// (with the fsyncs of any directory created for a key); then every Put's rename and the
// fsync of its directory run at once; when all are done, between; then the
// put-if-absent's link and the fsync of its directory. Compared with the Puts then
// PutIfAbsent in turn, no fsync waits for another of the same step; what is durable when
// the put-if-absent object becomes visible is the same.
func (s *localStore) PutAllThenPutIfAbsent(ctx context.Context, puts []Object, between func(context.Context) error, key string, data []byte) (error, error) {
	// Validate the put-if-absent's key before anything is written, without counting it yet.
	if err := validKey(key); err != nil {
		return s.namer(OpPutIfAbsent, key).fail(ErrPermanent, err), nil
	}
	if key == TempDir || strings.HasPrefix(key, TempDir+"/") {
		return s.namer(OpPutIfAbsent, key).fail(ErrPermanent, fmt.Errorf("key %q is inside the store's temp directory", key)), nil
	}
	finals := make([]string, len(puts))
	for i, o := range puts {
		final, err := s.start(ctx, OpPut, o.Key)
		if err != nil {
			return err, nil
		}
		finals[i] = final
	}
	finalPIA := filepath.Join(s.root, filepath.FromSlash(key))
	tmps, errs := make([]string, len(puts)), make([]error, len(puts))
	var wg sync.WaitGroup
	for i := range puts {
		wg.Go(func() { tmps[i], errs[i] = s.prepare(finals[i], puts[i].Data) })
	}
	tmpPIA, errPIA := s.prepare(finalPIA, data)
	wg.Wait()
	if errPIA == nil {
		defer os.Remove(tmpPIA)
	}
	for i, err := range errs {
		if err != nil {
			for j, tmp := range tmps {
				if errs[j] == nil {
					os.Remove(tmp)
				}
			}
			return s.namer(OpPut, puts[i].Key).fail(ErrPermanent, err), nil
		}
	}
	for i := range puts {
		wg.Go(func() { errs[i] = s.place(puts[i].Key, finals[i], tmps[i], puts[i].Data) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err, nil
		}
	}
	if between != nil {
		if err := between(ctx); err != nil {
			return nil, err
		}
	}
	if _, err := s.start(ctx, OpPutIfAbsent, key); err != nil {
		return nil, err
	}
	if errPIA != nil {
		return nil, s.namer(OpPutIfAbsent, key).fail(ErrPermanent, errPIA)
	}
	return nil, s.link(ctx, key, finalPIA, tmpPIA, data)
}

// link creates the key's file as a hard link of the durable temp file tmp (EEXIST: the
// key is taken) and fsyncs its directory: the second half of PutIfAbsent. tmp is removed.
func (s *localStore) link(ctx context.Context, key, final, tmp string, data []byte) error {
	n := s.namer(OpPutIfAbsent, key)
	defer os.Remove(tmp)
	rb := readBack{
		head: func(ctx context.Context) (int64, []byte, error) {
			s.counters.add(OpHead)
			fi, err := os.Stat(final)
			if err != nil {
				return 0, nil, s.readFail(OpHead, key, err)
			}
			return fi.Size(), nil, nil
		},
		get: func(ctx context.Context) ([]byte, error) {
			s.counters.add(OpGet)
			b, err := os.ReadFile(final)
			if err != nil {
				return nil, s.readFail(OpGet, key, err)
			}
			s.counters.read(int64(len(b)))
			return b, nil
		},
	}
	first := true
	return putIfAbsent(ctx, s.opts, n, data, rb, func(ctx context.Context) error {
		if !first {
			s.counters.add(OpPutIfAbsent)
		}
		first = false
		err := os.Link(tmp, final)
		if errors.Is(err, fs.ErrExist) {
			if fi, serr := os.Lstat(final); serr == nil && fi.IsDir() {
				return n.fail(ErrPermanent, fmt.Errorf("key is a directory of other keys: %w", err))
			}
			return n.fail(ErrPreconditionFailed, err)
		}
		if err != nil {
			return n.fail(ErrPermanent, err)
		}
		if err := syncDir(filepath.Dir(final)); err != nil {
			return n.fail(ErrOutcomeUnknown, fmt.Errorf("linked, but fsync of the directory failed: %w", err))
		}
		s.counters.wrote(int64(len(data)))
		return nil
	})
}

// List walks only the directory that holds the prefix's last '/' and sorts the keys, so
// the order is byte order whatever the directory layout. One request.
func (s *localStore) List(ctx context.Context, prefix string, limit int) ([]ObjectInfo, error) {
	n := s.namer(OpList, prefix)
	if err := ctx.Err(); err != nil {
		return nil, n.fail(ErrTransient, err)
	}
	s.counters.add(OpList)
	dir := ""
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		dir = prefix[:i]
	}
	base := filepath.Join(s.root, filepath.FromSlash(dir))
	tmp := filepath.Join(s.root, TempDir)
	var out []ObjectInfo
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil // vanished during the walk, or the prefix runs through an object
			}
			return err
		}
		if d.IsDir() {
			if p == tmp {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		out = append(out, ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, n.fail(ErrPermanent, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (s *localStore) Delete(ctx context.Context, key string) error {
	p, err := s.start(ctx, OpDelete, key)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return nil
	case err != nil:
		return s.namer(OpDelete, key).fail(ErrPermanent, err)
	case fi.IsDir():
		return nil // a directory of other keys: no object is stored under this key
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return s.namer(OpDelete, key).fail(ErrPermanent, err)
	}
	return nil
}

var (
	_ Store          = (*localStore)(nil)
	_ BatchSequencer = (*localStore)(nil)
)
