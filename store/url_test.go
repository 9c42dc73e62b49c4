package store_test

import (
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/store"
)

// A bare path is not a store URL; the error says which URL was probably meant.
func TestOpenBarePathSuggestsFileURL(t *testing.T) {
	ctx := testCtx(t)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"/data/x":               "did you mean file:///data/x?",
		"data/x":                "did you mean file://" + filepath.Join(wd, "data/x") + "?",
		"file:data/x":           "did you mean file://" + filepath.Join(wd, "data/x") + "?",
		"file://relative/dir":   "did you mean file://" + filepath.Join(wd, "relative/dir") + " (relative to the current directory) or file:///relative/dir?",
		"http://127.0.0.1:9000": "use s3://BUCKET?endpoint=http://127.0.0.1:9000&use_path_style=true",
		"ftp://host/x":          `unsupported store scheme "ftp"`,
		"s3:///prefix":          "s3 URL names no bucket",
		"":                      "empty store URL",
	}
	for raw, want := range cases {
		for _, ro := range []bool{false, true} {
			_, err := store.Open(ctx, raw, store.Options{ReadOnly: ro})
			if !errors.Is(err, store.ErrInvalidURL) || !strings.Contains(err.Error(), want) {
				t.Errorf("Open(%q, ReadOnly %v) = %v; want ErrInvalidURL saying %q", raw, ro, err, want)
			}
			if _, perr := store.ParseURL(raw); !errors.Is(perr, store.ErrInvalidURL) {
				t.Errorf("ParseURL(%q) = %v; want ErrInvalidURL", raw, perr)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(wd, "relative")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file://relative/dir created something in %s: %v", wd, err)
	}
	for _, ok := range []string{"file:///tmp/x", "file://localhost/tmp/x", "mem://a", "s3://b/p?region=r", "gs://b/p"} {
		if _, err := store.ParseURL(ok); err != nil {
			t.Errorf("ParseURL(%q) = %v", ok, err)
		}
	}
}

// A read-only open creates nothing: a missing directory is reported (ErrNotFound) and
// left missing, and an existing one gets no temp directory until something is written.
func TestReadOnlyOpenCreatesNothing(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "nosuch", "store")
	_, err := store.Open(ctx, "file://"+dir, store.Options{ReadOnly: true})
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("read-only open of a missing directory: %v; want ErrNotFound", err)
	}
	if _, err := os.Stat(filepath.Dir(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read-only open created %s: %v", filepath.Dir(dir), err)
	}

	empty := t.TempDir()
	s, err := store.Open(ctx, "file://"+empty, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if objs, err := s.List(ctx, "", 0); err != nil || len(objs) != 0 {
		t.Fatalf("list: %v, %v", objs, err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get: %v", err)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Fatalf("read-only open and reads created %v", ents)
	}
	// Writing through a read-only handle still works (ReadOnly only skips the probe).
	if err := s.PutIfAbsent(ctx, "k/v", []byte("x")); err != nil {
		t.Fatalf("put through a read-only handle: %v", err)
	}
	if b, err := s.Get(ctx, "k/v"); err != nil || string(b) != "x" {
		t.Fatalf("get after put: %q, %v", b, err)
	}
}

const planted = "PLANTEDs3cr3t"

// Credentials never appear in an error or a store's URL, whatever fails: a bad URL, an
// unknown parameter gocloud quotes the URL for, an unreachable endpoint (with and
// without credentials nested in it), a request error. (Every S3 URL here has credentials
// or anonymous=true, so the SDK never asks the EC2 metadata service for any.)
func TestStoreErrorsNeverContainCredentials(t *testing.T) {
	ctx := testCtx(t)
	srv := storetest.NewS3Server(t, storetest.S3Options{})
	q := url.Values{}
	q.Set("endpoint", srv.URL)
	q.Set("use_path_style", "true")
	q.Set("region", "us-east-1")
	good := "s3://AKIDEXAMPLE:" + planted + "@" + storetest.S3Bucket + "/pre?" + q.Encode()

	dead := "http://127.0.0.1:1"
	failing := []string{
		"s3://AKIDEXAMPLE:" + planted + "@bkt?region=us-east-1&use_path_style=true&endpoint=" + url.QueryEscape(dead),
		"s3://bkt?anonymous=true&region=us-east-1&use_path_style=true&endpoint=" + url.QueryEscape("http://u:"+planted+"@127.0.0.1:1"),
		good + "&secret_access_key=" + planted,
		good + "&session_token=" + planted,
		"s3://AKIDEXAMPLE:" + planted + "@bkt/%zz",
		"gs://user:" + planted + "@bkt/p",
		"s3://user:" + planted + "@/p",
		"ftp://user:" + planted + "@host/p",
		"file://user:" + planted + "@host/p",
		good + "&anonymous=true",
	}
	for _, raw := range failing {
		_, err := store.Open(ctx, raw, storetest.FastOptions)
		if err == nil {
			t.Errorf("Open(%q) succeeded", raw)
			continue
		}
		if strings.Contains(err.Error(), planted) {
			t.Errorf("Open error leaks the secret: %v", err)
		}
		var e *store.Error
		if !errors.As(err, &e) || strings.Contains(e.Store, planted) {
			t.Errorf("Open(%q): %v (%T) is not a *store.Error with a redacted store", raw, err, err)
		}
	}

	s, err := store.Open(ctx, good, storetest.FastOptions)
	if err != nil {
		t.Fatalf("open with credentials in the URL: %v", err)
	}
	defer s.Close()
	if strings.Contains(s.URL(), planted) || !strings.Contains(s.URL(), store.Redacted+"@") {
		t.Fatalf("URL() = %s", s.URL())
	}
	if _, err := s.Get(ctx, "missing"); err == nil || strings.Contains(err.Error(), planted) {
		t.Fatalf("get of a missing key: %v", err)
	}
	srv.Faults.Add(storetest.Fault{Status: http.StatusForbidden, Times: 1})
	if _, err := s.Get(ctx, "x"); err == nil || strings.Contains(err.Error(), planted) {
		t.Fatalf("forbidden get: %v", err)
	}
}

// s3://ACCESS_KEY_ID:SECRET_ACCESS_KEY@bucket signs requests with those credentials.
func TestS3CredentialsInURLSignRequests(t *testing.T) {
	ctx := testCtx(t)
	srv := storetest.NewS3Server(t, storetest.S3Options{})
	var mu sync.Mutex
	var auth []string
	srv.Faults.Add(storetest.Fault{Match: func(r *http.Request) bool {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		return false
	}})
	q := url.Values{}
	q.Set("endpoint", srv.URL)
	q.Set("use_path_style", "true")
	q.Set("region", "us-east-1")
	s, err := store.Open(ctx, "s3://AKIDFROMURL:"+planted+"@"+storetest.S3Bucket+"?"+q.Encode(), storetest.FastOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Put(ctx, "a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(auth) == 0 {
		t.Fatal("no request reached the server")
	}
	for _, a := range auth {
		if !strings.Contains(a, "Credential=AKIDFROMURL/") {
			t.Fatalf("request signed as %q, want the access key from the URL", a)
		}
	}
}

func TestRedactForms(t *testing.T) {
	cases := map[string]string{
		"s3://AK:" + planted + "@bkt/p?region=r":                           "s3://" + store.Redacted + "@bkt/p?region=r",
		"s3://bkt?endpoint=" + url.QueryEscape("http://u:"+planted+"@h:1"): "s3://bkt?endpoint=http://" + store.Redacted + "@h:1",
		// The query stays as readable as it was typed: ':', '/' and '@' unescaped.
		"s3://bkt/p?endpoint=http://127.0.0.1:9000&use_path_style=true&region=us-east-1": "s3://bkt/p?endpoint=http://127.0.0.1:9000&region=us-east-1&use_path_style=true",
		"s3://bkt?endpoint=http://h:1/a%20b&region=r%26s":                                "s3://bkt?endpoint=http://h:1/a+b&region=r%26s",
		"s3://bkt?kmskeyid=" + planted + "&region=r":                                     "s3://bkt?kmskeyid=" + store.Redacted + "&region=r",
		"file:///tmp/x": "file:///tmp/x",
	}
	for in, want := range cases {
		if got := store.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMustExistOpenOfAMissingDirectoryCreatesNothing: a writable open with MustExist of a
// file:// directory that does not exist fails with ErrNotFound and creates nothing; of
// one that exists it opens for writing (the probe runs, writes work).
func TestMustExistOpenOfAMissingDirectoryCreatesNothing(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "typo", "store")
	_, err := store.Open(ctx, "file://"+dir, store.Options{MustExist: true})
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "nothing was created") {
		t.Fatalf("MustExist open of a missing directory: %v; want ErrNotFound", err)
	}
	if _, err := os.Stat(filepath.Dir(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("MustExist open created %s: %v", filepath.Dir(dir), err)
	}
	existing := t.TempDir()
	s, err := store.Open(ctx, "file://"+existing, store.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutIfAbsent(ctx, "k", []byte("x")); err != nil {
		t.Fatal(err)
	}
}

// TestUnknownQueryParameterIsAnInvalidURL: an s3:// or gs:// query parameter the opener
// does not know, or a value it cannot parse, is ErrInvalidURL (a malformed URL, which the
// CLI reports as a usage error), naming the parameter; not ErrPermanent.
func TestUnknownQueryParameterIsAnInvalidURL(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:1") // gs:// opens without looking for credentials
	for raw, want := range map[string]string{
		"s3://b?region=us-east-1&bogus=1":             `unknown query parameter "bogus"`,
		"s3://b?region=us-east-1&use_path_style=nope": `invalid value for "use_path_style"`,
		"gs://b?bogus=1":                              `invalid query parameter "bogus"`,
	} {
		_, err := store.Open(testCtx(t), raw, store.Options{ReadOnly: true})
		if !errors.Is(err, store.ErrInvalidURL) || errors.Is(err, store.ErrPermanent) || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q): %v; want ErrInvalidURL naming %s", raw, err, want)
		}
	}
}
