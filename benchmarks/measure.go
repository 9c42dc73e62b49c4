package benchmarks

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shale-db/shale/store"
)

// Took is the cost of one timed run.
type Took struct {
	Wall time.Duration // elapsed
	CPU  time.Duration // process CPU time (user + system, every thread); 0 = unknown
}

// timeStep runs step and measures it.
func timeStep(step func() error) (Took, error) {
	c0, t0 := processCPU(), time.Now()
	err := step()
	return Took{Wall: time.Since(t0), CPU: processCPU() - c0}, err
}

// Sample is the repeated measurement of one variant: one wall time and one CPU time per
// repetition. On a machine shared with other work, wall times stretch when the variant
// waits for a core; CPU times are the steadier measure of the work itself.
type Sample struct {
	Name  string
	Times []time.Duration // wall
	CPU   []time.Duration
	// Rows and Bytes are the work done by one repetition (rows processed; in-memory Arrow
	// bytes in or out). They are the same in every repetition.
	Rows  int64
	Bytes int64
	// Requests are the store requests of the first repetition (they do not vary).
	Requests store.Requests
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

// MedianCPU is the median CPU time of a repetition.
func (s *Sample) MedianCPU() time.Duration { return median(s.CPU) }

func (s *Sample) add(t Took) {
	s.Times = append(s.Times, t.Wall)
	s.CPU = append(s.CPU, t.CPU)
}

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
// repetition i both ran back to back, so Paired[i] = baseline wall time / engine wall
// time (the engine's throughput as a fraction of the baseline's; > 1 means the engine
// was faster). PairedCPU is the same with CPU times (the engine's CPU efficiency).
type Ratio struct {
	Name      string
	Engine    string // Sample names
	Baseline  string
	Paired    []float64
	PairedCPU []float64
	Target    float64 // 0 = informational; the target applies to the wall-time ratio
}

// Median is the median paired wall-time ratio.
func (r Ratio) Median() float64 { return medianFloat(r.Paired) }

// MedianCPU is the median paired CPU-time ratio (0 when CPU time is unknown).
func (r Ratio) MedianCPU() float64 { return medianFloat(r.PairedCPU) }

// newRatio pairs engine with baseline.
func newRatio(name string, engine, baseline *Sample, target float64) Ratio {
	return Ratio{Name: name, Engine: engine.Name, Baseline: baseline.Name, Target: target,
		Paired: pairedRatios(engine.Times, baseline.Times), PairedCPU: pairedRatios(engine.CPU, baseline.CPU)}
}

// Met reports whether the median ratio reaches the target (true when there is none).
func (r Ratio) Met() bool { return r.Target == 0 || r.Median() >= r.Target }

// pairedRatios returns baseline[i] / engine[i] (nil when any time is zero).
func pairedRatios(engine, baseline []time.Duration) []float64 {
	n := min(len(engine), len(baseline))
	out := make([]float64, n)
	for i := range n {
		if engine[i] <= 0 || baseline[i] <= 0 {
			return nil
		}
		out[i] = float64(baseline[i]) / float64(engine[i])
	}
	return out
}

// variant is one timed thing a suite alternates with others.
type variant struct {
	key string // short name for Go sub-benchmarks
	s   *Sample
	// run runs the variant once and returns the cost of its timed part. rep is unique per
	// call within a variant (it names the tables and prefixes a run writes). A variant
	// records requests and result sizes in s on its first run (len(s.Times) == 0); the
	// caller appends the returned time to s.Times.
	run func(ctx context.Context, rep int) (Took, error)
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
			t, err := v.run(ctx, rep)
			if err != nil {
				return err
			}
			v.s.add(t)
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
