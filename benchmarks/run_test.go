package benchmarks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/store"
)

// tinyConfig runs every suite on a few thousand synthetic rows in many small batches and
// files, with short histories, so the runners are exercised in well under a second each.
func tinyConfig(storeURL string) Config {
	return Config{
		StoreURL:      storeURL,
		EtcdEndpoints: testEtcd.Endpoints(),
		Rows:          3000,
		BatchRows:     256,
		FileRows:      1024,
		Reps:          2,
		OpenReps:      3,
		Versions:      []int{2, 5},
	}
}

var memSeq atomic.Int64

func TestRunTiny(t *testing.T) {
	for _, kind := range []string{"mem", "file"} {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			base := fmt.Sprintf("mem://bench-test-%d", memSeq.Add(1))
			if kind == "file" {
				base = "file://" + t.TempDir()
			}
			var log bytes.Buffer
			rep, err := Run(ctx, tinyConfig(base), &log)
			if err != nil {
				t.Fatalf("Run: %v\nlog:\n%s", err, log.String())
			}
			checkTinyReport(t, rep)
			if !strings.HasPrefix(rep.StoreURL, base+"/shale-bench-") && !strings.HasPrefix(rep.StoreURL, strings.TrimSuffix(base, "/")) {
				t.Errorf("run store %s is not under %s", rep.StoreURL, base)
			}
			// Cleanup removed what the run wrote.
			if kind == "file" {
				if ents, _ := os.ReadDir(strings.TrimPrefix(base, "file://")); len(ents) != 0 {
					t.Errorf("the run left %s in %s", ents[0].Name(), base)
				}
				return
			}
			st, err := store.Open(ctx, rep.StoreURL, store.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			left, err := st.List(ctx, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(left) != 0 {
				t.Errorf("%d objects left after Run, e.g. %s", len(left), left[0].Key)
			}
		})
	}
}

func checkTinyReport(t *testing.T, rep Report) {
	t.Helper()
	cfg := tinyConfig("")
	if rep.Data.Rows != int64(cfg.Rows) || rep.Data.Bytes <= 0 {
		t.Errorf("data %+v, want %d rows and some bytes", rep.Data, cfg.Rows)
	}
	for _, res := range []*SuiteResult{rep.Import, rep.Scan} {
		if res == nil {
			t.Fatal("import or scan suite missing")
		}
		for _, s := range res.Samples {
			if len(s.Times) != cfg.Reps {
				t.Errorf("%s: %d times, want %d", s.Name, len(s.Times), cfg.Reps)
			}
			if s.Median() <= 0 {
				t.Errorf("%s: median %v", s.Name, s.Median())
			}
		}
		for _, q := range res.Ratios {
			if len(q.Paired) != cfg.Reps || q.Median() <= 0 {
				t.Errorf("%s: paired ratios %v", q.Name, q.Paired)
			}
		}
	}
	if n := len(rep.Import.Samples); n != 5 {
		t.Errorf("import has %d samples, want 5", n)
	}
	if w := rep.Import.Sample(ImportWriter); w.Requests.ByOp[store.OpPut] != int64((cfg.Rows+cfg.FileRows-1)/cfg.FileRows) || len(w.Etcd) != 0 {
		t.Errorf("fragment writer made store %s, etcd %v; want one put per data file and no etcd", w.Requests, w.Etcd)
	}
	// The engine import and the encode+put baseline write the same number of data files.
	eng, base := rep.Import.Sample(ImportEngine), rep.Import.Sample(ImportEncodePut)
	files := int64((cfg.Rows + cfg.FileRows - 1) / cfg.FileRows)
	if got := base.Requests.ByOp[store.OpPut]; got != files {
		t.Errorf("baseline made %d puts, want %d data files", got, files)
	}
	if got := eng.Requests.ByOp[store.OpPut] + eng.Requests.ByOp[store.OpPutIfAbsent]; got < files {
		t.Errorf("engine import made %d writes (%s), want at least the %d data files", got, eng.Requests, files)
	}
	if enc := rep.Import.Sample(ImportEncode); enc.Requests.Total() != 0 {
		t.Errorf("encode-only baseline touched the store: %s", enc.Requests)
	}

	// Full scans return every row, and the engine decodes the same Arrow bytes as the raw
	// baseline (the comparison is like for like).
	raw := rep.Scan.Sample(ScanRaw)
	for _, name := range []string{ScanEngine, ScanEngineSerial, ScanRaw, ScanRawSerial} {
		s := rep.Scan.Sample(name)
		if s == nil {
			t.Fatalf("scan sample %q missing", name)
		}
		if s.Rows != int64(cfg.Rows) {
			t.Errorf("%s returned %d rows, want %d", name, s.Rows, cfg.Rows)
		}
		if s.Bytes != raw.Bytes {
			t.Errorf("%s decoded %d bytes, the raw baseline %d", name, s.Bytes, raw.Bytes)
		}
	}
	if got := raw.Requests.ByOp[store.OpGet]; got != files {
		t.Errorf("raw baseline made %d GETs, want one per data file (%d)", got, files)
	}
	var filtered int
	for _, s := range rep.Scan.Samples {
		if strings.HasPrefix(s.Name, ScanFilteredPrefix) {
			filtered++
			if s.Rows <= 0 || s.Rows >= int64(cfg.Rows) {
				t.Errorf("%s returned %d of %d rows; the default filters are selective but match something", s.Name, s.Rows, cfg.Rows)
			}
		}
		if strings.HasPrefix(s.Name, ScanProjectedPrefix) && (s.Rows != int64(cfg.Rows) || s.Bytes >= raw.Bytes) {
			t.Errorf("%s: %d rows, %d bytes (full: %d rows, %d bytes)", s.Name, s.Rows, s.Bytes, cfg.Rows, raw.Bytes)
		}
	}
	if filtered != len(DefaultFilters) {
		t.Errorf("%d filtered scans, want %d", filtered, len(DefaultFilters))
	}

	if len(rep.History) != len(cfg.Versions) {
		t.Fatalf("%d history results, want %d", len(rep.History), len(cfg.Versions))
	}
	for i, h := range rep.History {
		if h.Versions != cfg.Versions[i] || h.ManifestBytes <= 0 {
			t.Errorf("history %d: %+v", i, h)
		}
		if len(h.Open.Times) != cfg.OpenReps || len(h.OpenNoCatalog.Times) != cfg.OpenReps || len(h.Commit.Times) != cfg.Reps {
			t.Errorf("history %d: %d/%d opens, %d commits", h.Versions, len(h.Open.Times), len(h.OpenNoCatalog.Times), len(h.Commit.Times))
		}
		// Opening through the catalog reads the pointer from etcd, never LISTs; without a
		// catalog HEAD is found by LIST.
		if h.Open.Etcd["get"] < 1 || h.Open.Requests.ByOp[store.OpList] != 0 {
			t.Errorf("%d versions: open with catalog made store %s, etcd %v", h.Versions, h.Open.Requests, h.Open.Etcd)
		}
		if h.OpenNoCatalog.Requests.ByOp[store.OpList] < 1 || len(h.OpenNoCatalog.Etcd) != 0 {
			t.Errorf("%d versions: open without catalog made store %s, etcd %v", h.Versions, h.OpenNoCatalog.Requests, h.OpenNoCatalog.Etcd)
		}
		if h.Commit.Requests.ByOp[store.OpPutIfAbsent] < 1 || h.Commit.Etcd["txn"] < 1 {
			t.Errorf("%d versions: commit made store %s, etcd %v; want a put-if-absent and an etcd txn", h.Versions, h.Commit.Requests, h.Commit.Etcd)
		}
	}
	if n := len(rep.Checks); n != 4 {
		t.Errorf("%d checks, want 4 (import, scan, open, commit): %+v", n, rep.Checks)
	}

	md := rep.Markdown()
	for _, want := range []string{"### Targets", "### Import", "### Scan", "### Open", "### Commit", ImportEngine, ScanRaw, "OpenTable, etcd catalog, 5 versions"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestRunWithCallerClientAndSuites(t *testing.T) {
	ctx := context.Background()
	cli, err := coord.Connect(ctx, coord.Config{Endpoints: testEtcd.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	cfg := tinyConfig(fmt.Sprintf("mem://bench-test-%d", memSeq.Add(1)))
	cfg.EtcdEndpoints, cfg.Etcd = nil, cli.Etcd()
	cfg.Suites = []string{SuiteOpen}
	rep, err := Run(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Import != nil || rep.Scan != nil || rep.Data.Rows != 0 {
		t.Errorf("suites not asked for ran: import %v scan %v data %+v", rep.Import != nil, rep.Scan != nil, rep.Data)
	}
	if len(rep.History) != 2 || rep.History[0].Open == nil || rep.History[0].Commit != nil {
		t.Fatalf("history %+v, want opens only", rep.History)
	}
	// The caller's client stays usable, and the run deleted its catalog keys (they live
	// under /shale-bench/<run id>, the id also naming the run's store location).
	_, runID, ok := strings.Cut(rep.StoreURL, "shale-bench-")
	if !ok {
		t.Fatalf("run store %s has no run id", rep.StoreURL)
	}
	resp, err := cli.Etcd().Get(ctx, "/shale-bench/"+runID+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("caller's client after Run: %v", err)
	}
	if len(resp.Kvs) != 0 {
		t.Errorf("%d catalog keys of this run left behind, e.g. %s", len(resp.Kvs), resp.Kvs[0].Key)
	}
}

func TestConfigErrors(t *testing.T) {
	ctx := context.Background()
	for name, cfg := range map[string]Config{
		"unknown suite":   {Suites: []string{"nope"}},
		"short history":   {Versions: []int{1}},
		"file < batch":    {BatchRows: 100, FileRows: 10},
		"bad store URL":   {StoreURL: "not a url", EtcdEndpoints: testEtcd.Endpoints(), Suites: []string{SuiteOpen}},
		"negative rows":   {Data: "x.parquet", Rows: -1},
		"missing parquet": {Data: filepath.Join(t.TempDir(), "none.parquet"), Suites: []string{SuiteImport}},
	} {
		_, err := Run(ctx, cfg, nil)
		if err == nil {
			t.Errorf("%s: Run succeeded", name)
			continue
		}
		if name != "missing parquet" && !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v does not wrap ErrConfig", name, err)
		}
		if name == "missing parquet" && !strings.Contains(err.Error(), "none.parquet") {
			t.Errorf("%s: %v does not name the file", name, err)
		}
	}
}

func TestSubURL(t *testing.T) {
	for _, c := range []struct{ base, url, local string }{
		{"file:///tmp/a", "file:///tmp/a/x", "/tmp/a/x"},
		{"file:///tmp/a/", "file:///tmp/a/x", "/tmp/a/x"},
		{"mem://bench", "mem://bench/x", ""},
		{"s3://bkt/pre?region=us-east-1", "s3://bkt/pre/x?region=us-east-1", ""},
		{"gs://bkt", "gs://bkt/x", ""},
	} {
		u, local, err := subURL(c.base, "x")
		if err != nil || u != c.url || local != c.local {
			t.Errorf("subURL(%q) = %q, %q, %v; want %q, %q", c.base, u, local, err, c.url, c.local)
		}
	}
}

func TestSyntheticAndRechunk(t *testing.T) {
	ds, err := SyntheticFlights(1000, 7, 300)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Release()
	want := []int64{300, 300, 300, 100}
	if len(ds.Records) != len(want) {
		t.Fatalf("%d batches, want %d", len(ds.Records), len(want))
	}
	var sum int64
	for i, r := range ds.Records {
		if r.NumRows() != want[i] {
			t.Errorf("batch %d has %d rows, want %d", i, r.NumRows(), want[i])
		}
		sum += recordBytes(r)
	}
	if ds.Rows != 1000 || ds.Bytes != sum || sum < 1000*(8*3+2*(3+8)) {
		t.Errorf("rows %d bytes %d (sum of batches %d)", ds.Rows, ds.Bytes, sum)
	}
	// The same seed gives the same data.
	again, err := SyntheticFlights(1000, 7, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release()
	if got := again.Records[0].NewSlice(300, 600); !recordsEqual(got, ds.Records[1]) {
		t.Error("SyntheticFlights is not deterministic per seed")
	}
}

func TestLoadParquetCap(t *testing.T) {
	path := flightsPath()
	if path == "" {
		t.Skip("flights-3m.parquet not found")
	}
	ds, err := LoadParquet(context.Background(), path, 5000, 2048)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Release()
	if ds.Rows != 5000 || len(ds.Records) != 3 || ds.Records[2].NumRows() != 5000-2*2048 {
		t.Errorf("%d rows in %d batches", ds.Rows, len(ds.Records))
	}
	for i, f := range FlightsSchema.Fields() {
		if g := ds.Schema.Field(i); g.Name != f.Name || g.Type.ID() != f.Type.ID() {
			t.Errorf("column %d is %s %s, want %s %s", i, g.Name, g.Type, f.Name, f.Type)
		}
	}
}

func TestMedianAndRatio(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	if m := median(ms(5, 1, 3)); m != 3*time.Millisecond {
		t.Errorf("odd median %v", m)
	}
	if m := median(ms(4, 1, 3, 2)); m != 2500*time.Microsecond {
		t.Errorf("even median %v", m)
	}
	eng := &Sample{Name: "e", Times: ms(10, 20, 40), CPU: ms(20, 40, 80)}
	base := &Sample{Name: "b", Times: ms(8, 20, 10), CPU: ms(10, 10, 10)}
	r := newRatio("r", eng, base, 0.8)
	if r.Median() != 0.8 || !r.Met() || r.Engine != "e" || r.Baseline != "b" {
		t.Errorf("paired %v median %v met %v", r.Paired, r.Median(), r.Met())
	}
	if r.MedianCPU() != 0.25 {
		t.Errorf("paired CPU %v median %v", r.PairedCPU, r.MedianCPU())
	}
	if p := pairedRatios(ms(1, 0), ms(1, 1)); p != nil {
		t.Errorf("a zero time gave ratios %v", p)
	}
	r.Target = 0.81
	if r.Met() {
		t.Error("0.80 met a 0.81 target")
	}
}

func TestAlternateRotates(t *testing.T) {
	var order []string
	mk := func(name string) variant {
		return variant{key: name, s: &Sample{Name: name}, run: func(context.Context, int) (Took, error) {
			order = append(order, name)
			return Took{Wall: time.Millisecond}, nil
		}}
	}
	vs := []variant{mk("a"), mk("b"), mk("c")}
	if err := alternate(context.Background(), 3, vs); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, ""); got != "abcbcacab" {
		t.Errorf("order %s", got)
	}
	for _, v := range vs {
		if len(v.s.Times) != 3 {
			t.Errorf("%s: %d times", v.key, len(v.s.Times))
		}
	}
}
