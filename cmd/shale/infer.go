package main

import (
	"bytes"
	stdcsv "encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// sampleRows is how many rows of a CSV or JSON Lines file the type inference reads.
const sampleRows = 1000

// colGuess narrows a column's type over sampled values: each flag says every non-null
// value seen so far parses as that type.
type colGuess struct {
	seen                                 bool
	isInt, isFloat, isBool, isDate, isTS bool
}

func newGuess() *colGuess {
	return &colGuess{isInt: true, isFloat: true, isBool: true, isDate: true, isTS: true}
}

// observeText narrows the guess with a textual value ("" is null).
func (g *colGuess) observeText(v string) {
	if v == "" {
		return
	}
	g.seen = true
	if g.isInt || g.isFloat {
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			g.isInt = false
			if errors.Is(err, strconv.ErrRange) {
				// An integer beyond int64: float64 would keep only its first 15-17
				// digits. Only a string keeps it.
				g.isFloat = false
			}
		}
	}
	if g.isFloat {
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			g.isFloat = false
		}
	}
	if g.isBool {
		switch v {
		case "true", "false", "TRUE", "FALSE", "True", "False":
		default:
			g.isBool = false
		}
	}
	if g.isDate {
		if _, err := time.Parse("2006-01-02", v); err != nil {
			g.isDate = false
		}
	}
	if g.isTS {
		// A timestamp without a zone and with a time part, as shale's own CSV/JSON
		// output writes timestamp[us] columns ("2006-01-02 15:04:05.999999").
		_, zone, err := arrow.TimestampFromStringInLocation(v, arrow.Microsecond, time.UTC)
		if err != nil || zone || len(v) <= 10 {
			g.isTS = false
		}
	}
}

// typ is the narrowest type consistent with every value seen (string when none was).
func (g *colGuess) typ() arrow.DataType {
	switch {
	case !g.seen:
		return arrow.BinaryTypes.String
	case g.isInt:
		return arrow.PrimitiveTypes.Int64
	case g.isFloat:
		return arrow.PrimitiveTypes.Float64
	case g.isBool:
		return arrow.FixedWidthTypes.Boolean
	case g.isDate:
		return arrow.FixedWidthTypes.Date32
	case g.isTS:
		return &arrow.TimestampType{Unit: arrow.Microsecond}
	}
	return arrow.BinaryTypes.String
}

// csvSample is a CSV header and the first data rows.
type csvSample struct {
	header []string
	rows   [][]string
}

// sampleCSV reads the header and up to n data rows.
func sampleCSV(r io.Reader, comma rune, n int) (*csvSample, error) {
	cr := stdcsv.NewReader(r)
	cr.Comma = comma
	cr.FieldsPerRecord = -1 // counted below, to say what was expected
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("empty file (a CSV import needs a header row)")
	}
	if err != nil {
		return nil, csvSyntaxError(err)
	}
	seen := map[string]bool{}
	for i, h := range header {
		if h == "" {
			return nil, fmt.Errorf("header column %d has no name", i+1)
		}
		if seen[h] {
			return nil, fmt.Errorf("header names column %q twice", h)
		}
		seen[h] = true
	}
	s := &csvSample{header: append([]string(nil), header...)}
	for len(s.rows) < n {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, csvSyntaxError(err)
		}
		if len(rec) != len(header) {
			line, _ := cr.FieldPos(0)
			return nil, fieldCountError(line, len(rec), len(header))
		}
		s.rows = append(s.rows, rec)
	}
	return s, nil
}

// csvSyntaxError words malformed CSV by its line: `line 7: bare " in non-quoted-field`.
func csvSyntaxError(err error) error {
	var pe *stdcsv.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("line %s: %w", thousands(int64(pe.Line)), pe.Err)
	}
	return err
}

// fieldCountError reports a CSV line with another number of fields than the header.
func fieldCountError(line, got, want int) error {
	return fmt.Errorf("line %s has %s, the header has %d", thousands(int64(line)), plural(got, "field"), want)
}

// inferCSVSchema gives each column the narrowest type that fits every sampled value:
// int64, float64, bool, date32 (YYYY-MM-DD), timestamp[us] (YYYY-MM-DD hh:mm:ss[.f],
// no zone) or string. Empty fields are nulls; every column is nullable.
func inferCSVSchema(s *csvSample) *arrow.Schema {
	fields := make([]arrow.Field, len(s.header))
	for i, name := range s.header {
		g := newGuess()
		for _, row := range s.rows {
			if i < len(row) {
				g.observeText(row[i])
			}
		}
		fields[i] = arrow.Field{Name: name, Type: g.typ(), Nullable: true}
	}
	return arrow.NewSchema(fields, nil)
}

// jsonGuess narrows a JSON Lines key's type.
type jsonGuess struct {
	text        *colGuess // string values
	strings     bool      // some value was a string
	numbers     bool      // some value was a number
	fractional  bool      // some number had a fraction, exponent or did not fit int64
	bools       bool      // some value was true/false
	firstNested int       // line of the first object/array value (0 = none)
	// overflow is the first integer beyond int64's range, on line overflowLine.
	overflow     string
	overflowLine int
}

// inferJSONLSchema reads up to n objects (one per line) and types each key, in order of
// first appearance: int64, float64, bool, string (or date32 / timestamp[us] when every
// string parses as one). Nested objects and arrays are not supported.
func inferJSONLSchema(r io.Reader, n int) (*arrow.Schema, error) {
	dec := json.NewDecoder(r)
	var order []string
	guesses := map[string]*jsonGuess{}
	line := 0
	for line < n {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		line++
		if err != nil {
			return nil, fmt.Errorf("object %d: %v", line, err)
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || raw[0] != '{' {
			return nil, fmt.Errorf("object %d: want one JSON object per line, got %s", line, abbreviate(string(raw), 40))
		}
		od := json.NewDecoder(bytes.NewReader(raw))
		od.UseNumber()
		if _, err := od.Token(); err != nil { // '{'
			return nil, fmt.Errorf("object %d: %v", line, err)
		}
		for od.More() {
			kt, err := od.Token()
			if err != nil {
				return nil, fmt.Errorf("object %d: %v", line, err)
			}
			key := kt.(string)
			var v json.RawMessage
			if err := od.Decode(&v); err != nil {
				return nil, fmt.Errorf("object %d, key %q: %v", line, key, err)
			}
			g := guesses[key]
			if g == nil {
				g = &jsonGuess{text: newGuess()}
				guesses[key] = g
				order = append(order, key)
			}
			g.observe(v, line)
		}
	}
	if len(order) == 0 {
		return nil, errors.New("no JSON objects found (want one object per line)")
	}
	fields := make([]arrow.Field, len(order))
	for i, k := range order {
		g := guesses[k]
		if g.firstNested > 0 {
			return nil, fmt.Errorf("key %q holds an object or array (object %d); nested values are not supported", k, g.firstNested)
		}
		t, err := g.typ()
		if err != nil {
			return nil, fmt.Errorf("key %q: %v", k, err)
		}
		fields[i] = arrow.Field{Name: k, Type: t, Nullable: true}
	}
	return arrow.NewSchema(fields, nil), nil
}

func (g *jsonGuess) observe(v json.RawMessage, line int) {
	if len(v) == 0 {
		return
	}
	switch v[0] {
	case 'n':
	case 't', 'f':
		g.bools = true
	case '"':
		var s string
		if json.Unmarshal(v, &s) == nil {
			g.strings = true
			g.text.observeText(s)
		}
	case '{', '[':
		if g.firstNested == 0 {
			g.firstNested = line
		}
	default:
		g.numbers = true
		if _, err := strconv.ParseInt(string(v), 10, 64); err != nil {
			g.fractional = true
			if errors.Is(err, strconv.ErrRange) && g.overflow == "" {
				g.overflow, g.overflowLine = string(v), line
			}
		}
	}
}

func (g *jsonGuess) typ() (arrow.DataType, error) {
	kinds := 0
	for _, b := range []bool{g.strings, g.numbers, g.bools} {
		if b {
			kinds++
		}
	}
	switch {
	case kinds > 1:
		return nil, errors.New("values of mixed JSON types (numbers, strings, booleans)")
	case g.overflow != "":
		return nil, fmt.Errorf("line %d: integer %s does not fit in int64, and float64 would lose its digits (quote the numbers to import them as strings)", g.overflowLine, g.overflow)
	case g.numbers && g.fractional:
		return arrow.PrimitiveTypes.Float64, nil
	case g.numbers:
		return arrow.PrimitiveTypes.Int64, nil
	case g.bools:
		return arrow.FixedWidthTypes.Boolean, nil
	case g.strings:
		g.text.isInt, g.text.isFloat, g.text.isBool = false, false, false
		return g.text.typ(), nil
	}
	return arrow.BinaryTypes.String, nil // only nulls seen
}

func abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
