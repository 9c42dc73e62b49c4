package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestTableOutputKeepsEachRowsStrings: the table output holds its first rows back to size
// its columns, while the scan goes on and reuses the memory of released batches; every
// row held back still prints its own strings (found by this session's fresh-user trial:
// rows of earlier batches printed later batches' values). Batches of 200 rows of 540-byte
// strings decode to more than 64 KiB each, so they are pooled; 2,000 rows stay under the
// 1,000 rows held back only in part, which makes both paths print.
func TestTableOutputKeepsEachRowsStrings(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("tableout")
	doc := func(id int) string { return strings.Repeat(fmt.Sprintf("row%05d-", id), 60) }
	for part := range 10 {
		var b strings.Builder
		b.WriteString("id,doc\n")
		for r := range 200 {
			id := part*200 + r
			fmt.Fprintf(&b, "%d,%s\n", id, doc(id))
		}
		e.ok("import", e.file(fmt.Sprintf("part%d.csv", part), b.String()), "--table", tbl)
	}
	out := e.ok("query", tbl)
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || f[0] == "id" || strings.HasPrefix(f[0], "-") {
			continue
		}
		var id int
		if _, err := fmt.Sscan(f[0], &id); err != nil {
			continue
		}
		rows++
		if f[1] != doc(id) {
			t.Fatalf("row %d printed another row's doc: %.30s…", id, f[1])
		}
	}
	if rows != 2000 {
		t.Fatalf("%d rows printed, want 2000:\n%.2000s", rows, out)
	}
}
