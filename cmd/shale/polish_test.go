package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shale-db/shale/coord"
)

// TestQueryVersionErrors: --version 0 is a usage error saying versions start at 1; a
// version above HEAD names HEAD, and neither shows the internal manifest key.
func TestQueryVersionErrors(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("qver")
	csv := e.file("q.csv", "a\n1\n")
	for i := range 4 {
		e.ok("import", csv, "--table", tbl, "--idempotency-key", fmt.Sprint(i)) // versions 2..5 (the first creates version 1)
	}
	for _, cmd := range []string{"query", "inspect"} {
		r := e.fails(2, []string{"--version 0", "versions start at 1"}, cmd, tbl, "--version", "0")
		if strings.Contains(r.stderr, "_versions/") {
			t.Fatalf("%s --version 0 shows the manifest key: %q", cmd, r.stderr)
		}
		r = e.fails(1, []string{`table "` + tbl + `" has no version 99 (HEAD is 5)`, "version not found"}, cmd, tbl, "--version", "99")
		if strings.Contains(r.stderr, "_versions/") {
			t.Fatalf("%s --version 99 shows the manifest key: %q", cmd, r.stderr)
		}
	}
	e.fails(1, []string{"table not found", "nosuch_qver"}, "query", "nosuch_qver", "--version", "3")
	if out := e.ok("query", tbl, "--version", "5", "--format", "csv"); out != "a\n1\n1\n1\n1\n" {
		t.Fatalf("version 5: %q", out)
	}
}

// TestImportUsageTableOptional: the usage line shows --table as optional (it defaults to
// the file name), and an import without it goes into the table named after the file.
func TestImportUsageTableOptional(t *testing.T) {
	e := sharedEnv(t)
	help := e.ok("import", "--help")
	if !strings.Contains(help, "shale import FILE [--table TABLE]") || strings.Contains(help, "import FILE --table TABLE") {
		t.Fatalf("import usage:\n%s", help)
	}
	tbl := e.table("imp")
	out := e.ok("import", e.file(tbl+".csv", "a\n1\n"))
	if !strings.Contains(out, "Created "+tbl) {
		t.Fatalf("import without --table: %q", out)
	}
}

// statusOf returns the status --json row of table.
func (e *env) statusOf(table string) (row statusRow, sidecars []statusSidecar) {
	e.t.Helper()
	var st struct {
		Tables   []statusRow     `json:"tables"`
		Sidecars []statusSidecar `json:"sidecars"`
	}
	if err := json.Unmarshal([]byte(e.ok("status", "--json")), &st); err != nil {
		e.t.Fatal(err)
	}
	for _, s := range st.Sidecars {
		if s.Table == table {
			sidecars = append(sidecars, s)
		}
	}
	for _, r := range st.Tables {
		if r.Table == table {
			return r, sidecars
		}
	}
	e.t.Fatalf("status --json lacks %s", table)
	return
}

// statusLine returns the line of `shale status` for table.
func (e *env) statusLine(out, table string) string {
	e.t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, table+" ") {
			return l
		}
	}
	e.t.Fatalf("status lacks %s:\n%s", table, out)
	return ""
}

// TestStatusShowsSidecarsAndHolds: a compaction killed after its publish leaves HEAD =
// published with its sidecar not deleted and its hold alive until the lease expires.
// status must not call that "in sync", nor the operation running: its holder is a
// process of this host that has exited, so the sidecar is pending, with the hint to run
// recover (which resolves it at once); after recover, in sync.
func TestStatusShowsSidecarsAndHolds(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("stsc")
	csv := e.file("s.csv", "a,b\n1,x\n2,y\n")
	for i := range 3 {
		e.ok("import", csv, "--table", tbl, "--idempotency-key", fmt.Sprint(i))
	}
	e.killedAt("compaction.after_publish", "compact", tbl)

	row, scs := e.statusOf(tbl)
	if row.Head != 5 || row.Published != 5 || row.Drift != 0 || row.PendingSidecars != 1 || row.RunningOperations != 0 ||
		len(row.Holds) != 1 || row.Holds[0].Kind != "compaction" || len(scs) != 1 || scs[0].Running || !scs[0].Exited ||
		scs[0].Operation != row.Holds[0].ID || strings.Contains(row.State, "in sync") || strings.Contains(row.State, "running") {
		t.Fatalf("status --json with a dead holder's hold: %+v, sidecars %+v", row, scs)
	}
	out := e.ok("status")
	if l := e.statusLine(out, tbl); strings.Contains(l, "in sync") || !strings.Contains(l, "1 hold") || strings.Contains(l, "(s)") ||
		!strings.Contains(l, "1 recovery sidecar pending") || !strings.Contains(l, "1 maintenance operation whose process exited") {
		t.Fatalf("status with a dead holder's hold:\n%s", out)
	}
	if !strings.Contains(out, tbl+": compaction "+row.Holds[0].ID) || !strings.Contains(out, "which has exited") {
		t.Fatalf("status does not list the hold as its holder's exited:\n%s", out)
	}
	if !strings.Contains(out, "run 'shale recover") || !strings.Contains(out, scs[0].Key) {
		t.Fatalf("status gives no recover hint:\n%s", out)
	}

	if out := e.ok("recover", tbl); !strings.Contains(out, tbl) || !strings.Contains(out, "released the hold") {
		t.Fatalf("recover: %s", out)
	}
	if row, scs = e.statusOf(tbl); row.PendingSidecars != 0 || len(scs) != 0 || len(row.Holds) != 0 || row.State != "in sync" {
		t.Fatalf("status after recover: %+v, sidecars %+v", row, scs)
	}
}

// TestStatusChecksThePublishedManifest: a published manifest that is not the object its
// pointer's checksum names (the pointer's checksum changed, or the object damaged) is
// corruption: status says so for that table, fails (exit 1) after printing the rest, and
// never calls it "in sync".
func TestStatusChecksThePublishedManifest(t *testing.T) {
	e := freshEnv(t)
	good, bad := e.table("good"), e.table("badsum")
	for _, tbl := range []string{good, bad} {
		e.ok("import", e.file("s.csv", "a\n1\n"), "--table", tbl)
	}
	// Change the checksum the pointer records.
	c, err := coord.Connect(context.Background(), coord.Config{StateDir: e.home})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	r, err := c.Etcd().Get(ctx, "/shale/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	changed := 0
	for _, kv := range r.Kvs {
		if !strings.HasSuffix(string(kv.Key), "/tables/"+bad) {
			continue
		}
		var p map[string]any
		if err := json.Unmarshal(kv.Value, &p); err != nil {
			t.Fatal(err)
		}
		for k, v := range p {
			if strings.Contains(strings.ToLower(k), "checksum") {
				p[k] = v.(float64) + 1
				changed++
			}
		}
		b, _ := json.Marshal(p)
		if _, err := c.Etcd().Put(ctx, string(kv.Key), string(b)); err != nil {
			t.Fatal(err)
		}
	}
	if changed != 1 {
		t.Fatalf("changed %d checksum fields of %s's pointer", changed, bad)
	}
	res := e.run("status")
	if res.code != 1 || !strings.Contains(e.statusLine(res.stdout, bad), "CORRUPT") || !strings.Contains(e.statusLine(res.stdout, good), "in sync") ||
		!strings.Contains(res.stderr, bad) || !strings.Contains(res.stderr, "checksum") {
		t.Fatalf("status with a pointer whose checksum does not match: %v", res)
	}
}

// TestErrorsNameColumnsOnceWithOnePrefix (issue 9 item 14): an unknown column in
// --columns or --set lists the table's columns once and does not speak of a filter no
// one gave; a division by zero in WHERE or SET is one line with one table prefix and the
// expression, not three nested ones.
func TestErrorsNameColumnsOnceWithOnePrefix(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("errwords")
	e.ok("import", e.file("errwords.csv", "id,name,x\n1,a,0\n2,b,3\n"), "--table", tbl)
	const cols = "(columns: id, name, x)"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"query", tbl, "--columns", "nope"}, `table "` + tbl + `": unknown column nope ` + cols},
		{[]string{"query", tbl, "--columns", "id,nope", "--where", "id = 1"}, `table "` + tbl + `": unknown column nope ` + cols},
		{[]string{"export", tbl, "--columns", "nope", "--format", "csv", "-o", filepath.Join(e.dir, "errwords.out")}, "unknown column nope " + cols},
		{[]string{"update", tbl, "--set", "nope=1", "--where", "true"}, `table "` + tbl + `": SET: unknown column nope ` + cols},
		{[]string{"query", tbl, "--where", "nope = 1"}, `table "` + tbl + `": WHERE "nope = 1": unknown column nope ` + cols},
		{[]string{"query", tbl, "--where", "id DIV x > 1"}, `shale: error: table "` + tbl + `": WHERE "id DIV x > 1": division by zero in id DIV x (1 DIV 0)` + "\n"},
		{[]string{"update", tbl, "--set", "id=id DIV x", "--where", "true"}, `shale: error: table "` + tbl + `": SET id = id DIV x: division by zero in id DIV x (1 DIV 0)` + "\n"},
	} {
		r := e.fails(1, []string{c.want}, c.args...)
		if n := strings.Count(r.stderr, "columns:"); n > 1 {
			t.Errorf("shale %q lists the columns %d times: %q", c.args, n, r.stderr)
		}
		if n := strings.Count(r.stderr, `table "`); n != 1 {
			t.Errorf("shale %q names the table %d times: %q", c.args, n, r.stderr)
		}
		if strings.Contains(r.stderr, "filter") {
			t.Errorf("shale %q speaks of a filter: %q", c.args, r.stderr)
		}
		if strings.HasSuffix(c.want, "\n") && r.stderr != c.want {
			t.Errorf("shale %q: stderr %q, want exactly %q", c.args, r.stderr, c.want)
		}
	}
	// Nothing changed.
	if out := e.ok("query", tbl, "--count"); !strings.HasPrefix(out, "2 rows") {
		t.Fatalf("after the refused commands: %q", out)
	}
}
