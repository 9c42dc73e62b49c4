package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeUsingIt returns the command lines of README.md's "## Using it" sh block, their
// trailing comments removed.
func readmeUsingIt(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Using it\n")
	if !ok {
		t.Fatal(`README.md has no "## Using it" section`)
	}
	_, block, ok := strings.Cut(sec, "\n```sh\n")
	if !ok {
		t.Fatal(`"Using it" has no sh block`)
	}
	block, _, _ = strings.Cut(block, "\n```\n")
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		l = stripComment(l)
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// stripComment removes a trailing " # comment" outside double quotes.
func stripComment(l string) string {
	quoted := false
	for i, r := range l {
		switch {
		case r == '"':
			quoted = !quoted
		case r == '#' && !quoted && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
			return l[:i]
		}
	}
	return l
}

// shellWords splits a README command line as sh does for these simple lines: words
// separated by blanks, "…" quoting, and a final "> FILE" redirect.
func shellWords(t *testing.T, line string) (words []string, redirect string) {
	t.Helper()
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quotes in README line %q", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	if n := len(words); n >= 2 && words[n-2] == ">" {
		return words[:n-2], words[n-1]
	}
	return words, ""
}

// TestREADMEUsingItRunsInOrderAfterTheDemo (SHALE_DEMO_TEST=1; it imports the 3M rows)
// runs the demo on a fresh state directory, then every command of README.md's "Using it"
// block in order, as written: each succeeds, prints a few lines (none prints the
// table), does what its comment says (the delete deletes 41,483 rows, the count after
// the update is 0, the second import writes nothing, compaction makes version 6, gc
// expires versions 1-3), and no line says "1 rows" or shows a count of thousands without
// separators (issue 9 item 18).
func TestREADMEUsingItRunsInOrderAfterTheDemo(t *testing.T) {
	if testing.Short() || os.Getenv("SHALE_DEMO_TEST") == "" {
		t.Skip("set SHALE_DEMO_TEST=1 (and no -short) to run the demo and the README's commands")
	}
	data, err := filepath.Abs(filepath.Join("..", "..", "testdata", "flights-3m.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	e := freshEnv(t)
	e.ok("demo", "--data", data)
	lines := readmeUsingIt(t)
	if len(lines) < 15 || lines[0] != "go build -o shale ./cmd/shale" {
		t.Fatalf("README's Using it block: %q", lines)
	}
	says := map[string][]string{
		"./shale status":                                     {"flights", "in sync"},
		"./shale versions flights":                           {"create", "append", "delete", "3,000,000", "2,833,659"},
		"./shale delete flights --where":                     {"Deleted 41,483 rows from flights: version 4"},
		"./shale update flights --set":                       {"rows of flights: version 5"},
		"./shale query flights --count":                      {"0 rows (version 5"},
		"./shale query flights --version 2":                  {"(5 rows, version 2"},
		"./shale export sfo -o sfo.parquet":                  {"Exported", "sfo.parquet (parquet"},
		"./shale compact flights --dry-run":                  {"nothing written (--dry-run)"},
		"./shale compact flights":                            {"Compacted flights: version 6"},
		"./shale verify":                                     {"no faults"},
		"./shale recover":                                    {"No recovery sidecars"},
		"./shale repair":                                     {"No drift"},
		"./shale gc flights --keep-last 3":                   {"expired 3 versions (v1–v3)"},
		"./shale drop sfo":                                   {"Dropped sfo"},
		"./shale doctor":                                     {"all checks passed"},
		"./shale inspect sfo":                                {"Table sfo, version 2"},
		"./shale query flights --where \"origin = 'SFO' AND": {"(10 rows, version 3"},
	}
	// A count of 1,000 or more printed without separators (in lines that count rows),
	// not part of a date, a time, a ULID or a key.
	bare := regexp.MustCompile(`(^|[\s(])\d{4,}([\s),.]|$)`)
	imports := 0
	for _, line := range lines[1:] {
		words, redirect := shellWords(t, line)
		if words[0] != "./shale" {
			t.Fatalf("README line %q does not run ./shale", line)
		}
		start := time.Now()
		r := e.run(words[1:]...)
		t.Logf("$ %s  [%s]\n%s%s", line, time.Since(start).Round(time.Millisecond), r.stdout, r.stderr)
		if r.code != 0 {
			t.Fatalf("README line %q: %v", line, r)
		}
		out := r.stdout
		if redirect != "" {
			if err := os.WriteFile(filepath.Join(e.dir, redirect), []byte(r.stdout), 0o644); err != nil {
				t.Fatal(err)
			}
			out = ""
		}
		if n := strings.Count(out, "\n"); n > 30 {
			t.Errorf("README line %q prints %d lines (a few are meant)", line, n)
		}
		if strings.Contains(out, " 1 rows") || strings.Contains(out, " 1 fragments") || strings.Contains(out, "(1 rows") {
			t.Errorf("README line %q: %q", line, out)
		}
		for _, l := range strings.Split(out, "\n") {
			if !strings.Contains(l, "row") { // counts of rows; column statistics are data
				continue
			}
			if m := bare.FindString(l); m != "" && !regexp.MustCompile(`\d{4}-\d{2}-\d{2}`).MatchString(l) {
				t.Errorf("README line %q: a count without separators (%q) in %q", line, m, l)
			}
		}
		if strings.HasPrefix(line, "./shale import sfo.csv") {
			imports++
			want := "Created sfo and imported 60,852 rows"
			if imports == 2 {
				want = "Already imported"
			}
			if !strings.Contains(out, want) {
				t.Errorf("README line %q (run %d): lacks %q", line, imports, want)
			}
		}
		for prefix, wants := range says {
			if strings.HasPrefix(line, prefix) && (prefix != "./shale compact flights" || !strings.Contains(line, "--dry-run")) &&
				(prefix != "./shale query flights --where \"origin = 'SFO' AND" || redirect == "") {
				for _, w := range wants {
					if !strings.Contains(out, w) {
						t.Errorf("README line %q: output lacks %q:\n%s", line, w, out)
					}
				}
			}
		}
	}
	if csv, err := os.ReadFile(filepath.Join(e.dir, "sfo.csv")); err != nil || strings.Count(string(csv), "\n") != 60853 {
		t.Fatalf("sfo.csv: %d lines, %v", strings.Count(string(csv), "\n"), err)
	}
}
