package filter

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// sqlBlocks returns the lines of each ```sql block of a Markdown file, in order.
func sqlBlocks(t *testing.T, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks [][]string
	var cur []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```sql":
			in, cur = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			blocks = append(blocks, cur)
		case in && strings.TrimSpace(line) != "":
			cur = append(cur, line)
		}
	}
	return blocks
}

// TestWhereDocExamplesParse: docs/where.md, the user's page on the WHERE dialect, shows
// expressions that parse (its first sql block) and expressions that are refused (its
// second), against the schema it names; the reserved-word refusal says how to quote.
func TestWhereDocExamplesParse(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "origin", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "key", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "delay", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
		{Name: "raw", Type: arrow.BinaryTypes.Binary, Nullable: true},
	}, nil)
	blocks := sqlBlocks(t, filepath.Join("..", "..", "docs", "where.md"))
	if len(blocks) != 2 || len(blocks[0]) < 10 || len(blocks[1]) < 3 {
		t.Fatalf("docs/where.md: want two sql blocks (accepted, refused), got %d", len(blocks))
	}
	for _, w := range blocks[0] {
		if _, err := Parse(w, schema); err != nil {
			t.Errorf("documented as accepted: %q: %v", w, err)
		}
	}
	for _, w := range blocks[1] {
		if _, err := Parse(w, schema); err == nil {
			t.Errorf("documented as refused: %q parses", w)
		}
	}
	_, err := Parse("key = 'a'", schema)
	if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), "key is a reserved word: a column of that name is written in backquotes, `key`") {
		t.Errorf("unquoted reserved word: %v", err)
	}
}
