package engine

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/store"
)

// testEtcd is one embedded etcd shared by the package's tests (real etcd, not a mock).
var testEtcd *coord.Embedded

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	dir, err := os.MkdirTemp("", "shale-engine-etcd-")
	if err != nil {
		panic(err)
	}
	testEtcd, err = coord.StartEmbedded(dir)
	if err != nil {
		panic(err)
	}
	code := m.Run()
	testEtcd.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

var storeSeq atomic.Int64

// openDB opens a DB on a fresh store with the shared etcd as catalog.
func openDB(t testing.TB, storeURL string) *DB {
	t.Helper()
	ctx := context.Background()
	if storeURL == "" {
		storeURL = fmt.Sprintf("mem://engine-test-%d", storeSeq.Add(1))
	}
	s, err := store.Open(ctx, storeURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return openDBOn(t, s)
}

// openDBOn opens a DB on store s with the shared etcd as catalog.
func openDBOn(t testing.TB, s store.Store) *DB {
	t.Helper()
	return openDBWith(t, s, Options{})
}

// openDBWith is openDBOn with options (opts.Etcd is set here).
func openDBWith(t testing.TB, s store.Store, opts Options) *DB {
	t.Helper()
	ctx := context.Background()
	cli, err := coord.Connect(ctx, coord.Config{Endpoints: testEtcd.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	opts.Etcd = cli.Etcd()
	db, err := Open(ctx, s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return db
}
