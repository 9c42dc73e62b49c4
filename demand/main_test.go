package demand

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shale-db/shale/coord"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdEndpoints is the real embedded etcd shared by this package's tests (each test uses
// its own key prefix); etcdCli is a client of it.
var (
	etcdEndpoints []string
	etcdCli       *clientv3.Client
)

func TestMain(m *testing.M) {
	if role := os.Getenv(envChildRole); role != "" {
		if err := runChild(role); err != nil {
			fmt.Fprintln(os.Stderr, "child", role+":", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "demand-etcd-")
	if err != nil {
		panic(err)
	}
	e, err := coord.StartEmbedded(dir)
	if err != nil {
		panic(err)
	}
	etcdEndpoints = e.Endpoints()
	etcdCli = newClient(0)
	code := m.Run()
	etcdCli.Close()
	e.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

// newClient returns a client of the test etcd; maxRecv > 0 caps the response size it
// accepts (the gRPC message limit).
func newClient(maxRecv int) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: etcdEndpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), MaxCallRecvMsgSize: maxRecv,
	})
	if err != nil {
		panic(err)
	}
	return cli
}

var prefixSeq atomic.Int64

// testPrefix is a key prefix no other test (or -count repetition) uses.
func testPrefix(t *testing.T) string {
	return fmt.Sprintf("/test/%s/%d-%d", t.Name(), os.Getpid(), prefixSeq.Add(1))
}

func newRecords(t *testing.T) *Records { return New(etcdCli, testPrefix(t)) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newSeed returns $SHALE_SEED or a fresh seed, logged so a failure says how to replay it.
func newSeed(t *testing.T) uint64 {
	t.Helper()
	s := rand.Uint64()
	if v := os.Getenv("SHALE_SEED"); v != "" {
		var err error
		if s, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("SHALE_SEED=%q: %v", v, err)
		}
	}
	t.Logf("seed %d (replay with SHALE_SEED=%d)", s, s)
	return s
}

// Source abbreviations of lance-context's test notation: W/X/S = writer/executor/scan.
const (
	W = SourceWriter
	X = SourceExecutor
	S = SourceScan
)

// none is the merged argument of ev for an event without a merged watermark.
const none = -1

// ev is lance-context §3.5's helper: shard, sealed, merged (none: absent), epoch and
// source, with sealed bytes = sealed × 1000 and flushed_at_ms = sealed × 10.
func ev(shard string, sealed uint64, merged int64, epoch uint64, src Source) Event {
	e := Event{
		V: CurrentVersion, Shard: shard, SealedThrough: sealed, SealedBytesThrough: sealed * 1000,
		FlushedAtMs: int64(sealed) * 10, WriterEpoch: epoch, Source: src,
	}
	if merged >= 0 {
		e.MergedThrough = new(uint64(merged))
	}
	return e
}

// flush is a writer event of generation g at time atMs (epoch 1, bytes g × 1000).
func flush(shard string, g uint64, atMs int64) Event {
	e := ev(shard, g, none, 1, W)
	e.FlushedAtMs = atMs
	return e
}

// fold folds events in order (revision and now = position + 1) and fails the test on an
// error.
func fold(t *testing.T, events ...Event) *TableDemand {
	t.Helper()
	td := NewTableDemand("t")
	for i, e := range events {
		if _, err := td.Fold(e, int64(i+1), int64(i+1)); err != nil {
			t.Fatalf("fold %+v: %v", e, err)
		}
	}
	return td
}

// storeJoin applies events through the storage join (Join per shard, every record going
// through its JSON form as etcd would hold it) and returns the stored records by shard.
func storeJoin(t *testing.T, events ...Event) map[string]Event {
	t.Helper()
	return storeJoinWire(t, true, events...)
}

// storeJoinWire is storeJoin, with the JSON round trip only when wire is set.
func storeJoinWire(t *testing.T, wire bool, events ...Event) map[string]Event {
	t.Helper()
	stored := map[string]Event{}
	for _, e := range events {
		var prev *Event
		if s, ok := stored[e.Shard]; ok {
			prev = &s
		}
		next, _, err := Join(prev, e)
		if err != nil {
			t.Fatalf("join %+v: %v", e, err)
		}
		if wire {
			var err error
			if next, err = DecodeEvent(next.Encode()); err != nil {
				t.Fatalf("decode %s: %v", next.Encode(), err)
			}
		}
		stored[e.Shard] = next
	}
	return stored
}

// rebuild folds stored records (in shard order) into a fresh TableDemand, as a planner
// rebuilding from etcd does.
func rebuild(t *testing.T, stored map[string]Event) *TableDemand {
	t.Helper()
	td := NewTableDemand("t")
	for _, sh := range slices.Sorted(maps.Keys(stored)) {
		if _, err := td.Fold(stored[sh], 1, 1); err != nil {
			t.Fatalf("fold stored %+v: %v", stored[sh], err)
		}
	}
	return td
}

// sameShards fails unless a and b hold identical shard states.
func sameShards(t *testing.T, what string, a, b *TableDemand) {
	t.Helper()
	if len(a.Shards) != len(b.Shards) {
		t.Fatalf("%s: %d shards vs %d: %+v vs %+v", what, len(a.Shards), len(b.Shards), a.Shards, b.Shards)
	}
	for sh, sa := range a.Shards {
		sb, ok := b.Shards[sh]
		if !ok || !sa.Equal(sb) {
			t.Fatalf("%s: shard %q differs:\n %+v\n %+v", what, sh, sa, sb)
		}
	}
}

// reversed returns a reversed copy of events.
func reversed(events []Event) []Event {
	out := slices.Clone(events)
	slices.Reverse(out)
	return out
}

// permutations calls f with every permutation of events (Heap's algorithm).
func permutations(events []Event, f func([]Event)) {
	a := slices.Clone(events)
	var gen func(int)
	gen = func(k int) {
		if k <= 1 {
			f(slices.Clone(a))
			return
		}
		gen(k - 1)
		for i := 0; i < k-1; i++ {
			if k%2 == 0 {
				a[i], a[k-1] = a[k-1], a[i]
			} else {
				a[0], a[k-1] = a[k-1], a[0]
			}
			gen(k - 1)
		}
	}
	gen(len(a))
}
