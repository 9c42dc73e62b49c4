// Package filter parses SQL WHERE expressions, binds them to an Arrow
// schema, evaluates them over record batches with arrow-go compute kernels,
// and decides from per-column statistics whether a fragment, zone or batch
// can hold a matching row. It also parses and evaluates value expressions
// (ParseValue: the right-hand side of UPDATE … SET column = expression).
//
// Programs rarely call it directly: engine.ScanOptions.Filter, Table.Delete and
// Table.Update take the expression as text and return this package's errors (ErrSyntax,
// ErrUnknownColumn, ErrType, ErrUnsupported, ErrArithmetic) for errors.Is. Parse checks an
// expression against a schema ahead of time; a bound *Expr is immutable and safe for
// concurrent use.
//
// The language is the WHERE clause of MySQL as read by the TiDB parser:
// comparisons (= != <> < <= > >=) between a column and a literal (either
// order) or two columns, and between value expressions (a + b > 10,
// COALESCE(s, 'x') = 'x'; see ValueExpr; statistics never prune these);
// expression IS [NOT] NULL; AND, OR, NOT (also &&, ||, !) with SQL three-valued
// logic; [NOT] IN (literal, …); [NOT] BETWEEN; IS [NOT] NULL;
// IS [NOT] TRUE/FALSE; [NOT] LIKE 'pattern' on strings (case-sensitive,
// binary collation); a boolean column on its own; parentheses. Literals are
// integers, decimals, floats, strings ('…' or "…"), TRUE, FALSE, NULL,
// TIMESTAMP '…', DATE '…', and hex and bit literals (X'0A0B', 0x0A0B, b'1010',
// 0b1010: bytes, for binary columns only).
//
// Literals are coerced to the column they meet and compared exactly:
// int16col > 100000 is FALSE for every non-null row, intcol = 2.5 is FALSE,
// intcol < 2.5 is intcol <= 2; a numeric string ('42') compares with a
// numeric column; a string compares with a timestamp or date column when it
// reads as RFC 3339 or 'YYYY-MM-DD[ HH:MM:SS[.ffffff]]' (UTC). Float columns
// compare as float64 against the literal's nearest double. Two columns of
// different numeric types compare as int64, uint64 or float64.
//
// Binary columns (binary, large_binary) compare bytewise (unsigned bytes; a
// prefix orders first) with hex and bit literals, with string literals and
// string columns (as their UTF-8 bytes) and with other binary columns: =, !=,
// <, <=, >, >=, [NOT] IN, [NOT] BETWEEN, IS [NOT] NULL. LIKE on a binary
// column is refused (ErrType). Statistics prune them in the same order.
//
// Supported column types: int8-64, uint8-64, float32/64, bool, string,
// large_string, binary, large_binary, timestamp (any unit and zone), date32,
// date64 (not fixed_size_binary or the view types).
package filter

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // literal values for the parser
)

// Errors returned by Parse (and by Evaluate when a batch does not fit the
// bound schema), always wrapped with detail: the position and the text near
// a syntax error, the column name, the offending expression. Their text does
// not say "filter" (the same errors come from value expressions and column
// lists); the caller adds what the text was (WHERE …, SET …).
var (
	// ErrSyntax: the text is not a WHERE expression (malformed, or it has
	// more than the expression: a second statement, ORDER BY, LIMIT, …).
	ErrSyntax = errors.New("syntax error")
	// ErrUnknownColumn: a referenced column is not in the schema (or is ambiguous).
	ErrUnknownColumn = errors.New("unknown column")
	// ErrType: a literal or column cannot be compared with a column's type
	// ('abc' with an int column), or a non-boolean is used as a condition.
	ErrType = errors.New("type mismatch")
	// ErrUnsupported: valid SQL the filter does not evaluate (functions
	// other than COALESCE/IFNULL, subqueries, XOR, <=>, ILIKE, …).
	ErrUnsupported = errors.New("unsupported expression")
	// ErrArithmetic: evaluating a value expression overflowed its type or
	// divided by zero (returned by Evaluate, naming the expression).
	ErrArithmetic = errors.New("arithmetic error")
)

// classed is an error with its own text that matches one of the errors above
// (errors.Is), for messages that read better without the class's name as a
// prefix ("division by zero in a / b", "ambiguous column x").
type classed struct {
	class error
	msg   string
}

func (e *classed) Error() string { return e.msg }
func (e *classed) Unwrap() error { return e.class }

func classf(class error, format string, args ...any) error {
	return &classed{class: class, msg: fmt.Sprintf(format, args...)}
}

// Expr is a WHERE expression bound to a schema. It is immutable and safe
// for concurrent use.
type Expr struct {
	root   node
	schema *arrow.Schema
	cols   []int // referenced field indices, ascending
}

// sqlPrefix wraps the WHERE text into a statement the parser accepts.
const sqlPrefix = "SELECT * FROM t WHERE "

var parsers = sync.Pool{New: func() any { return parser.New() }}

// baseline is the restored text of the wrapper statement without its WHERE;
// a parsed statement restoring to anything else had more than a WHERE.
var baseline = func() string {
	p := parser.New()
	stmts, _, err := p.ParseSQL("SELECT * FROM t")
	if err != nil {
		panic(err)
	}
	return restore(stmts[0])
}()

func restore(n ast.Node) string {
	var sb strings.Builder
	if err := n.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &sb)); err != nil {
		return fmt.Sprintf("<unrestorable %T: %v>", n, err)
	}
	return sb.String()
}

// Parse parses where (the text after WHERE) and binds it to schema.
//
// Errors wrap ErrSyntax (with the 1-based column in where and the text
// near it), ErrUnknownColumn (naming the column and listing the schema's),
// ErrType (naming the literal, column and type) or ErrUnsupported.
func Parse(where string, schema *arrow.Schema) (*Expr, error) {
	if schema == nil {
		schema = arrow.NewSchema(nil, nil)
	}
	b := &binder{schema: schema, used: map[int]bool{}}
	var root node
	err := parseSQL(where, "WHERE", func(cond ast.ExprNode) (err error) {
		root, err = b.predicate(cond)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &Expr{root: root, schema: schema, cols: b.columns()}, nil
}

// parseSQL parses text as one SQL expression (what is a noun for messages:
// "WHERE" or "value") and calls bind with it. It wraps the text as the
// WHERE clause of a SELECT, which accepts every expression, and refuses
// anything after it. The tree is only valid during bind: the parser, which
// reuses its memory for the next statement, goes back to the pool after.
func parseSQL(text, what string, bind func(ast.ExprNode) error) error {
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("%w: empty %s expression", ErrSyntax, what)
	}
	p := parsers.Get().(*parser.Parser)
	defer parsers.Put(p)
	stmts, _, err := p.ParseSQL(sqlPrefix + text)
	if err != nil {
		return syntaxError(text, err)
	}
	if len(stmts) != 1 {
		return fmt.Errorf("%w: %d statements in %q: only a %s expression is allowed", ErrSyntax, len(stmts), text, what)
	}
	sel, ok := stmts[0].(*ast.SelectStmt)
	if !ok || sel.Where == nil {
		return fmt.Errorf("%w: %q is not a %s expression", ErrSyntax, text, what)
	}
	cond := sel.Where
	sel.Where = nil
	if rest := restore(sel); rest != baseline {
		return fmt.Errorf("%w: %q has clauses after the %s expression (%s)", ErrSyntax, text, what,
			strings.TrimSpace(strings.TrimPrefix(rest, baseline)))
	}
	return bind(cond)
}

var parserPos = regexp.MustCompile(`(?s)line (\d+) column (\d+) near "(.*)"`)

// syntaxError restates a parser error in terms of the WHERE text.
func syntaxError(where string, err error) error {
	m := parserPos.FindStringSubmatch(err.Error())
	if m == nil {
		return fmt.Errorf("%w in %q: %v", ErrSyntax, where, err)
	}
	line, _ := strconv.Atoi(m[1])
	col, _ := strconv.Atoi(m[2])
	if line == 1 {
		col -= len(sqlPrefix)
	}
	near := strings.TrimRight(m[3], " ")
	at := fmt.Sprintf("near %q", near)
	if near == "" {
		at = "at the end"
	}
	pos := fmt.Sprintf("column %d", col)
	if line > 1 {
		pos = fmt.Sprintf("line %d column %d", line, col)
	}
	hint := ""
	if w := leadingWord.FindString(near); w != "" && reserved[strings.ToUpper(w)] {
		// `key`, `order`, `range`…: a column named like a reserved word.
		hint = fmt.Sprintf(" (%s is a reserved word: a column of that name is written in backquotes, `%s`)", w, w)
	}
	return fmt.Errorf("%w at %s of %q, %s%s", ErrSyntax, pos, where, at, hint)
}

// String returns the expression in normalized form: keywords upper case,
// literal on the right of a comparison, BETWEEN and IN kept, parentheses
// only where needed (always after NOT), identifiers back-quoted when they
// are not plain words. Parse(e.String(), schema) gives an equivalent Expr.
func (e *Expr) String() string {
	var sb strings.Builder
	e.root.write(&sb)
	return sb.String()
}

// Columns returns the names of the columns the expression references, in
// schema order, each once.
func (e *Expr) Columns() []string {
	out := make([]string, len(e.cols))
	for i, idx := range e.cols {
		out[i] = e.schema.Field(idx).Name
	}
	return out
}

// Schema returns the schema the expression is bound to.
func (e *Expr) Schema() *arrow.Schema { return e.schema }

var (
	plainIdent  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	leadingWord = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*`)
	// reserved are the words the parser never takes for a column name.
	reserved = func() map[string]bool {
		m := map[string]bool{}
		for _, k := range parser.Keywords {
			if k.Reserved {
				m[strings.ToUpper(k.Word)] = true
			}
		}
		return m
	}()
	keywords = func() map[string]bool {
		m := make(map[string]bool, len(parser.Keywords))
		for _, k := range parser.Keywords {
			m[strings.ToUpper(k.Word)] = true
		}
		return m
	}()
)

// quoteIdent renders a column name, back-quoting it unless it is a plain
// word that is not an SQL keyword.
func quoteIdent(name string) string {
	if plainIdent.MatchString(name) && !keywords[strings.ToUpper(name)] {
		return name
	}
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}
