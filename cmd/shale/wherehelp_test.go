package main

import (
	"os"
	"strings"
	"testing"
)

// TestWhereDialectIsInTheHelpOfEveryCommandWithWhere: query, delete, update and export
// --help say that the dialect is MySQL's (|| is OR, double quotes make strings, a reserved
// word such as key needs backquotes) and point at docs/where.md, which exists.
func TestWhereDialectIsInTheHelpOfEveryCommandWithWhere(t *testing.T) {
	e := sharedEnv(t)
	for _, cmd := range []string{"query", "delete", "update", "export"} {
		help := e.ok(cmd, "--help")
		for _, want := range []string{"MySQL's dialect", "TiDB parser", "|| is OR", `"double quotes" make a string`,
			"needs backquotes: `key` = 'a'", "at >= '2001-01-01' AND at < '2001-04-01'", "See docs/where.md."} {
			if !strings.Contains(help, want) {
				t.Errorf("shale %s --help does not say %q", cmd, want)
			}
		}
	}
	if _, err := os.Stat(repoFile("docs", "where.md")); err != nil {
		t.Fatal(err)
	}
	// The error for an unquoted reserved word says what to write.
	tbl := e.table("kw")
	e.ok("import", e.file("kw.csv", "id,key\n1,a\n2,b\n"), "--table", tbl)
	e.fails(exitError, []string{"key is a reserved word", "`key`"}, "query", tbl, "--where", "key = 'a'")
	if out := e.ok("query", tbl, "--where", "`key` = \"a\" || id = 2", "--format", "csv"); out != "id,key\n1,a\n2,b\n" {
		t.Errorf("backquoted key, double-quoted string, ||: %q", out)
	}
}
