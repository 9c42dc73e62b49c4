package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/shale-db/shale/serve/admin"
	"github.com/shale-db/shale/serve/plan"
)

// staticSource answers from one planning pass's Input (a runtime reads etcd instead).
type staticSource struct{ in plan.Input }

func (s staticSource) Status(ctx context.Context) (admin.Status, error) {
	return admin.Status{Executor: "serve-1", Leader: "serve-1", IsLeader: true}, nil
}

func (s staticSource) Table(ctx context.Context, name string) (admin.TableReport, error) {
	ex, err := plan.Why(s.in, name)
	if err != nil {
		return admin.TableReport{}, fmt.Errorf("table %q: %w", name, admin.ErrNotFound)
	}
	rep := admin.TableReport{Table: name, Policy: plan.DefaultPolicy()}
	for _, e := range ex {
		switch {
		case e.Placement != nil && rep.Next == "":
			rep.Next = string(e.Kind)
		case e.Skip != nil:
			rep.Skips = append(rep.Skips, *e.Skip)
			if e.Skip.Reason != plan.SkipNoWork && rep.Reason == "" {
				rep.Reason = string(e.Skip.Reason)
			}
		}
	}
	if rep.Next != "" {
		rep.Reason = ""
	}
	return rep, nil
}

func (s staticSource) Healthy(ctx context.Context) error { return nil }

// Serve the admin endpoint on a free port, record a placement, and read it back: the
// metric from /metrics, and why a paused table is not worked on from /v1/tables/{name}.
func Example() {
	m := admin.NewMetrics()
	src := staticSource{in: plan.Input{
		Tables:   []plan.TableState{{Table: "events", PendingGenerations: 40}},
		Policies: map[string]plan.Policy{"events": {Paused: true}},
		Executors: []plan.Executor{{ID: "serve-1", Bytes: 1 << 30,
			Slots: map[plan.Kind]int{plan.KindMergeWAL: 1}}},
	}}
	srv, err := admin.NewServer("127.0.0.1:0", src, m, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close(context.Background())

	m.SetLeader(true)
	m.Placement(string(plan.SkipPaused))

	get := func(path string) (int, []byte) {
		resp, err := http.Get("http://" + srv.Addr() + path)
		if err != nil {
			return 0, []byte(err.Error())
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}

	code, body := get("/metrics")
	fmt.Println("/metrics", code)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "shale_serve_leader ") || strings.Contains(line, `result="paused"`) {
			fmt.Println(" ", line)
		}
	}

	code, body = get("/v1/tables/events")
	var rep admin.TableReport
	if err := json.Unmarshal(body, &rep); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("/v1/tables/events %d: next %q, reason %q\n", code, rep.Next, rep.Reason)
	for _, sk := range rep.Skips {
		if sk.Reason != plan.SkipNoWork {
			fmt.Printf("  %s: %s (class %s)\n", sk.Kind, sk.Reason, admin.ClassName(sk.Unit.Class))
		}
	}

	code, body = get("/v1/tables/nosuch")
	fmt.Printf("/v1/tables/nosuch %d: %s", code, body)
	// Output:
	// /metrics 200
	//   shale_serve_leader 1
	//   shale_serve_placements_total{result="paused"} 1
	// /v1/tables/events 200: next "", reason "paused"
	//   merge_wal: paused (class normal)
	// /v1/tables/nosuch 404: {
	//   "error": {
	//     "kind": "not_found",
	//     "message": "table \"nosuch\": admin: table not found"
	//   }
	// }
}
