package chaostest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/faults"
	"github.com/shale-db/shale/store"
)

// envChild holds a child's configuration (JSON, childConfig); a process with it set runs
// as that child instead of running tests.
const envChild = "SHALE_CHAOSTEST_CHILD"

// The two tables: mainTable takes appends, deletes and updates; owTable takes appends
// and overwrites. Both are compacted and garbage-collected.
const (
	mainTable = "main"
	owTable   = "ow"
)

// Roles of child processes.
const (
	roleWorker    = "worker"
	roleCompactor = "compactor"
	roleRecoverer = "recoverer"
	roleGC        = "gc"
)

func TestMain(m *testing.M) {
	if cfg := os.Getenv(envChild); cfg != "" {
		os.Exit(child(cfg))
	}
	enginetest.Main(m)
}

// childConfig is what a child process is told (as JSON in envChild).
type childConfig struct {
	Role string `json:"role"`
	Name string `json:"name"` // w0, c0, r0, g0: names its journal
	// Index numbers workers from 0 (their rows' ids are built from it).
	Index int    `json:"index"`
	Inc   int    `json:"inc"` // incarnation, from 1
	Dir   string `json:"dir"` // journals and the stop file
	Seed  int64  `json:"seed"`
	// Worker only.
	Ops       int           `json:"ops,omitempty"`        // op budget across incarnations
	Lossy     bool          `json:"lossy,omitempty"`      // the store and etcd lose some requests and replies
	HoldAfter time.Duration `json:"hold_after,omitempty"` // engine.Options.WriteHoldAfter
	Hook      bool          `json:"hook,omitempty"`       // recovery.Hook before the first write
	Pace      time.Duration `json:"pace,omitempty"`       // mean pause between operations
	// Forget: the incarnation neither runs again an operation an earlier one was killed
	// in nor runs again under the same key one whose outcome stays unknown; such
	// operations stay undecided in the journal (the checks decide them by the store).
	Forget bool `json:"forget,omitempty"`
}

// stopFile is created by the controller when the run ends; children finish the operation
// they are in and exit.
func stopFile(dir string) string { return filepath.Join(dir, "stop") }

func stopped(dir string) bool {
	_, err := os.Stat(stopFile(dir))
	return err == nil
}

// child runs a child process's role and returns its exit status: 0 when it stopped as
// told (or a worker spent its budget), 1 on a setup failure or an invariant it saw broken.
func child(raw string) int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "chaostest child: bad config:", err)
		return 1
	}
	var err error
	switch cfg.Role {
	case roleWorker:
		err = runWorker(cfg)
	case roleCompactor:
		err = runCompactor(cfg)
	case roleRecoverer:
		err = runRecoverer(cfg)
	case roleGC:
		err = runGC(cfg)
	default:
		err = fmt.Errorf("unknown role %q", cfg.Role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaostest child %s.%d: %v\n", cfg.Name, cfg.Inc, err)
		return 1
	}
	return 0
}

// openChild opens the parent's store and etcd (enginetest.ChildEnv) as a DB with opts. A
// lossy child's store loses some version puts' replies and some version reads, and its
// etcd loses some replies to writes of the published pointers (seeded by seed).
//
// Opening the store probes put-if-absent through the local store's temp directory, which
// a GC with no grace empties of other processes' temp files (only rude: their writes
// fail, nothing is lost), so a failed open is tried again.
func openChild(ctx context.Context, opts engine.Options, lossy bool, seed int64) (*engine.DB, func(), error) {
	var (
		s   store.Store
		err error
	)
	for try := 0; ; try++ {
		if s, err = store.Open(ctx, os.Getenv(enginetest.EnvStore), store.Options{}); err == nil {
			break
		}
		if try == 10 {
			return nil, nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Under load (the slow size on two cores, beside other test packages) the first
	// request to etcd can miss its 5 s deadline: try a few times before failing the run.
	var cli *coord.Client
	for try := 0; ; try++ {
		if cli, err = coord.Connect(ctx, coord.Config{Endpoints: strings.Split(os.Getenv(enginetest.EnvEtcd), ",")}); err == nil {
			break
		}
		if try == 3 {
			s.Close()
			return nil, nil, err
		}
		time.Sleep(time.Second)
	}
	var st store.Store = s
	if lossy {
		fs := faults.NewStore(s, uint64(seed))
		versions := "*/_versions/*"
		fs.Add(faults.Rule{Name: "version-put-reply-lost", Ops: []store.Op{store.OpPutIfAbsent}, Key: versions, Kind: faults.DropResponse, Probability: 0.08})
		fs.Add(faults.Rule{Name: "version-put-timeout", Ops: []store.Op{store.OpPutIfAbsent}, Key: versions, Kind: faults.DropRequest, Class: store.ErrOutcomeUnknown, Probability: 0.04})
		fs.Add(faults.Rule{Name: "version-get-fails", Ops: []store.Op{store.OpGet}, Key: versions, Kind: faults.DropRequest, Probability: 0.05})
		st = fs
		kv := faults.WrapKV(cli.Etcd(), uint64(seed)+1)
		kv.Add(faults.EtcdRule{Name: "pointer-reply-lost", Ops: []faults.EtcdOp{faults.EtcdTxn}, Key: "*/tables/*", WritesOnly: true, Kind: faults.DropResponse, Probability: 0.1})
	}
	opts.Etcd = cli.Etcd()
	db, err := engine.Open(ctx, st, opts)
	if err != nil {
		cli.Close()
		s.Close()
		return nil, nil, err
	}
	return db, func() { cli.Close(); s.Close() }, nil
}

// schema of both tables: a globally unique id, a counter updates increment, and the
// idempotency key of the write that created the row.
var schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "val", Type: arrow.PrimitiveTypes.Int64},
	{Name: "tag", Type: arrow.BinaryTypes.String},
}, nil)

// batch returns rows with the given ids, val 0 and tag.
func batch(ids []int64, tag string) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.Int64Builder).Append(0)
		b.Field(2).(*array.StringBuilder).Append(tag)
	}
	return b.NewRecordBatch()
}

// rowID is the id of row i of op op of worker w (workers from 0; the controller's
// initial rows are ids below 1e9).
func rowID(w, op, i int) int64 { return int64(w+1)*1_000_000_000 + int64(op)*1000 + int64(i) }
