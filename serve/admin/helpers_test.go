package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/shale-db/shale/serve/admin"
)

// fakeSource is a Source over fixed answers (the runtime's etcd reads are not this
// package's; its tests use the real runtime).
type fakeSource struct {
	mu      sync.Mutex
	status  admin.Status
	tables  map[string]admin.TableReport
	errs    map[string]error // Table errors by name
	health  error
	panicOn string // Table panics for this name
	calls   int
	blockCh chan struct{} // when set, Status blocks until it is closed or ctx is done
}

func (f *fakeSource) Status(ctx context.Context) (admin.Status, error) {
	f.mu.Lock()
	f.calls++
	st, block := f.status, f.blockCh
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return admin.Status{}, ctx.Err()
		}
	}
	return st, nil
}

func (f *fakeSource) Table(ctx context.Context, name string) (admin.TableReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if name == f.panicOn && name != "" {
		panic("fake source: " + name)
	}
	if err := f.errs[name]; err != nil {
		return admin.TableReport{}, err
	}
	r, ok := f.tables[name]
	if !ok {
		return admin.TableReport{}, fmt.Errorf("table %q: %w", name, admin.ErrNotFound)
	}
	return r, nil
}

func (f *fakeSource) Healthy(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.health
}

func (f *fakeSource) setHealth(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.health = err
}

// startServer starts a Server on 127.0.0.1:0 and closes it when the test ends.
func startServer(t *testing.T, src admin.Source, m *admin.Metrics) *admin.Server {
	t.Helper()
	srv, err := admin.NewServer("127.0.0.1:0", src, m, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return srv
}

// get fetches path from srv and returns the status, the Content-Type and the body.
func get(t *testing.T, srv *admin.Server, method, path string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+srv.Addr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// scrape fetches /metrics from srv and parses the text format.
func scrape(t *testing.T, srv *admin.Server) families {
	t.Helper()
	code, ctype, body := get(t, srv, http.MethodGet, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	if !strings.HasPrefix(ctype, "text/plain") {
		t.Fatalf("/metrics Content-Type %q, want the text format", ctype)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return families(fams)
}

// families is a parsed scrape.
type families map[string]*dto.MetricFamily

// labelsOf renders a metric's labels as "k=v,k=v" (sorted).
func labelsOf(m *dto.Metric) string {
	var s []string
	for _, lp := range m.GetLabel() {
		s = append(s, lp.GetName()+"="+lp.GetValue())
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}

// find returns the series of family name with labels ("" for none), or nil.
func (f families) find(name, labels string) *dto.Metric {
	for _, m := range f[name].GetMetric() {
		if labelsOf(m) == labels {
			return m
		}
	}
	return nil
}

// value is a counter's or gauge's value, failing the test when the series is absent.
func (f families) value(t *testing.T, name, labels string) float64 {
	t.Helper()
	m := f.find(name, labels)
	if m == nil {
		t.Fatalf("no series %s{%s}; have %v", name, labels, f.series(name))
	}
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	}
	t.Fatalf("%s{%s} is neither a counter nor a gauge", name, labels)
	return 0
}

// histogram returns a histogram series, failing the test when it is absent.
func (f families) histogram(t *testing.T, name, labels string) *dto.Histogram {
	t.Helper()
	m := f.find(name, labels)
	if m == nil || m.Histogram == nil {
		t.Fatalf("no histogram %s{%s}; have %v", name, labels, f.series(name))
	}
	return m.GetHistogram()
}

// series lists the label sets of family name.
func (f families) series(name string) []string {
	var s []string
	for _, m := range f[name].GetMetric() {
		s = append(s, labelsOf(m))
	}
	sort.Strings(s)
	return s
}

// decodeObject decodes a JSON object, failing the test when it is not one.
func decodeObject(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, b)
	}
	return m
}

// keys lists an object's member names, sorted.
func keys(m map[string]any) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}
