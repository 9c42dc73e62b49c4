package enginetest

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Rows scans tbl at its version and returns one string per row, in scan order: every
// column's value (arrow ValueStr) joined by "|". Scan errors fail the test.
func Rows(t testing.TB, tbl *engine.Table) []string {
	t.Helper()
	sc, err := tbl.Scan(context.Background(), engine.ScanOptions{})
	if err != nil {
		t.Fatalf("scan %s v%d: %v", tbl.Name(), tbl.Version(), err)
	}
	defer sc.Release()
	var out []string
	var b strings.Builder
	for sc.Next() {
		rec := sc.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			b.Reset()
			for c := 0; c < int(rec.NumCols()); c++ {
				if c > 0 {
					b.WriteByte('|')
				}
				b.WriteString(rec.Column(c).ValueStr(i))
			}
			out = append(out, b.String())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scan %s v%d: %v", tbl.Name(), tbl.Version(), err)
	}
	return out
}

// ExpireHolds revokes the leases of every catalog hold on table in db's catalog, which
// is what etcd does one TTL after a killed holder's last keep-alive: tests use it instead
// of waiting 15 s for a dead child's hold to expire. A hold without a lease fails the
// test.
func ExpireHolds(t testing.TB, db *engine.DB, table string) {
	t.Helper()
	ctx := context.Background()
	cli, err := coord.Connect(ctx, coord.Config{Endpoints: etcd.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	r, err := cli.Etcd().Get(ctx, db.Catalog().HoldKey(table, ""), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range r.Kvs {
		if kv.Lease == 0 {
			t.Fatalf("hold %s has no lease", kv.Key)
		}
		if _, err := cli.Etcd().Revoke(ctx, clientv3.LeaseID(kv.Lease)); err != nil {
			t.Fatal(err)
		}
	}
}

// Environment variables by which a test's child process (the test binary re-executed)
// finds the parent's store and etcd; see ChildEnv and OpenChildDB.
const (
	EnvStore = "SHALE_TEST_STORE_URL"
	EnvEtcd  = "SHALE_TEST_ETCD"
)

// ChildEnv returns the environment entries that let a child process open s with the
// shared etcd as its catalog (OpenChildDB). Call it in the parent, under Main.
func ChildEnv(s store.Store) []string {
	return []string{EnvStore + "=" + s.URL(), EnvEtcd + "=" + strings.Join(etcd.Endpoints(), ",")}
}

// OpenChildDB opens, in a child process, the store and etcd that ChildEnv named, with
// opts (opts.Etcd is set here). The returned close releases the DB's store and client.
// Errors: store and etcd connection errors.
func OpenChildDB(ctx context.Context, opts engine.Options) (*engine.DB, func(), error) {
	s, err := store.Open(ctx, os.Getenv(EnvStore), store.Options{})
	if err != nil {
		return nil, nil, err
	}
	cli, err := coord.Connect(ctx, coord.Config{Endpoints: strings.Split(os.Getenv(EnvEtcd), ",")})
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	opts.Etcd = cli.Etcd()
	db, err := engine.Open(ctx, s, opts)
	if err != nil {
		cli.Close()
		s.Close()
		return nil, nil, err
	}
	return db, func() { cli.Close(); s.Close() }, nil
}

// CommitDataFile stores rec as one data file whose columns carry the field ids ids,
// whatever rec's schema says, and commits it to table as one appended fragment on top of
// HEAD: what a buggy or foreign writer that skipped Append's schema checks would leave.
// The version is committed, not published. It returns the data file's key and the version.
func CommitDataFile(t testing.TB, db *engine.DB, table string, rec arrow.RecordBatch, ids []int32) (string, uint64) {
	t.Helper()
	ctx := context.Background()
	w, err := fragment.NewWriter(ctx, db.Store(), manifest.DataDir(table), rec.Schema(), ids, fragment.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	files, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	head, err := manifest.LoadHead(ctx, db.Store(), table)
	if err != nil {
		t.Fatal(err)
	}
	frag := manifest.Fragment{Files: files, PhysicalRows: files[0].Rows}
	m, _, err := manifest.Commit(ctx, db.Store(), table, head,
		manifest.NewTransaction(head.Version, manifest.Operation{Kind: manifest.OpAppend, NewFragments: []manifest.Fragment{frag}}),
		manifest.CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return files[0].Key, m.Version
}
