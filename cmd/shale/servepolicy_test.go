package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/serve/plan"
)

// servePolicyOf runs `serve policy TABLE --json` (with extra args) and checks its shape.
func (e *env) servePolicyOf(table string, extra ...string) (rep struct {
	Policy   map[string]any `json:"policy"`
	Stored   map[string]any `json:"stored"`
	Defaults map[string]any `json:"defaults"`
}) {
	e.t.Helper()
	out := e.ok(append([]string{"serve", "policy", table, "--json"}, extra...)...)
	checkDocumented(e.t, "serve policy", checkJSONObject(e.t, "serve policy", out), jsonDocMembers(e.t)["shale serve policy TABLE"])
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		e.t.Fatal(err)
	}
	return rep
}

// TestServePolicyAndRetry: `shale serve policy` shows the defaults, merges --set knobs
// into the stored policy (which the planner then applies: why shows it), refuses bad
// keys and values before writing anything, --reset removes it; `shale serve retry`
// clears a failure ledger entry that why showed. Unknown tables are not_found.
func TestServePolicyAndRetry(t *testing.T) {
	e := freshEnv(t)
	tbl := e.table("servepolicy")
	e.ok("import", e.file("a.csv", "id\n1\n"), "--table", tbl)

	rep := e.servePolicyOf(tbl)
	if len(rep.Stored) != 0 || rep.Policy["min_generations"] != 8.0 || rep.Defaults["max_age_ms"] != 3600000.0 || rep.Policy["paused"] != false {
		t.Fatalf("fresh policy: %+v", rep)
	}
	if out := e.ok("serve", "policy", tbl); !strings.Contains(out, "no knob stored") || !strings.Contains(out, "min_generations") {
		t.Fatalf("text:\n%s", out)
	}

	rep = e.servePolicyOf(tbl, "--set", "min_generations=4,max_age=90s", "--set", "paused=true")
	want := map[string]any{"min_generations": 4.0, "max_age_ms": 90000.0, "paused": true}
	for k, v := range want {
		if rep.Stored[k] != v || rep.Policy[k] != v {
			t.Fatalf("after --set: %s: stored %v, in force %v, want %v (%+v)", k, rep.Stored[k], rep.Policy[k], v, rep)
		}
	}
	if len(rep.Stored) != 3 || rep.Policy["min_small_fragments"] != 16.0 || rep.Defaults["min_generations"] != 8.0 {
		t.Fatalf("after --set: %+v", rep)
	}
	// Merged: removing one knob keeps the others.
	rep = e.servePolicyOf(tbl, "--set", "max_age=default")
	if len(rep.Stored) != 2 || rep.Stored["min_generations"] != 4.0 || rep.Policy["max_age_ms"] != 3600000.0 {
		t.Fatalf("after max_age=default: %+v", rep)
	}
	out := e.ok("serve", "policy", tbl)
	if !strings.Contains(out, "paused, min_generations stored") || !strings.Contains(out, "(stored)") {
		t.Fatalf("text after --set:\n%s", out)
	}
	// The planner applies it.
	why := checkJSONObject(t, "why", e.ok("why", tbl, "--json"))
	if p := why["policy"].(map[string]any); p["min_generations"] != 4.0 || p["paused"] != true {
		t.Fatalf("why does not apply the stored policy: %v", why["policy"])
	}

	// Bad input: usage errors, nothing written.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "min_generation=3"}, `unknown policy knob "min_generation"`},
		{[]string{"--set", "min_generations=0"}, "min_generations=0"},
		{[]string{"--set", "min_generations=-2"}, "at least 1"},
		{[]string{"--set", "max_turn_wait=soon"}, "max_turn_wait=soon"},
		{[]string{"--set", "max_age=1500us"}, "milliseconds"},
		{[]string{"--set", "paused=maybe"}, "paused=maybe"},
		{[]string{"--set", "min_uncovered"}, "KEY=VALUE"},
		{[]string{"--set", "min_uncovered=2,max_consecutive_turns=x"}, "max_consecutive_turns=x"},
		{[]string{"--set", "min_uncovered=2", "--reset"}, "--reset"},
	} {
		e.fails(exitUsage, []string{c.want}, append([]string{"serve", "policy", tbl}, c.args...)...)
	}
	if rep2 := e.servePolicyOf(tbl); len(rep2.Stored) != 2 || rep2.Stored["min_generations"] != 4.0 {
		t.Fatalf("a refused --set wrote: %+v", rep2)
	}
	for _, args := range [][]string{{"serve", "policy", "nosuch"}, {"serve", "policy", "nosuch", "--set", "paused=true"}, {"serve", "retry", "nosuch"}} {
		e.fails(exitError, []string{"table not found", "nosuch"}, args...)
		if r := e.run(append(args, "--json")...); r.code != exitError || !strings.Contains(r.stderr, `"kind":"not_found"`) {
			t.Fatalf("%v --json: %v", args, r)
		}
	}
	e.fails(exitUsage, []string{`unknown kind "merge"`}, "serve", "retry", tbl, "merge")
	e.fails(exitUsage, []string{"accepts 1 arg"}, "serve", "policy")

	// A failure ledger entry, as a failed release records it, next to the policy key.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := coord.Connect(ctx, coord.Config{StateDir: e.home})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Etcd().Get(ctx, "/shale/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	policyKey := ""
	for _, kv := range r.Kvs {
		if strings.HasSuffix(string(kv.Key), "/serve/policy/"+tbl) {
			policyKey = string(kv.Key)
		}
	}
	if policyKey == "" {
		t.Fatalf("no policy key for %s in etcd", tbl)
	}
	f, _ := json.Marshal(plan.Failure{Attempts: 1, Class: plan.FailureData, LastFailure: time.Now(), LastError: "planted: corrupt fragment"})
	failKey := strings.TrimSuffix(policyKey, "policy/"+tbl) + "failures/" + tbl + "/compact"
	if _, err := c.Etcd().Put(ctx, failKey, string(f)); err != nil {
		t.Fatal(err)
	}
	if fs := checkJSONObject(t, "why", e.ok("why", tbl, "--json"))["failures"].(map[string]any); fs["compact"] == nil {
		t.Fatalf("why does not show the planted failure: %v", fs)
	}
	if out := e.ok("serve", "retry", tbl, "merge_wal"); !strings.Contains(out, "no failure recorded for merge_wal") {
		t.Fatalf("retry merge_wal:\n%s", out)
	}
	out = e.ok("serve", "retry", tbl, "--json")
	rr := checkJSONObject(t, "serve retry", out)
	checkDocumented(t, "serve retry", rr, jsonDocMembers(t)["shale serve retry TABLE"])
	if cl := rr["cleared"].([]any); len(cl) != 1 || cl[0].(map[string]any)["kind"] != "compact" ||
		cl[0].(map[string]any)["last_error"] != "planted: corrupt fragment" {
		t.Fatalf("retry: %s", out)
	}
	if fs := checkJSONObject(t, "why", e.ok("why", tbl, "--json"))["failures"].(map[string]any); len(fs) != 0 {
		t.Fatalf("failure still there after retry: %v", fs)
	}

	rep = e.servePolicyOf(tbl, "--reset")
	if len(rep.Stored) != 0 || rep.Policy["paused"] != false || rep.Policy["min_generations"] != 8.0 {
		t.Fatalf("after --reset: %+v", rep)
	}
	if p := checkJSONObject(t, "why", e.ok("why", tbl, "--json"))["policy"].(map[string]any); p["paused"] != false {
		t.Fatalf("why after --reset: %v", p)
	}
}
