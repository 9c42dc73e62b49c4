// Package enginetest is the test harness shared by packages built on the engine
// (compaction, recovery, verify): one real embedded etcd per test binary and DBs that use
// it as their catalog. The engine's own tests cannot import it (import cycle) and keep
// their copy in engine/main_test.go.
package enginetest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/store"
)

var etcd *coord.Embedded

// Main starts an embedded etcd in a temporary directory, runs m's tests, stops etcd,
// removes the directory and exits with the tests' status. Call it from TestMain.
func Main(m *testing.M) {
	dir, err := os.MkdirTemp("", "shale-test-etcd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "enginetest:", err)
		os.Exit(1)
	}
	etcd, err = coord.StartEmbedded(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "enginetest: start etcd:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	etcd.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Etcd is the embedded etcd Main started (nil outside Main).
func Etcd() *coord.Embedded { return etcd }

// OpenDB opens a DB on s with the shared etcd as its catalog; the etcd client is closed
// when the test ends.
func OpenDB(t testing.TB, s store.Store, opts engine.Options) *engine.DB {
	t.Helper()
	ctx := context.Background()
	cli, err := coord.Connect(ctx, coord.Config{Endpoints: etcd.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	opts.Etcd = cli.Etcd()
	db, err := engine.Open(ctx, s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return db
}
