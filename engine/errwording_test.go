package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/shale-db/shale/engine/filter"
)

// TestErrorsNameTheColumnListOnceAndSayFilterOnlyForWhere pins the wording of errors about
// column names and arithmetic (issue 9 item 14): the schema's columns are listed once, the
// word "filter" appears nowhere (a column list or a SET is not a filter), and a division by
// zero has one prefix saying where it happened, not three nested ones.
func TestErrorsNameTheColumnListOnceAndSayFilterOnlyForWhere(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "words", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 10)
	scan := func(opts ScanOptions) error {
		sc, err := tbl.Scan(ctx, opts)
		if err != nil {
			return err
		}
		defer sc.Release()
		for sc.Next() {
		}
		return sc.Err()
	}
	_, updateUnknown := tbl.Update(ctx, map[string]string{"nope": "1"}, "id = 1")
	_, updateDiv := tbl.Update(ctx, map[string]string{"id": "id DIV 0"}, "id = 1")
	_, deleteDiv := tbl.Delete(ctx, "id / 0 > 1")
	_, indexUnknown := tbl.CreateIndex(ctx, IndexSpec{Columns: []string{"nope"}})
	_, countUnknown := tbl.Count(ctx, "nope = 1")
	cases := []struct {
		name  string
		err   error
		class error
		want  string
	}{
		{"unknown column in the column list", scan(ScanOptions{Columns: []string{"id", "nope"}}), filter.ErrUnknownColumn,
			`table "words": unknown column nope (columns: id, name)`},
		{"unknown column in WHERE", scan(ScanOptions{Filter: "nope > 1"}), filter.ErrUnknownColumn,
			`table "words": WHERE "nope > 1": unknown column nope (columns: id, name)`},
		{"unknown column counted", countUnknown, filter.ErrUnknownColumn,
			`table "words": WHERE "nope = 1": unknown column nope (columns: id, name)`},
		{"unknown column in SET", updateUnknown, filter.ErrUnknownColumn,
			`table "words": SET: unknown column nope (columns: id, name)`},
		{"unknown index column", indexUnknown, filter.ErrUnknownColumn,
			`table "words": index: unknown column nope (columns: id, name)`},
		{"division by zero in WHERE", scan(ScanOptions{Filter: "id / 0 > 1"}), filter.ErrArithmetic,
			`table "words": WHERE "id / 0 > 1": division by zero in id / 0`},
		{"integer division by zero in WHERE", scan(ScanOptions{Filter: "id DIV 0 > 1"}), filter.ErrArithmetic,
			`table "words": WHERE "id DIV 0 > 1": division by zero in id DIV 0 (0 DIV 0)`},
		{"division by zero in a delete", deleteDiv, filter.ErrArithmetic,
			`table "words": WHERE "id / 0 > 1": division by zero in id / 0`},
		{"division by zero in SET", updateDiv, filter.ErrArithmetic,
			`table "words": SET id = id DIV 0: division by zero in id DIV 0 (1 DIV 0)`},
		{"overflow in WHERE", scan(ScanOptions{Filter: "id + 9223372036854775807 > 1"}), filter.ErrArithmetic,
			`table "words": WHERE "id + 9223372036854775807 > 1": integer overflow in id + 9223372036854775807 (1 + 9223372036854775807)`},
		{"syntax error", scan(ScanOptions{Filter: "id >"}), filter.ErrSyntax,
			`table "words": WHERE "id >": syntax error at column 4 of "id >", at the end`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.err == nil {
				t.Fatalf("no error; want %q", c.want)
			}
			if !errors.Is(c.err, c.class) {
				t.Errorf("%v: not %v", c.err, c.class)
			}
			if got := c.err.Error(); got != c.want {
				t.Errorf("error\n got  %s\n want %s", got, c.want)
			}
		})
	}
}
