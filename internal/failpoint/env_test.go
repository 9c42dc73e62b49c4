package failpoint_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/shale-db/shale/internal/failpoint"
)

func TestParseSpec(t *testing.T) {
	cases := []struct {
		spec string
		want []string // name=Action.String() per entry
	}{
		{"a.b=kill", []string{"a.b=kill"}},
		{" a=count ; b/c = error(disk full) ;; ", []string{"a=count", "b/c=error(disk full)"}},
		{"x=after(2)->kill", []string{"x=after(2)->kill"}},
		{"x=2*error(e)", []string{"x=2*error(e)"}},
		{"x=once->panic(p)", []string{"x=1*panic(p)"}},
		{"x=after(1) -> times(3) -> sleep(50ms)", []string{"x=after(1)->3*sleep(50ms)"}},
		{"x=after(1)->2*exit(3)", []string{"x=after(1)->2*exit(3)"}},
		{"x=error(a->b=c*d)", []string{"x=error(a->b=c*d)"}},
		{"x=block(/tmp/go)", []string{"x=block(/tmp/go)"}},
		{"x=error", []string{"x=error(injected error)"}},
		{"x=panic", []string{"x=panic"}},
		{"", nil},
	}
	for _, c := range cases {
		entries, err := failpoint.ParseSpec(c.spec)
		if err != nil {
			t.Errorf("ParseSpec(%q): %v", c.spec, err)
			continue
		}
		var got []string
		for _, e := range entries {
			got = append(got, e.Name+"="+e.Action.String())
		}
		if strings.Join(got, ";") != strings.Join(c.want, ";") {
			t.Errorf("ParseSpec(%q) = %q, want %q", c.spec, got, c.want)
		}
		// String is spec syntax: it parses back to the same action.
		for _, g := range got {
			back, err := failpoint.ParseSpec(g)
			if err != nil || len(back) != 1 || back[0].Name+"="+back[0].Action.String() != g {
				t.Errorf("ParseSpec(%q) (round trip) = %v, %v", g, back, err)
			}
		}
	}
}

func TestParseSpecErrors(t *testing.T) {
	cases := []struct{ spec, reason string }{
		{"x", "want name=action"},
		{"=kill", "empty seam name"},
		{"x y=kill", "not allowed"},
		{"x=slep(5ms)", `unknown action "slep" (want count, kill`},
		{"x=sleep(5)", "want a Go duration"},
		{"x=sleep", "sleep needs an argument"},
		{"x=exit(300)", "want a status code 0-255"},
		{"x=exit", "exit needs an argument"},
		{"x=kill(3)", "kill takes no argument"},
		{"x=after(-1)->kill", "after(-1): want a count ≥ 0"},
		{"x=times(0)->kill", "times(0): want a count ≥ 1"},
		{"x=0*kill", `"0" before '*': want a count ≥ 1`},
		{"x=once->2*kill", "more than one of once"},
		{"x=after(1)->after(2)->kill", "after(N) given twice"},
		{"x=kill;x=count", `seam "x" appears twice`},
		{"x=error(oops", "missing ')'"},
		{"x=", "missing action"},
		{"x=after(2)->", "missing action"},
	}
	for _, c := range cases {
		_, err := failpoint.ParseSpec("ok=count;" + c.spec)
		var se *failpoint.SpecError
		if !errors.As(err, &se) {
			t.Errorf("ParseSpec(%q) = %v, want a *SpecError", c.spec, err)
			continue
		}
		// The error names the offending entry (not the good one before it) and the reason.
		if se.Entry == "" || !strings.Contains(c.spec, se.Entry) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("ParseSpec(%q) error %q (entry %q): want it to name the bad entry and say %q", c.spec, err, se.Entry, c.reason)
		}
	}
}

func TestEnableSpec(t *testing.T) {
	p := seamName(t)
	disable, err := failpoint.EnableSpec(p.Name() + "=after(1)->error(lost);" + seamB.Name() + "=count")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Inject(bg); err != nil {
		t.Fatalf("first hit: %v", err)
	}
	if err := p.Inject(bg); err == nil || err.Error() != "failpoint "+p.Name()+": lost" {
		t.Fatalf("second hit: %v, want the spec's error", err)
	}
	seamB.Inject(bg)
	if h := failpoint.Hits(seamB.Name()); h != 1 {
		t.Fatalf("count seam Hits = %d, want 1", h)
	}
	disable()
	if len(failpoint.Enabled()) != 0 {
		t.Fatalf("after disable, Enabled() = %v", failpoint.Enabled())
	}
	if _, err := failpoint.EnableSpec(p.Name() + "=kill;bad=nope"); err == nil {
		t.Fatal("EnableSpec accepted a bad entry")
	}
	if len(failpoint.Enabled()) != 0 {
		t.Fatalf("a failed EnableSpec enabled %v", failpoint.Enabled())
	}
}
