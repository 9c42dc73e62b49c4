package admin_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shale-db/shale/serve/admin"
	"github.com/shale-db/shale/serve/plan"
)

// TestOperationsDocNamesEverything: docs/operations.md, the runbook, names every metric
// this package exports, every skip reason, class and unit reason of the planner, every
// recovery action and every policy knob (as the JSON names them), so the runbook cannot
// silently fall behind the code.
func TestOperationsDocNamesEverything(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	var want []string
	srv := startServer(t, &fakeSource{}, admin.NewMetrics())
	for name := range scrape(t, srv) {
		if strings.HasPrefix(name, "shale_") {
			want = append(want, name)
		}
	}
	want = append(want, skipReasons(t)...)
	want = append(want, recoveryActions(t)...)
	for c := plan.ClassRecovery; c <= plan.ClassTail; c++ {
		want = append(want, admin.ClassName(c))
	}
	want = append(want, plan.ReasonPendingSidecars, plan.ReasonCritical, plan.ReasonPromoted, plan.ReasonDrift,
		plan.ReasonScore, plan.ReasonTail)
	rep, err := json.Marshal(admin.TableReport{Policy: plan.DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	var obj struct{ Policy map[string]any }
	if err := json.Unmarshal(rep, &obj); err != nil {
		t.Fatal(err)
	}
	for k := range obj.Policy {
		want = append(want, k)
	}
	for _, route := range []string{"/metrics", "/healthz", "/v1/status", "/v1/tables/{name}"} {
		if !strings.Contains(doc, "`GET "+route+"`") {
			t.Errorf("docs/operations.md does not list the route `GET %s`", route)
		}
	}
	for _, w := range want {
		if !strings.Contains(doc, "`"+w+"`") {
			t.Errorf("docs/operations.md does not name `%s`", w)
		}
	}
}
