package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shale-db/shale/serve/admin"
	"github.com/shale-db/shale/serve/plan"
)

var t0 = time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)

// sampleStatus is a status with one executor, one assignment, times in a non-UTC zone.
func sampleStatus() admin.Status {
	cet := time.FixedZone("CET", 3600)
	return admin.Status{
		Executor: "serve-1", Leader: "serve-2", IsLeader: false,
		Executors: []admin.ExecutorInfo{
			{ID: "serve-1", Addr: "127.0.0.1:9100", Slots: map[string]int{"merge_wal": 2, "compact": 1},
				Bytes: 4 << 30, Started: t0.In(cet), Running: 1, Reserved: 64 << 20},
			{ID: "serve-2", Bytes: 1 << 30}, // no address, no slots, no start time
		},
		Assignments: []admin.AssignmentInfo{
			{ID: "01JX", Table: "events", Kind: "merge_wal", Executor: "serve-1", State: admin.StateRunning,
				PlacedAt: t0.In(cet), BoundAt: t0.Add(time.Second), Progress: 42, ProgressAt: t0.Add(2 * time.Second),
				Bytes: 64 << 20},
			{ID: "01JY", Table: "logs", Kind: "compact", Executor: "serve-2", State: admin.StateAssigned,
				PlacedAt: t0, Bytes: 1 << 20},
		},
	}
}

// sampleReport is a report for "events" with every member filled, a recovery unit
// (infinite score) and a backoff skip.
func sampleReport() admin.TableReport {
	rec := plan.Unit{Table: "events", Kind: plan.KindRecover, Class: plan.ClassRecovery, Score: math.Inf(1),
		Reason: plan.ReasonPendingSidecars, Bytes: plan.MetadataBytes, Slots: 1}
	merge := plan.Unit{Table: "events", Kind: plan.KindMergeWAL, Class: plan.ClassCritical, Score: 37.5,
		Reason: plan.ReasonCritical, Waited: 90 * time.Minute, WaitKnown: true, Bytes: 2 << 20, Slots: 1, Promote: true}
	return admin.TableReport{
		Table: "events",
		State: plan.TableState{Table: "events", PendingGenerations: 300, PendingBytes: 300 << 20,
			OldestPending: t0.Add(-90 * time.Minute), AgeKnown: true, AgeExact: true, Fragments: 40,
			SmallFragments: 20, UncoveredByIndex: 3, PendingSidecars: 1, LargestGeneration: 1 << 20},
		Policy: plan.DefaultPolicy(),
		Units:  []plan.Unit{rec, merge},
		Skips: []plan.Skip{
			{Table: "events", Kind: plan.KindMergeWAL, Reason: plan.SkipBackoff, Unit: &merge,
				Detail: "attempt 3 failed", RetryAt: t0.Add(time.Minute)},
			{Table: "events", Kind: plan.KindIndex, Reason: plan.SkipNoWork},
		},
		Next: "recover",
		Assignments: []admin.AssignmentInfo{{ID: "01JZ", Table: "events", Kind: "recover", Executor: "serve-1",
			State: admin.StateAssigned, PlacedAt: t0, Bytes: plan.MetadataBytes}},
		Failures: map[string]plan.Failure{"merge_wal": {Attempts: 3, Class: plan.FailureRetryable,
			LastFailure: t0, LastError: "store: timeout"}},
	}
}

// TestHealthz: 200 "ok" while Healthy is nil, 503 with the JSON error while it fails,
// and 200 again when it recovers.
func TestHealthz(t *testing.T) {
	src := &fakeSource{}
	srv := startServer(t, src, admin.NewMetrics())
	code, ctype, body := get(t, srv, http.MethodGet, "/healthz")
	if code != http.StatusOK || string(body) != "ok\n" || !strings.HasPrefix(ctype, "text/plain") {
		t.Fatalf("healthy: %d %q %q", code, ctype, body)
	}
	src.setHealth(fmt.Errorf("etcd session lost: %w", context.DeadlineExceeded))
	code, ctype, body = get(t, srv, http.MethodGet, "/healthz")
	if code != http.StatusServiceUnavailable || ctype != "application/json" {
		t.Fatalf("unhealthy: %d %q %s", code, ctype, body)
	}
	checkError(t, body, "unavailable", "etcd session lost")
	src.setHealth(nil)
	if code, _, _ := get(t, srv, http.MethodGet, "/healthz"); code != http.StatusOK {
		t.Fatalf("recovered: %d", code)
	}
	if code, _, body := get(t, srv, http.MethodHead, "/healthz"); code != http.StatusOK || len(body) != 0 {
		t.Fatalf("HEAD /healthz: %d %q", code, body)
	}
}

// checkError checks the JSON error shape {"error":{"kind":…,"message":…}} and nothing else.
func checkError(t *testing.T, body []byte, kind, msgContains string) {
	t.Helper()
	obj := decodeObject(t, body)
	if !slices.Equal(keys(obj), []string{"error"}) {
		t.Fatalf("error body members %v, want [error]: %s", keys(obj), body)
	}
	e, ok := obj["error"].(map[string]any)
	if !ok || !slices.Equal(keys(e), []string{"kind", "message"}) {
		t.Fatalf("error object %v: %s", obj["error"], body)
	}
	if e["kind"] != kind || !strings.Contains(e["message"].(string), msgContains) {
		t.Fatalf("error %v, want kind %q and a message containing %q", e, kind, msgContains)
	}
}

// TestStatusJSONShape: /v1/status's members, lists never null, times RFC 3339 in UTC,
// members that do not apply left out; and it decodes back to what the source returned.
func TestStatusJSONShape(t *testing.T) {
	src := &fakeSource{status: sampleStatus()}
	srv := startServer(t, src, admin.NewMetrics())
	code, ctype, body := get(t, srv, http.MethodGet, "/v1/status")
	if code != http.StatusOK || ctype != "application/json" || !strings.HasSuffix(string(body), "}\n") {
		t.Fatalf("/v1/status: %d %q %s", code, ctype, body)
	}
	obj := decodeObject(t, body)
	if got := keys(obj); !slices.Equal(got, []string{"assignments", "draining", "executor", "executors", "is_leader", "leader"}) {
		t.Errorf("status members %v", got)
	}
	ex := obj["executors"].([]any)
	if got := keys(ex[0].(map[string]any)); !slices.Equal(got, []string{"addr", "bytes", "id", "reserved", "running", "slots", "started"}) {
		t.Errorf("executor members %v", got)
	}
	if got := keys(ex[1].(map[string]any)); !slices.Equal(got, []string{"bytes", "id", "running", "slots"}) {
		t.Errorf("bare executor members %v (addr, started and reserved left out; slots {})", got)
	}
	if s := ex[1].(map[string]any)["slots"]; !reflect.DeepEqual(s, map[string]any{}) {
		t.Errorf("nil slots encoded as %v, want {}", s)
	}
	if s := ex[0].(map[string]any)["started"]; s != "2026-12-02T03:00:00Z" {
		t.Errorf("started %v, want RFC 3339 in UTC", s)
	}
	as := obj["assignments"].([]any)
	if got := keys(as[0].(map[string]any)); !slices.Equal(got, []string{"bound_at", "bytes", "executor", "id", "kind",
		"placed_at", "progress", "progress_at", "state", "table"}) {
		t.Errorf("assignment members %v", got)
	}
	if got := keys(as[1].(map[string]any)); !slices.Equal(got, []string{"bytes", "executor", "id", "kind",
		"placed_at", "progress", "state", "table"}) {
		t.Errorf("assigned (unbound) assignment members %v", got)
	}
	if p := as[0].(map[string]any)["placed_at"]; p != "2026-12-02T03:00:00Z" {
		t.Errorf("placed_at %v, want UTC", p)
	}
	var back admin.Status
	if err := json.Unmarshal(body, &back); err != nil {
		t.Fatal(err)
	}
	want := sampleStatus()
	for i := range want.Executors {
		want.Executors[i].Started = utcOrZero(want.Executors[i].Started)
	}
	for i := range want.Assignments {
		a := &want.Assignments[i]
		a.PlacedAt, a.BoundAt, a.ProgressAt = utcOrZero(a.PlacedAt), utcOrZero(a.BoundAt), utcOrZero(a.ProgressAt)
	}
	want.Executors[1].Slots = map[string]int{}
	if !reflect.DeepEqual(back, want) {
		t.Errorf("status round trip:\n got %+v\nwant %+v", back, want)
	}

	// An empty status: lists are [], never null.
	src.mu.Lock()
	src.status = admin.Status{Executor: "serve-1"}
	src.mu.Unlock()
	_, _, body = get(t, srv, http.MethodGet, "/v1/status")
	if !strings.Contains(string(body), `"executors": []`) || !strings.Contains(string(body), `"assignments": []`) ||
		strings.Contains(string(body), "null") {
		t.Errorf("empty status: %s", body)
	}
}

func utcOrZero(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// TestTableReportJSON: /v1/tables/{name} answers the report in snake_case, the infinite
// recovery score spelled out, durations in ms; and the JSON decodes back to the report.
func TestTableReportJSON(t *testing.T) {
	rep := sampleReport()
	src := &fakeSource{tables: map[string]admin.TableReport{"events": rep}}
	srv := startServer(t, src, admin.NewMetrics())
	code, ctype, body := get(t, srv, http.MethodGet, "/v1/tables/events")
	if code != http.StatusOK || ctype != "application/json" {
		t.Fatalf("/v1/tables/events: %d %q %s", code, ctype, body)
	}
	obj := decodeObject(t, body)
	if got := keys(obj); !slices.Equal(got, []string{"assignments", "failures", "next", "policy", "skips", "state", "table", "units"}) {
		t.Errorf("report members %v", got)
	}
	state := obj["state"].(map[string]any)
	if state["pending_generations"] != 300.0 || state["oldest_pending"] != "2026-12-02T01:30:00Z" || state["age_exact"] != true {
		t.Errorf("state %v", state)
	}
	if _, ok := state["unreadable"]; ok {
		t.Errorf("state has unreadable for a readable table: %v", state)
	}
	pol := obj["policy"].(map[string]any)
	if pol["max_age_ms"] != float64(time.Hour.Milliseconds()) || pol["min_generations"] != 8.0 || pol["paused"] != false {
		t.Errorf("policy %v", pol)
	}
	units := obj["units"].([]any)
	u0, u1 := units[0].(map[string]any), units[1].(map[string]any)
	if _, ok := u0["score"]; ok || u0["infinite_score"] != true || u0["class"] != "recovery" {
		t.Errorf("recovery unit %v: want no score, infinite_score true, class recovery", u0)
	}
	if u1["score"] != 37.5 || u1["class"] != "critical" || u1["waited_ms"] != float64((90*time.Minute).Milliseconds()) ||
		u1["reason"] != "pending_at_or_above_critical" || u1["promoted"] != true {
		t.Errorf("merge unit %v", u1)
	}
	skips := obj["skips"].([]any)
	s0, s1 := skips[0].(map[string]any), skips[1].(map[string]any)
	if s0["reason"] != "backoff" || s0["retry_at"] != "2026-12-02T03:01:00Z" || s0["unit"] == nil {
		t.Errorf("backoff skip %v", s0)
	}
	if got := keys(s1); !slices.Equal(got, []string{"kind", "reason"}) {
		t.Errorf("no_work skip members %v (detail, retry_at, unit left out)", got)
	}
	f := obj["failures"].(map[string]any)["merge_wal"].(map[string]any)
	if f["attempts"] != 3.0 || f["class"] != "retryable" || f["last_error"] != "store: timeout" {
		t.Errorf("failure %v", f)
	}

	var back admin.TableReport
	if err := json.Unmarshal(body, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, rep) {
		t.Errorf("report round trip:\n got %+v\nwant %+v", back, rep)
	}

	// A bare report: lists [] and maps {}, never null; next and reason left out.
	b, err := json.Marshal(admin.TableReport{Table: "empty"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"units":[]`, `"skips":[]`, `"assignments":[]`, `"failures":{}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("bare report %s lacks %s", b, want)
		}
	}
	if strings.Contains(string(b), "null") || strings.Contains(string(b), `"next"`) || strings.Contains(string(b), `"no_executors"`) {
		t.Errorf("bare report %s", b)
	}
	// no_executors appears only when true, and decodes back.
	b, err = json.Marshal(admin.TableReport{Table: "idle", NoExecutors: true})
	if err != nil || !strings.Contains(string(b), `"no_executors":true`) {
		t.Fatalf("report without executors: %s %v", b, err)
	}
	if err := json.Unmarshal(b, &back); err != nil || !back.NoExecutors || back.Table != "idle" {
		t.Fatalf("report without executors decoded: %+v %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"table":"x","units":[{"kind":"compact","class":"nonsense"}]}`), &back); err == nil {
		t.Error("a unit with an unknown class decoded")
	}
}

// TestTableErrors: an unknown table is 404 not_found (ErrNotFound or plan.ErrUnknownTable),
// a timeout 503 unavailable, a panic 500 internal (and the server goes on), anything else
// 500 error; each as the JSON error object naming the table.
func TestTableErrors(t *testing.T) {
	src := &fakeSource{errs: map[string]error{
		"unknown": fmt.Errorf("why %q: %w", "unknown", plan.ErrUnknownTable),
		"slow":    fmt.Errorf("table %q: read etcd: %w", "slow", context.DeadlineExceeded),
		"broken":  fmt.Errorf("table %q: manifest corrupt", "broken"),
	}, panicOn: "buggy", tables: map[string]admin.TableReport{"events": {Table: "events"}}}
	srv := startServer(t, src, admin.NewMetrics())
	for _, c := range []struct {
		name string
		code int
		kind string
	}{
		{"buggy", http.StatusInternalServerError, "internal"},
		{"events", http.StatusOK, ""}, // the server survived the panic
		{"nosuch", http.StatusNotFound, "not_found"},
		{"unknown", http.StatusNotFound, "not_found"},
		{"slow", http.StatusServiceUnavailable, "unavailable"},
		{"broken", http.StatusInternalServerError, "error"},
	} {
		code, ctype, body := get(t, srv, http.MethodGet, "/v1/tables/"+c.name)
		if code != c.code || ctype != "application/json" {
			t.Errorf("%s: %d %q %s, want %d", c.name, code, ctype, body, c.code)
			continue
		}
		if c.code != http.StatusOK {
			checkError(t, body, c.kind, c.name)
		}
	}
}

// TestTableNameFromPath: the {name} segment reaches the source unescaped.
func TestTableNameFromPath(t *testing.T) {
	name := "odd name%2f"
	src := &fakeSource{tables: map[string]admin.TableReport{name: {Table: name}}}
	srv := startServer(t, src, admin.NewMetrics())
	code, _, body := get(t, srv, http.MethodGet, "/v1/tables/"+url.PathEscape(name))
	if code != http.StatusOK || decodeObject(t, body)["table"] != name {
		t.Fatalf("escaped name: %d %s", code, body)
	}
}

// TestRoutes: unknown paths are 404 and other methods 405 (with Allow), both JSON errors.
func TestRoutes(t *testing.T) {
	srv := startServer(t, &fakeSource{}, admin.NewMetrics())
	for _, c := range []struct {
		method, path string
		code         int
		kind         string
	}{
		{http.MethodGet, "/nope", http.StatusNotFound, "not_found"},
		{http.MethodGet, "/v1/tables/", http.StatusNotFound, "not_found"},
		{http.MethodGet, "/v1/tables/a/b", http.StatusNotFound, "not_found"},
		{http.MethodPost, "/v1/status", http.StatusMethodNotAllowed, "usage"},
		{http.MethodDelete, "/v1/tables/events", http.StatusMethodNotAllowed, "usage"},
		{http.MethodPut, "/healthz", http.StatusMethodNotAllowed, "usage"},
		{http.MethodPost, "/metrics", http.StatusMethodNotAllowed, "usage"},
	} {
		req, _ := http.NewRequest(c.method, "http://"+srv.Addr()+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body [1024]byte
		n, _ := resp.Body.Read(body[:])
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("%s %s: %d, want %d (%s)", c.method, c.path, resp.StatusCode, c.code, body[:n])
			continue
		}
		if c.code == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s %s: Allow %q", c.method, c.path, resp.Header.Get("Allow"))
		}
		checkError(t, body[:n], c.kind, c.path)
	}
}

// TestNewServerErrors: a missing Source or Metrics, and an address in use, are errors.
func TestNewServerErrors(t *testing.T) {
	if _, err := admin.NewServer("127.0.0.1:0", nil, admin.NewMetrics(), nil); err == nil {
		t.Error("nil Source accepted")
	}
	if _, err := admin.NewServer("127.0.0.1:0", &fakeSource{}, nil, nil); err == nil {
		t.Error("nil Metrics accepted")
	}
	srv := startServer(t, &fakeSource{}, admin.NewMetrics())
	if s2, err := admin.NewServer(srv.Addr(), &fakeSource{}, admin.NewMetrics(), nil); err == nil {
		_ = s2.Close(context.Background())
		t.Errorf("second server on %s accepted", srv.Addr())
	} else if !strings.Contains(err.Error(), srv.Addr()) {
		t.Errorf("listen error does not name the address: %v", err)
	}
}

// TestServerClose: Close waits for a request in flight until its context ends, then
// forces it; afterwards nothing listens and a second Close returns the first's result.
func TestServerClose(t *testing.T) {
	block := make(chan struct{})
	src := &fakeSource{blockCh: block}
	srv, err := admin.NewServer("127.0.0.1:0", src, admin.NewMetrics(), nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr()
	done := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/v1/status")
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		src.mu.Lock()
		calls := src.calls
		src.mu.Unlock()
		if calls > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the request never reached the source")
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = srv.Close(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close with a request blocked: %v, want DeadlineExceeded", err)
	}
	close(block)
	<-done // the forced close ended the request (either way it returns)
	if err2 := srv.Close(context.Background()); !errors.Is(err2, context.DeadlineExceeded) {
		t.Errorf("second Close: %v, want the first's result", err2)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Close", addr)
	}
}

// TestServerConcurrent: requests on every route while the metrics change, under -race.
func TestServerConcurrent(t *testing.T) {
	m := admin.NewMetrics()
	src := &fakeSource{status: sampleStatus(), tables: map[string]admin.TableReport{"events": sampleReport()}}
	srv := startServer(t, src, m)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 25 {
				path := []string{"/metrics", "/healthz", "/v1/status", "/v1/tables/events", "/v1/tables/nosuch"}[(i+j)%5]
				code, _, _ := get(t, srv, http.MethodGet, path)
				switch {
				case path == "/v1/tables/nosuch" && code == http.StatusNotFound:
				case path == "/healthz" && (code == http.StatusOK || code == http.StatusServiceUnavailable): // health flips below
				case path != "/v1/tables/nosuch" && code == http.StatusOK:
				default:
					t.Errorf("%s: %d", path, code)
				}
				m.Placement(admin.ResultPlaced)
				m.SetTopTables(map[string]uint64{fmt.Sprintf("t%d", j): uint64(j + 1)})
			}
		})
	}
	wg.Go(func() {
		for j := range 50 {
			src.setHealth(map[bool]error{true: nil, false: errors.New("draining")}[j%2 == 0])
		}
		src.setHealth(nil)
	})
	wg.Wait()
	if got := scrape(t, srv).value(t, "shale_serve_placements_total", "result=placed"); got != 100 {
		t.Errorf("placements %v, want 100", got)
	}
}
