package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// killedAt runs shale args with SHALE_FAILPOINTS=seam=kill and fails unless the process
// was killed.
func (e *env) killedAt(seam string, args ...string) {
	e.t.Helper()
	cmd := exec.Command(shaleBin, args...)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "SHALE_HOME="+e.home, "SHALE_ETCD_IDLE=20s", "SHALE_FAILPOINTS="+seam+"=kill")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != -1 {
		e.t.Fatalf("shale %q was not killed at %s: %v\n%s", args, seam, err, out)
	}
}

// TestRepairCLI: drift left by writers killed between commit and publish. Logical drift
// (an import) is previewed with exit 0, refused by --confirm, published by --force
// --confirm. Maintenance drift named by a compaction's sidecar is refused even with
// --force (recover's work); once no sidecar names it, --confirm publishes it. Rows are
// the expected ones and verify passes after each.
func TestRepairCLI(t *testing.T) {
	e := freshEnv(t)
	csv := e.file("r.csv", "a,b\n1,x\n2,y\n")

	logical := e.table("logical")
	e.ok("import", csv, "--table", logical)
	before := e.ok("query", logical, "--format", "csv")
	e.killedAt("engine.before_publish", "import", csv, "--table", logical, "--idempotency-key", "again")
	if out := e.ok("repair", logical); !strings.Contains(out, "append") || !strings.Contains(out, "logical") ||
		!strings.Contains(out, "1 unpublished") || !strings.Contains(out, "--force --confirm") {
		t.Fatalf("preview:\n%s", out)
	}
	var out struct {
		Tables []struct {
			Table    string `json:"table"`
			Decision string `json:"decision"`
			Target   uint64 `json:"target"`
			Versions []struct {
				Version uint64 `json:"version"`
				Kind    string `json:"kind"`
				Class   string `json:"class"`
			} `json:"versions"`
			Repaired bool `json:"repaired"`
		} `json:"tables"`
	}
	if err := json.Unmarshal([]byte(e.ok("repair", logical, "--json")), &out); err != nil {
		t.Fatal(err)
	}
	plans := out.Tables
	if len(plans) != 1 || plans[0].Decision != "needs-force" || plans[0].Target != 3 || plans[0].Repaired ||
		len(plans[0].Versions) != 1 || plans[0].Versions[0].Class != "logical" || plans[0].Versions[0].Kind != "append" {
		t.Fatalf("preview --json: %+v", plans)
	}
	// The refusal is printed once: the error on stderr; stdout says only what to do next.
	r := e.fails(1, []string{logical, "logical drift", "append"}, "repair", logical, "--confirm")
	if strings.Count(r.stdout+r.stderr, "is a logical append") != 1 ||
		!strings.Contains(r.stdout, "refused: logical drift: 'shale repair "+logical+" --force --confirm'") {
		t.Fatalf("refusal printed twice or without the next step:\n%v", r)
	}
	if got := e.ok("query", logical, "--format", "csv"); got != before {
		t.Fatalf("refused repair changed the rows:\n%s", got)
	}
	if out := e.ok("repair", logical, "--force", "--confirm"); !strings.Contains(out, "published version 3") {
		t.Fatalf("force confirm:\n%s", out)
	}
	if got := e.ok("query", logical, "--format", "csv"); strings.Count(got, "\n") != 5 {
		t.Fatalf("after repair, want the header and 4 rows:\n%s", got)
	}
	e.ok("verify", logical)
	if out := e.ok("repair", logical, "--confirm"); !strings.Contains(out, "no drift") {
		t.Fatalf("second repair:\n%s", out)
	}

	maint := e.table("maint")
	for i := range 3 {
		e.ok("import", csv, "--table", maint, "--idempotency-key", fmt.Sprint(i))
	}
	want := e.ok("query", maint, "--format", "csv")
	e.killedAt("compaction.before_publish", "compact", maint)
	r = e.fails(1, []string{maint, "sidecar", "run recover"}, "repair", maint, "--force", "--confirm")
	if strings.Count(r.stdout+r.stderr, "is named by sidecar") != 1 ||
		!strings.Contains(r.stdout, "refused: a recovery sidecar covers this drift: run 'shale recover "+maint+"'") {
		t.Fatalf("refusal printed twice or without the next step:\n%v", r)
	}
	if out := e.ok("repair", maint); !strings.Contains(out, "rewrite") || !strings.Contains(out, "named by sidecar") ||
		!strings.Contains(out, "shale recover") {
		t.Fatalf("preview with a sidecar:\n%s", out)
	}
	// Lose the sidecar (as if deleted by hand): the same drift is now repair's.
	sidecars, err := filepath.Glob(filepath.Join(e.home, "store", "_recovery", "*.json"))
	if err != nil || len(sidecars) != 1 {
		t.Fatalf("sidecars %v, %v", sidecars, err)
	}
	if err := os.Remove(sidecars[0]); err != nil {
		t.Fatal(err)
	}
	if out := e.ok("repair"); !strings.Contains(out, maint) || !strings.Contains(out, "maintenance only") || strings.Contains(out, logical) {
		t.Fatalf("preview of every table:\n%s", out)
	}
	if out := e.ok("repair", maint, "--confirm"); !strings.Contains(out, "published version 5") {
		t.Fatalf("confirm:\n%s", out)
	}
	if got := e.ok("query", maint, "--format", "csv"); got != want {
		t.Fatalf("rows changed by compaction + repair:\n%s\nwant\n%s", got, want)
	}
	e.ok("verify", maint)
	if out := e.ok("repair"); !strings.Contains(out, "No drift") {
		t.Fatalf("after repair:\n%s", out)
	}
}
