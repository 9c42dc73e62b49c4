package indextest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/verify"
)

// Environment of a child process.
const (
	envChild  = "SHALE_INDEXTEST_CHILD" // "index": one CreateIndex; "recover": one recovery.Recover
	envTable  = "SHALE_INDEXTEST_TABLE"
	envKind   = "SHALE_INDEXTEST_KIND"   // btree | zonemap
	envColumn = "SHALE_INDEXTEST_COLUMN" // comma-separated
	envName   = "SHALE_INDEXTEST_NAME"
)

const resultPrefix = "INDEXTEST-RESULT "

func TestMain(m *testing.M) {
	if mode := os.Getenv(envChild); mode != "" {
		os.Exit(child(mode))
	}
	enginetest.Main(m)
}

// result is what a child reports.
type result struct {
	Outcome string `json:"outcome"` // engine.Outcome
	Version uint64 `json:"version"`
	Stale   bool   `json:"stale"`   // errors.Is(err, engine.ErrStalePreparation)
	Dropped bool   `json:"dropped"` // errors.Is(err, engine.ErrTableDropped)
	Err     string `json:"error,omitempty"`
}

// child builds one index as the CLI would: with recovery sidecars and the roll-forward
// hook. SHALE_FAILPOINTS (read at start-up) decides where it blocks or dies.
func child(mode string) int {
	ctx := context.Background()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "indextest child:", err)
		return 1
	}
	if mode != "index" && mode != "recover" {
		return fail(fmt.Errorf("unknown mode %q", mode))
	}
	s, err := store.Open(ctx, os.Getenv(enginetest.EnvStore), store.Options{})
	if err != nil {
		return fail(err)
	}
	defer s.Close()
	cli, err := coord.Connect(ctx, coord.Config{Endpoints: strings.Split(os.Getenv(enginetest.EnvEtcd), ",")})
	if err != nil {
		return fail(err)
	}
	defer cli.Close()
	db, err := engine.Open(ctx, s, engine.Options{Etcd: cli.Etcd(), BeforeFirstWrite: recovery.Hook(recovery.Options{}),
		IndexSidecars: recovery.IndexSidecars{Store: s}, Write: fragment.WriterOptions{MaxRowsPerBatch: 500}})
	if err != nil {
		return fail(err)
	}
	if mode == "recover" {
		if _, err := recovery.Recover(ctx, s, db.Catalog(), os.Getenv(envTable), recovery.Options{MinAge: -1}); err != nil {
			return fail(err)
		}
		return 0
	}
	tbl, err := db.OpenTable(ctx, os.Getenv(envTable))
	if err != nil {
		return fail(err)
	}
	res, err := tbl.CreateIndex(ctx, engine.IndexSpec{Name: os.Getenv(envName), Kind: os.Getenv(envKind),
		Columns: strings.Split(os.Getenv(envColumn), ",")})
	r := result{Outcome: engine.OutcomeOf(err).String(), Version: res.Version}
	if err != nil {
		r.Err, r.Stale, r.Dropped = err.Error(), errors.Is(err, engine.ErrStalePreparation), errors.Is(err, engine.ErrTableDropped)
	}
	b, _ := json.Marshal(r)
	fmt.Printf("%s%s\n", resultPrefix, b)
	return 0
}

// build describes the index a child builds.
type build struct {
	kind, column, name string
}

var btreeK = build{"btree", "k", "k_idx"}
var zonesIDK = build{"zonemap", "id,k", "id_k_zonemap"}

// proc is a running child.
type proc struct {
	cmd *exec.Cmd
	out *bytes.Buffer
}

// start runs a child building b on table in s, with the failpoint spec fp ("" = none).
func start(t *testing.T, s store.Store, table string, b build, fp string) *proc {
	t.Helper()
	return startMode(t, s, "index", table, b, fp)
}

func startMode(t *testing.T, s store.Store, mode, table string, b build, fp string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+mode, envTable+"="+table, envKind+"="+b.kind, envColumn+"="+b.column, envName+"="+b.name)
	cmd.Env = append(cmd.Env, enginetest.ChildEnv(s)...)
	if fp != "" {
		cmd.Env = append(cmd.Env, failpoint.EnvVar+"="+fp)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, out: &out}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	return p
}

// wait waits for the child and returns its result; killed reports a SIGKILL death (then
// the result is empty).
func (p *proc) wait(t *testing.T) (r result, killed bool) {
	t.Helper()
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return r, true
		}
	}
	if err != nil {
		t.Fatalf("child: %v\n%s", err, p.out)
	}
	sc := bufio.NewScanner(bytes.NewReader(p.out.Bytes()))
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), resultPrefix); ok {
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			return r, false
		}
	}
	t.Fatalf("child printed no result:\n%s", p.out)
	return r, false
}

var kvSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "k", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// kvBatch: ids [from, from+n); k in [kLo, kLo+1000) at random, null one time in 20; s one
// of 30 strings.
func kvBatch(rng *rand.Rand, from, n, kLo int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, kvSchema)
	defer b.Release()
	for i := from; i < from+n; i++ {
		b.Field(0).(*array.Int64Builder).Append(i)
		if rng.IntN(20) == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.Int64Builder).Append(kLo + int64(rng.IntN(1000)))
		}
		b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("s%02d", rng.IntN(30)))
	}
	return b.NewRecordBatch()
}

func kvPredicate(rng *rand.Rand) string {
	switch rng.IntN(7) {
	case 0:
		return fmt.Sprintf("k = %d", rng.IntN(1100))
	case 1:
		lo := rng.IntN(1100)
		return fmt.Sprintf("k BETWEEN %d AND %d", lo, lo+rng.IntN(30))
	case 2:
		return fmt.Sprintf("id < %d AND k > %d", rng.IntN(12000), rng.IntN(1000))
	case 3:
		lo := rng.IntN(12000)
		return fmt.Sprintf("id BETWEEN %d AND %d", lo, lo+rng.IntN(2000))
	case 4:
		return fmt.Sprintf("k IN (%d, %d, %d) OR s = 's%02d'", rng.IntN(1000), rng.IntN(1000), rng.IntN(1000), rng.IntN(30))
	case 5:
		return "k IS NULL OR k >= 1000"
	}
	return fmt.Sprintf("s >= 's%02d' AND id >= %d", rng.IntN(30), rng.IntN(12000))
}

// seeded returns a random stream for the test, logging its seed.
func seeded(t *testing.T) *rand.Rand {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 10))
}

// fixture is one test's local store (shared with child processes), DB and table "t":
// 4 fragments of 2,500 rows (ids 0..9999, k in [0, 1000)).
type fixture struct {
	t   *testing.T
	s   store.Store
	db  *engine.DB
	rng *rand.Rand
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, "file://"+t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := &fixture{t: t, s: s, rng: seeded(t),
		db: enginetest.OpenDB(t, s, engine.Options{Write: fragment.WriterOptions{MaxRowsPerBatch: 500}})}
	tbl, err := f.db.CreateTable(ctx, "t", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(4) {
		f.appendRows(tbl, i*2500, 2500, 0)
	}
	return f
}

func (f *fixture) table() *engine.Table {
	f.t.Helper()
	tbl, err := f.db.OpenTable(context.Background(), "t")
	if err != nil {
		f.t.Fatal(err)
	}
	return tbl
}

func (f *fixture) appendRows(tbl *engine.Table, from, n, kLo int64) {
	f.t.Helper()
	rec := kvBatch(f.rng, from, n, kLo)
	defer rec.Release()
	if _, err := tbl.AppendRecord(context.Background(), rec); err != nil {
		f.t.Fatal(err)
	}
}

// answer returns the rows of tbl matching where, sorted; indexes: with every usable
// index forced, else without indexes.
func answer(t *testing.T, tbl *engine.Table, where string, indexes bool) []string {
	t.Helper()
	sc, err := tbl.Scan(context.Background(), engine.ScanOptions{Filter: where, ForceIndexes: indexes, NoIndex: !indexes})
	if err != nil {
		t.Fatalf("scan %q: %v", where, err)
	}
	defer sc.Release()
	var out []string
	for sc.Next() {
		rec := sc.RecordBatch()
		for i := range int(rec.NumRows()) {
			out = append(out, rec.Column(0).ValueStr(i)+"|"+rec.Column(1).ValueStr(i)+"|"+rec.Column(2).ValueStr(i))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scan %q: %v", where, err)
	}
	slices.Sort(out)
	return out
}

// answers maps each predicate to tbl's rows matching it, checking that they are the same
// with every usable index forced and without indexes.
func answers(t *testing.T, what string, tbl *engine.Table, preds []string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, p := range preds {
		with, without := answer(t, tbl, p, true), answer(t, tbl, p, false)
		if !slices.Equal(with, without) {
			t.Fatalf("%s, %q: %d rows with indexes, %d without", what, p, len(with), len(without))
		}
		out[p] = with
	}
	return out
}

func (f *fixture) predicates(n int) []string {
	var out []string
	for range n {
		out = append(out, kvPredicate(f.rng))
	}
	return out
}

// waitIndexObjects waits until the child has stored its index's last object (a BTree's
// lookup, or a zone map): it is then at, or past, engine.index_commit.
func (f *fixture) waitIndexObjects(p *proc) {
	f.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		objs, err := f.s.List(context.Background(), manifest.IndicesDir("t")+"/", 0)
		if err != nil {
			f.t.Fatal(err)
		}
		if slices.ContainsFunc(objs, func(o store.ObjectInfo) bool {
			return strings.HasSuffix(o.Key, "/lookup.btree") || strings.HasSuffix(o.Key, "/zones.zonemap")
		}) {
			return
		}
		if p.cmd.ProcessState != nil {
			f.t.Fatalf("child ended early:\n%s", p.out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.t.Fatalf("the child stored no index object within 60 s:\n%s", p.out)
}

// checkSound: verify finds no fault in any version, no sidecar is left, and every object
// under the table's _indices/ is named by some version, except under the allowed
// prefixes.
func (f *fixture) checkSound(allowed ...string) {
	f.t.Helper()
	ctx := context.Background()
	rep, err := verify.Table(ctx, f.s, f.db.Catalog(), "t", verify.Options{AllVersions: true})
	if err != nil {
		f.t.Fatal(err)
	}
	if !rep.OK() {
		var b strings.Builder
		for _, x := range rep.Faults {
			b.WriteString("  " + x.String() + "\n")
		}
		f.t.Fatalf("verify: %v\n%s", rep.Err(), b.String())
	}
	if left, err := recovery.Pending(ctx, f.s, ""); err != nil || len(left) != 0 {
		f.t.Fatalf("sidecars left: %v %v", left, err)
	}
	if un := f.unreferencedIndexObjects(); len(slices.DeleteFunc(un, func(k string) bool {
		return slices.ContainsFunc(allowed, func(p string) bool { return strings.HasPrefix(k, p) })
	})) != 0 {
		f.t.Fatalf("index objects no version names: %v", un)
	}
}

// unreferencedIndexObjects lists the objects under t/_indices/ no version names.
func (f *fixture) unreferencedIndexObjects() []string {
	f.t.Helper()
	ctx := context.Background()
	vs, err := manifest.Versions(ctx, f.s, "t")
	if err != nil {
		f.t.Fatal(err)
	}
	refs := map[string]bool{}
	for _, v := range vs {
		m, err := manifest.Load(ctx, f.s, "t", v)
		if errors.Is(err, manifest.ErrVersionExpired) {
			continue
		}
		if err != nil {
			f.t.Fatal(err)
		}
		for _, ix := range m.Indexes {
			for _, k := range ix.Files {
				refs[k] = true
			}
		}
	}
	objs, err := f.s.List(ctx, manifest.IndicesDir("t")+"/", 0)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		if !refs[o.Key] {
			out = append(out, o.Key)
		}
	}
	return out
}

// coverage maps each index of tbl to the fragments its segments cover, sorted.
func coverage(tbl *engine.Table) map[string][]uint32 {
	out := map[string][]uint32{}
	for _, ix := range tbl.Manifest().Indexes {
		out[ix.Name] = append(out[ix.Name], ix.Fragments...)
	}
	for _, c := range out {
		slices.Sort(c)
	}
	return out
}

func fragmentIDs(tbl *engine.Table) []uint32 {
	var out []uint32
	for _, f := range tbl.Manifest().Fragments {
		out = append(out, f.ID)
	}
	slices.Sort(out)
	return out
}
