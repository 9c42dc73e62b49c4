package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeOnceMergesWALBacklog: `shale serve --once` beside nothing else plans a pass,
// merges a table's WAL backlog on this process and exits; `why` and `serve status` read
// the same state; the --json objects are the documented ones.
func TestServeOnceMergesWALBacklog(t *testing.T) {
	e := freshEnv(t)
	tbl := e.table("serve")
	csv := e.file("w.csv", "id,name\n1,a\n2,b\n3,c\n")
	e.ok("import", csv, "--table", tbl)
	e.ok("wal", "append", csv, "--table", tbl)
	e.ok("wal", "append", csv, "--table", tbl)
	// Demand is published by the writer in the background: wait until why sees it.
	var why map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for {
		why = checkJSONObject(t, "why", e.ok("why", tbl, "--json"))
		if st, _ := why["state"].(map[string]any); st["pending_generations"].(float64) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("demand never showed the backlog: %v", why)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// With no executor alive the merge is scored (tail work: 2 of 8 generations) and
	// waits with a named reason.
	units := why["units"].([]any)
	if len(units) != 1 || units[0].(map[string]any)["kind"] != "merge_wal" || units[0].(map[string]any)["class"] != "tail" {
		t.Fatalf("why: units %v", units)
	}
	if why["reason"] != "below_threshold" {
		t.Fatalf("why: reason %v: %v", why["reason"], why)
	}
	// ... and says first that no serve process runs, so the reason is not read as an
	// executor's.
	if why["no_executors"] != true {
		t.Fatalf("why without a serve process: no_executors %v", why["no_executors"])
	}
	for _, args := range [][]string{{"why", tbl}, {"serve", "status", tbl}} {
		lines := strings.Split(e.ok(args...), "\n")
		if lines[0] != noServeLine || !strings.Contains(lines[1], "below_threshold") {
			t.Fatalf("%v without a serve process:\n%s", args, strings.Join(lines, "\n"))
		}
	}
	docs := jsonDocMembers(t)
	checkDocumented(t, "why", why, docs["shale why TABLE"])

	out := e.ok("serve", "--once", "--json", "--pass-interval", "1s")
	rep := checkJSONObject(t, "serve --once", out)
	checkDocumented(t, "serve --once", rep, docs["shale serve --once"])
	var r struct {
		Executions []struct{ Table, Kind, Phase string } `json:"executions"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, x := range r.Executions {
		if x.Table == tbl && x.Kind == "merge_wal" {
			found = x.Phase == "succeeded"
		}
	}
	if !found {
		t.Fatalf("serve --once did not merge %s:\n%s", tbl, out)
	}
	var ws struct {
		Shards []struct {
			Sealed, Merged     uint64
			PendingGenerations int `json:"pending_generations"`
		} `json:"shards"`
	}
	if err := json.Unmarshal([]byte(e.ok("wal", "status", tbl, "--json")), &ws); err != nil {
		t.Fatal(err)
	}
	if len(ws.Shards) == 0 || ws.Shards[0].PendingGenerations != 0 || ws.Shards[0].Merged != ws.Shards[0].Sealed {
		t.Fatalf("after serve --once: %+v", ws.Shards)
	}
	st := checkJSONObject(t, "serve status", e.ok("serve", "status", "--json"))
	checkDocumented(t, "serve status", st, docs["shale serve status"])
	if ex := st["executors"].([]any); len(ex) != 0 {
		t.Fatalf("a --once executor is left registered: %v", st)
	}
	if !strings.Contains(e.ok("serve", "status", tbl), tbl) {
		t.Fatal("serve status TABLE does not name the table")
	}

	// A process with other planner-wide settings refuses, naming them; --replace-config
	// takes over.
	e.fails(exitError, []string{"pass_interval_ms: stored 1000, this process 2000", "--replace-config"},
		"serve", "--once", "--pass-interval", "2s")
	e.ok("serve", "--once", "--pass-interval", "2s", "--replace-config")
}

// noServeLine is why's first line when no shale serve process is live.
const noServeLine = "no shale serve process is running: nothing is placed until one starts (shale serve)"

func checkDocumented(t *testing.T, what string, obj map[string]any, members map[string]docMember) {
	t.Helper()
	if members == nil {
		t.Fatalf("%s: docs/json.md has no row", what)
	}
	for k, m := range members {
		v, present := obj[k]
		switch {
		case !present && !m.optional:
			t.Errorf("%s: member %q documented but missing: %v", what, k, obj)
		case present && m.list:
			if _, ok := v.([]any); !ok {
				t.Errorf("%s: %q is %T, documented as a list", what, k, v)
			}
		}
	}
	for k := range obj {
		if _, ok := members[k]; !ok {
			t.Errorf("%s: member %q is not in docs/json.md", what, k)
		}
	}
}

// TestServeBadInput: bad flags and config files are usage errors (exit 2) found before
// anything starts; an unknown table in why is not_found (exit 1).
func TestServeBadInput(t *testing.T) {
	e := freshEnv(t)
	tbl := e.table("servebad")
	e.ok("import", e.file("a.csv", "id\n1\n"), "--table", tbl)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--slots", "frobnicate=1"}, `unknown kind "frobnicate"`},
		{[]string{"serve", "--slots", "merge_wal"}, "not KIND=N"},
		{[]string{"serve", "--slots", "merge_wal=-1"}, "not KIND=N"},
		{[]string{"serve", "--memory", "lots"}, "--memory"},
		{[]string{"serve", "--memory", "0"}, "--memory"},
		{[]string{"serve", "--lease-ttl", "1500ms"}, "lease TTL"},
		{[]string{"serve", "--pass-interval", "0s"}, "--pass-interval"},
		{[]string{"serve", "--idle-timeout", "-1s"}, "--idle-timeout"},
		{[]string{"serve", "--max-placements", "0"}, "--max-placements"},
		{[]string{"serve", "--pass-interval", "soon"}, "soon"},
		{[]string{"serve", "--config", e.dir + "/nonexistent.json"}, "--config"},
		{[]string{"serve", "--config", e.file("bad.json", `{"pass_interval": "5s", "colour": 1}`)}, "colour"},
		{[]string{"serve", "--config", e.file("bad2.json", `{"lease_ttl": "ten"}`)}, "lease_ttl"},
		{[]string{"serve", "--config", e.file("bad3.json", `{"policy": {"min_generation": 3}}`)}, "min_generation"},
		{[]string{"serve", "--id", "a/b"}, "--id"},
		{[]string{"serve", "bogus"}, "unknown serve command"},
		{[]string{"why"}, "accepts 1 arg"},
		{[]string{"why", "a", "b"}, "accepts 1 arg"},
		{[]string{"serve", "status", "a", "b"}, "accepts at most 1 arg"},
	} {
		e.fails(exitUsage, []string{c.want}, c.args...)
	}
	e.fails(exitError, []string{"table not found", "nosuch"}, "why", "nosuch")
	r := e.run("why", "nosuch", "--json")
	if r.code != exitError || !strings.Contains(r.stderr, `"kind":"not_found"`) {
		t.Fatalf("why nosuch --json: %v", r)
	}
	// Nothing was stored by the refused starts: the first real start may choose settings.
	e.ok("serve", "--once", "--pass-interval", "3s")
}

// TestServeDrainsOnSIGTERM: a running `shale serve` registers, leads, compacts a table
// nobody asked it to, and on SIGTERM drains and exits 0, leaving no executor and no
// planner behind.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	e := freshEnv(t)
	tbl := e.table("servedrain")
	for i := range 18 {
		e.ok("import", e.file(fmt.Sprintf("f%d.csv", i), fmt.Sprintf("id\n%d\n", i)), "--table", tbl)
	}
	cmd := exec.Command(shaleBin, "serve", "--pass-interval", "100ms", "--id", "drainer", "--listen", "127.0.0.1:0")
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "SHALE_HOME="+e.home, "SHALE_ETCD_IDLE=20s")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	}()
	type statusJSON struct {
		Leader    string `json:"leader"`
		Executors []struct {
			ID   string `json:"id"`
			Addr string `json:"addr"`
		} `json:"executors"`
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var st statusJSON
		if err := json.Unmarshal([]byte(e.ok("serve", "status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		frags := len(e.inspectFragments(tbl))
		if st.Leader == "drainer" && len(st.Executors) == 1 && frags < 18 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never led and compacted (status %+v, %d fragments):\n%s", st, frags, stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The admin endpoint answers at the address the executor advertises.
	var st0 statusJSON
	if err := json.Unmarshal([]byte(e.ok("serve", "status", "--json")), &st0); err != nil || len(st0.Executors) != 1 {
		t.Fatalf("status: %+v %v", st0, err)
	}
	resp, err := http.Get("http://" + st0.Executors[0].Addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz at %s: %d", st0.Executors[0].Addr, resp.StatusCode)
	}
	// With an executor live, why does not say none runs.
	if out := e.ok("why", tbl); strings.Contains(out, noServeLine) {
		t.Fatalf("why with a serve process running:\n%s", out)
	}
	if why := checkJSONObject(t, "why", e.ok("why", tbl, "--json")); why["no_executors"] != nil {
		t.Fatalf("why with a serve process running: no_executors %v", why["no_executors"])
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not exit after SIGTERM:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "serve: drained") {
		t.Fatalf("no drain in the log:\n%s", stderr.String())
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(e.ok("serve", "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Leader != "" || len(st.Executors) != 0 {
		t.Fatalf("left behind after drain: %+v", st)
	}
}

// inspectFragments lists a table's fragments (inspect --json).
func (e *env) inspectFragments(table string) []any {
	e.t.Helper()
	var v struct {
		Fragments []any `json:"fragments"`
	}
	if err := json.Unmarshal([]byte(e.ok("inspect", table, "--json")), &v); err != nil {
		e.t.Fatal(err)
	}
	return v.Fragments
}
