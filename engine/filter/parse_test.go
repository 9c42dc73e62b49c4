package filter

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// flightsSchema is the schema of /work/shared/data/flights-3m.parquet as
// arrow-go's pqarrow reads it.
func flightsSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "date", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
		{Name: "delay", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "distance", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "origin", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "destination", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	}, nil)
}

func TestParseErrors(t *testing.T) {
	schema := flightsSchema()
	odd := arrow.NewSchema([]arrow.Field{
		{Name: "Ab", Type: arrow.PrimitiveTypes.Int64},
		{Name: "aB", Type: arrow.PrimitiveTypes.Int64},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String)},
	}, nil)
	bin := arrow.NewSchema([]arrow.Field{
		{Name: "b", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "fb", Type: &arrow.FixedSizeBinaryType{ByteWidth: 2}, Nullable: true},
	}, nil)
	cases := []struct {
		where  string
		schema *arrow.Schema
		want   error
		msg    []string // substrings the message must contain
	}{
		{"delay >", nil, ErrSyntax, []string{"column 7", "at the end"}},
		{"a = = 1", nil, ErrSyntax, []string{"column 5", `near "= 1"`}},
		{"delay > 1 AND", nil, ErrSyntax, []string{"at the end"}},
		{"(delay > 1", nil, ErrSyntax, nil},
		{"delay > 1)", nil, ErrSyntax, []string{`near ")"`}},
		{"delay >\n  AND origin = 'x'", nil, ErrSyntax, []string{"line 2"}},
		{"", nil, ErrSyntax, []string{"empty"}},
		{"   ", nil, ErrSyntax, []string{"empty"}},
		{"delay > 1; DROP TABLE t", nil, ErrSyntax, []string{"2 statements"}},
		{"1; DELETE FROM t", nil, ErrSyntax, []string{"2 statements"}},
		{"DROP TABLE t", nil, ErrSyntax, nil},
		{"delay > 1 ORDER BY delay", nil, ErrSyntax, []string{"clauses after", "ORDER BY"}},
		{"delay > 1 LIMIT 5", nil, ErrSyntax, []string{"LIMIT"}},
		{"delay > 1 GROUP BY origin", nil, ErrSyntax, []string{"GROUP BY"}},
		{"delay > 1 FOR UPDATE", nil, ErrSyntax, []string{"clauses after"}},
		{"delay > 1 INTO OUTFILE '/tmp/x'", nil, ErrSyntax, []string{"clauses after"}},
		{"delay > 1 /*! ORDER BY delay */", nil, ErrSyntax, []string{"ORDER BY"}},
		{"delay > 1 HAVING delay > 2", nil, ErrSyntax, []string{"HAVING"}},
		{"delay > 1 UNION SELECT * FROM u", nil, ErrSyntax, []string{"not a WHERE expression"}},
		{"DATE '2006-13-45' < date", nil, ErrSyntax, []string{"2006-13-45"}},
		{"date > TIMESTAMP 'noon'", nil, ErrSyntax, []string{"noon"}},
		{"dealy > 60", nil, ErrUnknownColumn, []string{"dealy", "delay", "origin"}},
		{"origin = 'SFO' AND dest = 'LAX'", nil, ErrUnknownColumn, []string{"dest"}},
		{"u.delay > 1", nil, ErrUnknownColumn, []string{"qualifier", `"u"`}},
		{"db.t.delay > 1", nil, ErrUnknownColumn, nil},
		{"ab = 1", odd, ErrUnknownColumn, []string{"several", "Ab", "aB"}},
		{"tags IS NULL", odd, ErrType, []string{"tags", "list"}},
		{"delay > 'abc'", nil, ErrType, []string{"'abc'", "delay", "int64", "not a number"}},
		{"delay IN (1, 'x')", nil, ErrType, []string{"'x'", "delay"}},
		{"origin > 5", nil, ErrType, []string{"origin", "string"}},
		{"origin IN ('a', 5)", nil, ErrType, []string{"origin"}},
		{"date > 'yesterday'", nil, ErrType, []string{"'yesterday'", "date", "timestamp"}},
		{"date > 5", nil, ErrType, []string{"date", "temporal"}},
		{"delay > DATE '2006-01-01'", nil, ErrType, []string{"delay", "number"}},
		{"delay", nil, ErrType, []string{"delay", "not boolean"}},
		{"'abc'", nil, ErrType, []string{"not a condition"}},
		{"delay > origin", nil, ErrType, []string{"delay", "origin"}},
		{"date = delay", nil, ErrType, []string{"date", "delay"}},
		{"origin LIKE 5", nil, ErrType, []string{"pattern"}},
		{"delay LIKE '5%'", nil, ErrType, []string{"delay", "string column"}},
		{"'a' = 1", nil, ErrType, []string{"'a'"}},
		{"delay + origin > 5", nil, ErrType, []string{"origin", "needs numbers"}},
		{"abs(delay) > 5", nil, ErrUnsupported, []string{"ABS"}},
		{"lower(origin) = 'sfo'", nil, ErrUnsupported, []string{"lower"}},
		{"delay IN (SELECT 1)", nil, ErrUnsupported, []string{"subquery"}},
		{"delay IN (distance, 1)", nil, ErrUnsupported, []string{"not a literal"}},
		{"delay > 1 XOR distance > 1", nil, ErrUnsupported, []string{"xor"}},
		{"delay <=> 1", nil, ErrUnsupported, nil},
		{"origin ILIKE 's%'", nil, ErrUnsupported, []string{"ILIKE"}},
		{"origin = x'41'", nil, ErrType, []string{"X'41'", "origin", "hex", "binary column"}},
		{"delay IN (1, 0x41)", nil, ErrType, []string{"X'41'", "delay", "binary column"}},
		{"b LIKE 'a%'", bin, ErrType, []string{"LIKE", "b", "binary", "BETWEEN"}},
		{"b NOT LIKE 'a%'", bin, ErrType, []string{"LIKE", "binary"}},
		{"b = 5", bin, ErrType, []string{"b", "binary column needs a string, hex or bit literal"}},
		{"b IN ('a', 5)", bin, ErrType, []string{"b", "binary"}},
		{"b > DATE '2006-01-01'", bin, ErrType, []string{"b", "binary"}},
		{"n = b", bin, ErrType, []string{"b", "n"}},
		{"b", bin, ErrType, []string{"b", "not boolean"}},
		{"X'01'", bin, ErrType, []string{"not a condition"}},
		{"fb IS NULL", bin, ErrType, []string{"fb", "fixed_size_binary"}},
		{"EXISTS (SELECT 1)", nil, ErrUnsupported, nil},
	}
	for _, c := range cases {
		s := c.schema
		if s == nil {
			s = schema
		}
		e, err := Parse(c.where, s)
		if err == nil {
			t.Errorf("Parse(%q) = %q, want error %v", c.where, e, c.want)
			continue
		}
		if !errors.Is(err, c.want) {
			t.Errorf("Parse(%q) error %q is not %v", c.where, err, c.want)
			continue
		}
		for _, m := range c.msg {
			if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(m)) {
				t.Errorf("Parse(%q) error %q does not mention %q", c.where, err, m)
			}
		}
	}
}

func TestStringNormalizes(t *testing.T) {
	schema := arrow.NewSchema(append(flightsSchema().Fields(),
		arrow.Field{Name: "weird name", Type: arrow.PrimitiveTypes.Int16},
		arrow.Field{Name: "Flag", Type: arrow.FixedWidthTypes.Boolean},
		arrow.Field{Name: "x`y", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "bin", Type: arrow.BinaryTypes.Binary},
	), nil)
	cases := []struct{ in, want string }{
		{"origin='SFO' and delay>60", "origin = 'SFO' AND delay > 60"},
		{"60 < delay", "delay > 60"},
		{"'SFO' = origin", "origin = 'SFO'"},
		{"delay <> 1 && distance != 2", "delay != 1 AND distance != 2"},
		{"NOT delay > 1", "NOT (delay > 1)"},
		{"!(delay > 1)", "NOT (delay > 1)"},
		{"delay = 1 OR delay = 2 AND distance = 3", "delay = 1 OR (delay = 2 AND distance = 3)"},
		{"(delay = 1 OR delay = 2) AND (distance = 3 OR distance = 4)", "(delay = 1 OR delay = 2) AND (distance = 3 OR distance = 4)"},
		{"((delay = 1))", "delay = 1"},
		{"date BETWEEN '2006-01-01' AND '2006-03-31'", "`date` BETWEEN '2006-01-01' AND '2006-03-31'"},
		{"delay NOT BETWEEN -5 AND 2.50", "delay NOT BETWEEN -5 AND 2.5"},
		{"delay in (1,2, NULL)", "delay IN (1, 2, NULL)"},
		{"origin NOT IN (\"a\", 'b')", "origin NOT IN ('a', 'b')"},
		{`origin = "x'y"`, `origin = 'x''y'`},
		{"origin like 'S\\_%'", "origin LIKE 'S\\\\_%'"},
		{"delay is not null", "delay IS NOT NULL"},
		{"delay > 1 is not true", "(delay > 1) IS NOT TRUE"},
		{"flag is false", "Flag IS FALSE"},
		{"`weird name` >= 1e3", "`weird name` >= 1000"},
		{"`x``y` = 'a'", "`x``y` = 'a'"},
		{"delay > 1.5e0", "delay > 1.5"},
		{"date > TIMESTAMP '2006-01-02 03:04:05.5'", "`date` > TIMESTAMP '2006-01-02 03:04:05.5'"},
		{"date >= date '2006-01-02'", "`date` >= DATE '2006-01-02'"},
		{"TRUE", "TRUE"},
		{"1 = 1 AND delay > 0", "1 = 1 AND delay > 0"},
		{"delay = distance", "delay = distance"},
		{"bin = x'0a0b'", "bin = X'0A0B'"},
		{"bin IN (0x0A, b'1', 'a', X'', NULL)", "bin IN (X'0A', X'01', 'a', X'', NULL)"},
		{"bin between 'a' and 0xff", "bin BETWEEN 'a' AND X'FF'"},
		{"0xff > bin", "bin < X'FF'"},
	}
	for _, c := range cases {
		e, err := Parse(c.in, schema)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if got := e.String(); got != c.want {
			t.Errorf("Parse(%q).String() = %q, want %q", c.in, got, c.want)
			continue
		}
		e2, err := Parse(e.String(), schema)
		if err != nil || e2.String() != c.want {
			t.Errorf("round trip of %q: %v, %v", c.want, e2, err)
		}
	}
}

func TestColumns(t *testing.T) {
	schema := flightsSchema()
	cases := []struct {
		where string
		want  []string
	}{
		{"destination = origin AND delay > 1 AND origin != 'x'", []string{"delay", "origin", "destination"}},
		{"DELAY > 1", []string{"delay"}},
		{"TRUE", []string{}},
		{"date IS NULL OR distance BETWEEN 1 AND 2", []string{"date", "distance"}},
	}
	for _, c := range cases {
		e, err := Parse(c.where, schema)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.where, err)
		}
		if got := e.Columns(); !slices.Equal(got, c.want) {
			t.Errorf("Columns(%q) = %v, want %v", c.where, got, c.want)
		}
	}
}

// TestExactNameWins: an exact (case-sensitive) match is preferred over a
// case-insensitive one.
func TestExactNameWins(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "A", Type: arrow.PrimitiveTypes.Int64},
		{Name: "a", Type: arrow.BinaryTypes.String},
	}, nil)
	if _, err := Parse("a = 'x'", schema); err != nil {
		t.Errorf("a (string) = 'x': %v", err)
	}
	if _, err := Parse("A = 1", schema); err != nil {
		t.Errorf("A (int) = 1: %v", err)
	}
	if _, err := Parse("a = 1", schema); !errors.Is(err, ErrType) {
		t.Errorf("a = 1 should bind the string column a and fail with ErrType, got %v", err)
	}
}
