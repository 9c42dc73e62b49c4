package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// usingItLine is one command line of README.md's "Using it" block and its comment.
type usingItLine struct{ cmd, comment string }

// readmeUsingIt returns the command lines of README.md's "## Using it" sh block, each
// with its trailing comment split off.
func readmeUsingIt(t *testing.T) []usingItLine {
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
	var lines []usingItLine
	for _, l := range strings.Split(block, "\n") {
		c := stripComment(l)
		if cmd := strings.TrimSpace(c); cmd != "" {
			lines = append(lines, usingItLine{cmd, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l[len(c):]), "#"))})
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
// table), does what its comment says (the version a "(version N)" or "in version N"
// comment names, the rows a delete's comment counts, "0 rows now", the versions gc
// "expires", the second import writing nothing), and no line says "1 rows" or shows a
// count of thousands without separators (issue 9 item 18).
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
	if len(lines) < 15 || lines[0].cmd != "go build -o shale ./cmd/shale" {
		t.Fatalf("README's Using it block: %q", lines)
	}
	// What a command's output must say, by the start of its line; the versions and counts
	// come from the README's own comments below.
	says := map[string][]string{
		"./shale status":                    {"flights", "in sync"},
		"./shale verify":                    {"no faults"},
		"./shale recover":                   {"No recovery sidecars"},
		"./shale repair":                    {"No drift"},
		"./shale drop sfo":                  {"Dropped sfo"},
		"./shale doctor":                    {"all checks passed"},
		"./shale export sfo -o sfo.parquet": {"Exported", "sfo.parquet (parquet"},
		"./shale inspect sfo":               {"Table sfo, version 2"},
		"./shale versions flights":          {"create", "append", "delete", "3,000,000"},
	}
	inVersion := regexp.MustCompile(`(?:in version|\(version) (\d+)\)?`)
	expires := regexp.MustCompile(`expires versions 1-(\d+)`)
	deletes := regexp.MustCompile(`^(\d[\d,]*) `)
	// A count of 1,000 or more printed without separators (in lines that count rows),
	// not part of a date, a time, a ULID or a key.
	bare := regexp.MustCompile(`(^|[\s(])\d{4,}([\s),.]|$)`)
	imports := 0
	pending := map[string]string{} // a --dry-run line's "(version N)": what the real run commits
	for _, l := range lines[1:] {
		line := l.cmd
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
		var want []string
		for prefix, w := range says {
			if line == prefix || strings.HasPrefix(line, prefix+" ") {
				want = append(want, w...)
			}
		}
		dry := strings.Contains(line, " --dry-run")
		if m := inVersion.FindStringSubmatch(l.comment); m != nil {
			if dry {
				pending[strings.Replace(line, " --dry-run", "", 1)] = "version " + m[1]
				want = append(want, "nothing written (--dry-run)")
			} else {
				want = append(want, "version "+m[1])
			}
		}
		if v, ok := pending[line]; ok {
			want = append(want, v)
			delete(pending, line)
		}
		if m := expires.FindStringSubmatch(l.comment); m != nil {
			want = append(want, fmt.Sprintf("expired %s versions (v1–v%s)", m[1], m[1]))
		}
		if words[1] == "delete" {
			if m := deletes.FindStringSubmatch(l.comment); m != nil {
				want = append(want, "Deleted "+m[1]+" rows")
			}
		}
		if strings.Contains(l.comment, "0 rows now") {
			want = append(want, "0 rows (version ")
		}
		if strings.HasPrefix(line, "./shale import sfo.csv") {
			imports++
			if imports == 1 {
				want = append(want, "Created sfo and imported 60,852 rows")
			} else {
				want = append(want, "Already imported")
			}
		}
		if words[1] == "query" && redirect == "" && !strings.Contains(line, "--explain") && !strings.Contains(line, "--count") {
			if n := strings.Count(out, "\n"); n < 3 {
				t.Errorf("README line %q printed no rows:\n%s", line, out)
			}
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("README line %q (# %s): output lacks %q:\n%s", line, l.comment, w, out)
			}
		}
		if n := strings.Count(out, "\n"); n > 30 {
			t.Errorf("README line %q prints %d lines (a few are meant)", line, n)
		}
		if strings.Contains(out, " 1 rows") || strings.Contains(out, " 1 fragments") || strings.Contains(out, "(1 rows") {
			t.Errorf("README line %q: %q", line, out)
		}
		for _, ol := range strings.Split(out, "\n") {
			if !strings.Contains(ol, "row") { // counts of rows; column statistics are data
				continue
			}
			if m := bare.FindString(ol); m != "" && !regexp.MustCompile(`\d{4}-\d{2}-\d{2}`).MatchString(ol) {
				t.Errorf("README line %q: a count without separators (%q) in %q", line, m, ol)
			}
		}
	}
	if len(pending) != 0 {
		t.Errorf("no README line ran what these --dry-run lines announce: %v", pending)
	}
	if csv, err := os.ReadFile(filepath.Join(e.dir, "sfo.csv")); err != nil || strings.Count(string(csv), "\n") != 60853 {
		t.Fatalf("sfo.csv: %d lines, %v", strings.Count(string(csv), "\n"), err)
	}
}
