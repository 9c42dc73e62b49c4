package benchmarks

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shale-db/shale/internal/objstore"
)

// Sample is the repeated measurement of one variant: one duration per repetition.
type Sample struct {
	Name  string
	Times []time.Duration
	// Rows and Bytes are the work done by one repetition (rows processed; in-memory Arrow
	// bytes in or out). They are the same in every repetition.
	Rows  int64
	Bytes int64
	// Requests are the store requests of the first repetition (they do not vary).
	Requests objstore.Requests
	// Etcd are the etcd KV requests of the first repetition, by kind (a Txn counts once).
	Etcd map[string]int64
}

// Median is the median repetition time (the mean of the middle two for an even count).
func (s *Sample) Median() time.Duration { return median(s.Times) }

// Min and Max are the fastest and slowest repetition.
func (s *Sample) Min() time.Duration { return slices.Min(s.Times) }
func (s *Sample) Max() time.Duration { return slices.Max(s.Times) }

// RowsPerSec is Rows over the median time.
func (s *Sample) RowsPerSec() float64 { return perSec(float64(s.Rows), s.Median()) }

// MBPerSec is Bytes (in 10^6 bytes) over the median time.
func (s *Sample) MBPerSec() float64 { return perSec(float64(s.Bytes)/1e6, s.Median()) }

func (s *Sample) add(d time.Duration) { s.Times = append(s.Times, d) }

func perSec(x float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return x / d.Seconds()
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func medianFloat(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Ratio compares an engine variant with its baseline over paired repetitions: in
// repetition i both ran back to back, so Paired[i] = baseline time / engine time (the
// engine's throughput as a fraction of the baseline's; > 1 means the engine was faster).
type Ratio struct {
	Name     string
	Engine   string // Sample names
	Baseline string
	Paired   []float64
	Target   float64 // 0 = informational
}

// Median is the median paired ratio.
func (r Ratio) Median() float64 { return medianFloat(r.Paired) }

// Met reports whether the median ratio reaches the target (true when there is none).
func (r Ratio) Met() bool { return r.Target == 0 || r.Median() >= r.Target }

func pairedRatios(engine, baseline *Sample) []float64 {
	n := min(len(engine.Times), len(baseline.Times))
	out := make([]float64, n)
	for i := range n {
		out[i] = float64(baseline.Times[i]) / float64(engine.Times[i])
	}
	return out
}

// variant is one timed thing a suite alternates with others.
type variant struct {
	key string // short name for Go sub-benchmarks
	s   *Sample
	// run runs the variant once and returns the time of its timed part. rep is unique per
	// call within a variant (it names the tables and prefixes a run writes). A variant
	// records requests and result sizes in s on its first run (len(s.Times) == 0); the
	// caller appends the returned time to s.Times.
	run func(ctx context.Context, rep int) (time.Duration, error)
}

// alternate runs every variant once per repetition, rotating the order each repetition so
// no variant always runs first (warm caches, GC debt) or last; Times[i] of every variant
// is then from repetition i, so times pair across variants. A GC runs before each timed
// run so one variant's garbage is not collected on another's clock.
func alternate(ctx context.Context, reps int, vs []variant) error {
	for rep := range reps {
		for k := range vs {
			v := vs[(rep+k)%len(vs)]
			runtime.GC()
			d, err := v.run(ctx, rep)
			if err != nil {
				return err
			}
			v.s.add(d)
		}
	}
	return nil
}

// countingKV counts etcd KV requests by kind. A Txn counts once whatever it holds.
type countingKV struct {
	clientv3.KV
	mu     sync.Mutex
	counts map[string]int64
}

func newCountingClient(ctx context.Context, cli *clientv3.Client) (*clientv3.Client, *countingKV) {
	kv := &countingKV{KV: cli.KV, counts: map[string]int64{}}
	c := clientv3.NewCtxClient(ctx)
	c.Cluster, c.KV, c.Lease, c.Watcher, c.Auth, c.Maintenance = cli.Cluster, kv, cli.Lease, cli.Watcher, cli.Auth, cli.Maintenance
	return c, kv
}

func (k *countingKV) inc(op string) {
	k.mu.Lock()
	k.counts[op]++
	k.mu.Unlock()
}

func (k *countingKV) Snapshot() map[string]int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[string]int64, len(k.counts))
	for op, n := range k.counts {
		out[op] = n
	}
	return out
}

func subCounts(now, before map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for op, n := range now {
		if d := n - before[op]; d != 0 {
			out[op] = d
		}
	}
	return out
}

func (k *countingKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	k.inc("put")
	return k.KV.Put(ctx, key, val, opts...)
}

func (k *countingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	k.inc("get")
	return k.KV.Get(ctx, key, opts...)
}

func (k *countingKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	k.inc("delete")
	return k.KV.Delete(ctx, key, opts...)
}

func (k *countingKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	k.inc("do")
	return k.KV.Do(ctx, op)
}

func (k *countingKV) Txn(ctx context.Context) clientv3.Txn {
	k.inc("txn")
	return k.KV.Txn(ctx)
}
