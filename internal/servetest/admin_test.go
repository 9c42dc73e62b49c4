package servetest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shale-db/shale/serve"
	"github.com/shale-db/shale/serve/admin"
	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/serve/state"
)

// scrape reads the Prometheus text exposition at url: sample name with labels (as
// written: client_golang sorts labels by name) to value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// getJSON GETs url and decodes its JSON body into v (when not nil); it returns the status.
func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %s: %v\n%s", url, resp.Status, err, b)
		}
	}
	return resp.StatusCode
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	f  *os.File
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.f.Write(p)
}

// TestMetricsAndEndpointsMatchWhatHappened runs a serve process with its admin endpoint
// over a WAL backlog and a table of small fragments, and checks what the endpoint
// reports against what happened: the assignments etcd saw created, the executions the
// process logged, its status and its table reports.
func TestMetricsAndEndpointsMatchWhatHappened(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	createTable(t, e, "w", 1, false)
	createTable(t, e, "c", 1, false)
	l := &ledger{attempted: map[int64]bool{}, acked: map[int64]bool{}}
	appendGens(t, e.db, "w", 0, 5, 3, l)
	tc, err := e.db.OpenTable(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		rec := batch(int64(i*10), 10, "parent")
		_, err := tc.AppendRecord(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}

	// Every assignment created in etcd from now on, by kind (the truth the counters must
	// match).
	cli := e.db.Options().Etcd
	st := serve.StateOf(e.db)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	rev, err := cli.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	created := map[string]int{}
	wch := cli.Watch(wctx, st.Keys().Assignments(), clientv3.WithPrefix(), clientv3.WithRev(rev.Header.Revision+1))
	wdone := make(chan struct{})
	go func() {
		defer close(wdone)
		for resp := range wch {
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypePut && ev.IsCreate() {
					a, err := state.DecodeAssignment(ev.Kv.Value)
					mu.Lock()
					if err == nil {
						created[string(a.Kind)]++
					} else {
						created["undecodable"]++
					}
					mu.Unlock()
				}
			}
		}
	}()

	logf, err := os.Create(filepath.Join(e.dir, "m1.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	log := slog.New(slog.NewJSONHandler(&syncBuffer{f: logf}, nil))
	m := admin.NewMetrics()
	cfg := e.serveChild("m1", nil)
	s, err := serve.New(ctx, e.db, serve.Options{ID: "m1", Config: serveConfig(cfg), Metrics: m, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := admin.NewServer("127.0.0.1:0", s, m, log)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(ctx)
	base := "http://" + srv.Addr()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			s.Close(ctx)
		}
	}()
	// Quiet as the parent's Explain and the server's own endpoint both see it.
	waitFor(t, 60*time.Second, "the backlog merged and c compacted, both quiet", func() bool {
		for _, tb := range []string{"w", "c"} {
			rep, ok := quiet(ctx, e.db, tb)
			if !ok || rep.State.SmallFragments >= runPolicy.MinSmallFragments {
				return false
			}
			var srvRep admin.TableReport
			if code := getJSON(t, base+"/v1/tables/"+tb, &srvRep); code != http.StatusOK || srvRep.Next != "" ||
				len(srvRep.Assignments) != 0 || srvRep.State.PendingGenerations != 0 {
				return false
			}
		}
		return true
	})

	// Status: one executor, this one, leading; nothing assigned.
	var status admin.Status
	if code := getJSON(t, base+"/v1/status", &status); code != http.StatusOK {
		t.Fatalf("/v1/status: %d", code)
	}
	if status.Executor != "m1" || status.Leader != "m1" || !status.IsLeader || len(status.Executors) != 1 ||
		status.Executors[0].ID != "m1" || len(status.Assignments) != 0 || status.Draining {
		t.Fatalf("/v1/status: %+v", status)
	}
	// Tables: an existing one reports its picture; an unknown one is a 404 of kind
	// not_found.
	var rep admin.TableReport
	if code := getJSON(t, base+"/v1/tables/w", &rep); code != http.StatusOK || rep.Table != "w" ||
		rep.State.PendingGenerations != 0 || rep.Next != "" || rep.Reason == "" || rep.Policy.MinSmallFragments != runPolicy.MinSmallFragments {
		t.Fatalf("/v1/tables/w: %d %+v", code, rep)
	}
	var bad struct {
		Error struct {
			Kind    string `json:"kind"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if code := getJSON(t, base+"/v1/tables/nope", &bad); code != http.StatusNotFound || bad.Error.Kind != admin.KindNotFound ||
		!strings.Contains(bad.Error.Message, "nope") {
		t.Fatalf("/v1/tables/nope: %d %+v", code, bad)
	}

	// Metrics against what happened: the placements etcd saw, the executions the log
	// recorded (bind and end of each), one schedule-to-bind observation per bind.
	wcancel()
	<-wdone
	execs, entries, err := readExecutions(e.dir, "m1", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	bound, phases := map[string]int{}, map[string]int{}
	for _, x := range execs {
		bound[string(x.Kind)]++
		phases[string(x.Kind)+"/"+x.Phase]++
	}
	placedLog := 0
	for _, en := range entries {
		if en.Msg == "serve: placed" {
			placedLog++
		}
	}
	got := scrape(t, base+"/metrics")
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, n := range created {
		total += n
	}
	recoveries := map[string]float64{}
	for k, v := range got {
		if strings.HasPrefix(k, "shale_serve_recoveries_total") {
			recoveries[k] = v
		}
	}
	t.Logf("assignments created %v; executions %v; recoveries %v", created, phases, recoveries)
	if v := got[`shale_serve_placements_total{result="placed"}`]; int(v) != total || placedLog != total {
		t.Errorf("placements_total{placed} %v, %d assignments created in etcd, %d placements logged", v, total, placedLog)
	}
	if created[string(plan.KindMergeWAL)] == 0 || created[string(plan.KindCompact)] == 0 {
		t.Errorf("no merge or no compaction placed: %v", created)
	}
	for _, k := range plan.Kinds {
		kind := string(k)
		if n := created[kind]; bound[kind] != n {
			t.Errorf("%s: %d assignments created, %d bound", kind, n, bound[kind])
		}
		for _, ph := range []string{admin.PhaseBound, admin.PhaseSucceeded, admin.PhaseFailed, admin.PhaseCancelled, admin.PhaseStalled} {
			want := phases[kind+"/"+ph]
			if ph == admin.PhaseBound {
				want = bound[kind]
			}
			if v := got[fmt.Sprintf(`shale_serve_executions_total{kind=%q,phase=%q}`, kind, ph)]; int(v) != want {
				t.Errorf("executions_total{%s,%s} %v, the log says %d", kind, ph, v, want)
			}
		}
		if v := got[fmt.Sprintf(`shale_serve_schedule_to_bind_seconds_count{kind=%q}`, kind)]; int(v) != bound[kind] {
			t.Errorf("schedule_to_bind_seconds_count{%s} %v, %d bound", kind, v, bound[kind])
		}
		if v := got[fmt.Sprintf(`shale_serve_executions_running{kind=%q}`, kind)]; v != 0 {
			t.Errorf("executions_running{%s} %v when quiet", kind, v)
		}
	}
	if v := got["shale_serve_leader"]; v != 1 {
		t.Errorf("shale_serve_leader %v, want 1", v)
	}
	if v := got["shale_serve_plan_pass_seconds_count"]; v < 1 {
		t.Errorf("plan_pass_seconds_count %v", v)
	}
	if resp, err := http.Get(base + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// Drained: /healthz answers 503, the leader gauge drops.
	closed = true
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/healthz after Close: %s, want 503", resp.Status)
	}
	if v := scrape(t, base+"/metrics")["shale_serve_leader"]; v != 0 {
		t.Errorf("shale_serve_leader %v after Close, want 0", v)
	}
}
