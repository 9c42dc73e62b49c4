package main

import (
	"bufio"
	stdcsv "encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// Query output formats.
const (
	outTable = "table"
	outCSV   = "csv"
	outJSON  = "json"
	outArrow = "arrow"
)

// rowWriter writes record batches in one output format.
type rowWriter interface {
	Write(rec arrow.RecordBatch) error
	// Close flushes; it must be called once after the last batch.
	Close() error
}

func newRowWriter(format string, w io.Writer, schema *arrow.Schema) (rowWriter, error) {
	switch format {
	case outTable:
		return &tableWriter{w: bufio.NewWriterSize(w, 64<<10), schema: schema}, nil
	case outCSV:
		bw := bufio.NewWriterSize(w, 64<<10)
		cw := stdcsv.NewWriter(bw)
		return &csvWriter{bw: bw, cw: cw, schema: schema}, nil
	case outJSON:
		return &jsonWriter{w: bufio.NewWriterSize(w, 64<<10), schema: schema}, nil
	case outArrow:
		bw := bufio.NewWriterSize(w, 1<<20)
		return &arrowWriter{bw: bw, w: ipc.NewWriter(bw, ipc.WithSchema(schema))}, nil
	}
	return nil, usagef("unknown --format %q (want table, csv, json or arrow)", format)
}

// cell renders one value as text (ok false for null): timestamps without a zone as
// "2006-01-02 15:04:05.999999999", with one as RFC 3339; floats in their shortest form.
func cell(arr arrow.Array, i int) (string, bool) {
	if arr.IsNull(i) {
		return "", false
	}
	switch a := arr.(type) {
	case *array.String:
		return a.Value(i), true
	case *array.LargeString:
		return a.Value(i), true
	case *array.StringView:
		return a.Value(i), true
	case *array.Float64:
		return strconv.FormatFloat(a.Value(i), 'g', -1, 64), true
	case *array.Float32:
		return strconv.FormatFloat(float64(a.Value(i)), 'g', -1, 32), true
	case *array.Timestamp:
		typ := a.DataType().(*arrow.TimestampType)
		toTime, err := typ.GetToTimeFunc()
		if err != nil {
			break
		}
		if typ.TimeZone == "" {
			return toTime(a.Value(i)).Format("2006-01-02 15:04:05.999999999"), true
		}
		return toTime(a.Value(i)).Format(time.RFC3339Nano), true
	}
	return arr.ValueStr(i), true
}

// jsonValue is a value for JSON output: numbers and booleans as JSON, the rest as text.
func jsonValue(arr arrow.Array, i int) any {
	if arr.IsNull(i) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Float64:
		if v := a.Value(i); !math.IsNaN(v) && !math.IsInf(v, 0) {
			return v
		}
		return nil
	case *array.Float32:
		if v := float64(a.Value(i)); !math.IsNaN(v) && !math.IsInf(v, 0) {
			return json.Number(strconv.FormatFloat(v, 'g', -1, 32))
		}
		return nil
	case *array.Int8, *array.Int16, *array.Int32, *array.Int64,
		*array.Uint8, *array.Uint16, *array.Uint32, *array.Uint64, *array.Boolean:
		return arr.GetOneForMarshal(i)
	}
	s, _ := cell(arr, i)
	return s
}

// tableWriter prints aligned columns. Widths come from the header and the first
// tableSampleRows rows; later rows use the same widths (a longer value widens its line).
type tableWriter struct {
	w       *bufio.Writer
	schema  *arrow.Schema
	pending [][]string
	widths  []int
	right   []bool
	flushed bool
	rows    int64
}

const tableSampleRows = 1000

func (t *tableWriter) Write(rec arrow.RecordBatch) error {
	for i := 0; i < int(rec.NumRows()); i++ {
		row := make([]string, rec.NumCols())
		for c := range row {
			s, ok := cell(rec.Column(c), i)
			if !ok {
				s = "null"
			}
			row[c] = printable(s)
		}
		t.rows++
		if !t.flushed {
			// A string cell may point into rec's memory, which a scan reuses once rec
			// is released: keep copies of the rows held back for the widths.
			for c := range row {
				row[c] = strings.Clone(row[c])
			}
			t.pending = append(t.pending, row)
			if len(t.pending) >= tableSampleRows {
				t.flushHead()
			}
			continue
		}
		t.line(row)
	}
	return nil
}

func (t *tableWriter) flushHead() {
	n := t.schema.NumFields()
	t.widths = make([]int, n)
	t.right = make([]bool, n)
	header := make([]string, n)
	for i, f := range t.schema.Fields() {
		header[i] = f.Name
		t.widths[i] = utf8.RuneCountInString(f.Name)
		t.right[i] = isNumeric(f.Type)
	}
	for _, row := range t.pending {
		for i, s := range row {
			t.widths[i] = max(t.widths[i], utf8.RuneCountInString(s))
		}
	}
	right := t.right
	t.right = make([]bool, n) // headers are left-aligned
	t.line(header)
	t.right = right
	seps := make([]string, n)
	for i, w := range t.widths {
		seps[i] = strings.Repeat("-", w)
	}
	t.w.WriteString(strings.Join(seps, "  "))
	t.w.WriteByte('\n')
	for _, row := range t.pending {
		t.line(row)
	}
	t.pending = nil
	t.flushed = true
}

func (t *tableWriter) line(row []string) {
	var b strings.Builder
	for i, s := range row {
		if i > 0 {
			b.WriteString("  ")
		}
		pad := t.widths[i] - utf8.RuneCountInString(s)
		if t.right[i] && pad > 0 {
			b.WriteString(strings.Repeat(" ", pad))
		}
		b.WriteString(s)
		if !t.right[i] && pad > 0 && i < len(row)-1 {
			b.WriteString(strings.Repeat(" ", pad))
		}
	}
	t.w.WriteString(strings.TrimRight(b.String(), " "))
	t.w.WriteByte('\n')
}

func (t *tableWriter) Close() error {
	if !t.flushed {
		t.flushHead()
	}
	return t.w.Flush()
}

func isNumeric(dt arrow.DataType) bool {
	switch dt.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32,
		arrow.UINT64, arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64, arrow.DECIMAL128, arrow.DECIMAL256:
		return true
	}
	return false
}

// printable escapes control characters so one value stays on one line.
func printable(s string) string {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			q := strconv.Quote(s)
			return q[1 : len(q)-1]
		}
	}
	return s
}

type csvWriter struct {
	bw     *bufio.Writer
	cw     *stdcsv.Writer
	schema *arrow.Schema
	header bool
}

func (c *csvWriter) writeHeader() error {
	c.header = true
	return c.cw.Write(names(c.schema))
}

func (c *csvWriter) Write(rec arrow.RecordBatch) error {
	if !c.header {
		if err := c.writeHeader(); err != nil {
			return err
		}
	}
	row := make([]string, rec.NumCols())
	for i := 0; i < int(rec.NumRows()); i++ {
		for j := range row {
			row[j], _ = cell(rec.Column(j), i)
		}
		if err := c.cw.Write(row); err != nil {
			return err
		}
	}
	return nil
}

func (c *csvWriter) Close() error {
	if !c.header {
		if err := c.writeHeader(); err != nil {
			return err
		}
	}
	c.cw.Flush()
	if err := c.cw.Error(); err != nil {
		return err
	}
	return c.bw.Flush()
}

// jsonWriter writes JSON Lines: one object per row, keys in column order.
type jsonWriter struct {
	w      *bufio.Writer
	schema *arrow.Schema
	keys   [][]byte
}

func (j *jsonWriter) Write(rec arrow.RecordBatch) error {
	if j.keys == nil {
		for _, f := range j.schema.Fields() {
			k, _ := json.Marshal(f.Name)
			j.keys = append(j.keys, k)
		}
	}
	for i := 0; i < int(rec.NumRows()); i++ {
		j.w.WriteByte('{')
		for c := range j.keys {
			if c > 0 {
				j.w.WriteByte(',')
			}
			j.w.Write(j.keys[c])
			j.w.WriteByte(':')
			b, err := json.Marshal(jsonValue(rec.Column(c), i))
			if err != nil {
				return fmt.Errorf("column %q: %v", j.schema.Field(c).Name, err)
			}
			j.w.Write(b)
		}
		j.w.WriteString("}\n")
	}
	return nil
}

func (j *jsonWriter) Close() error { return j.w.Flush() }

type arrowWriter struct {
	bw *bufio.Writer
	w  *ipc.Writer
}

func (a *arrowWriter) Write(rec arrow.RecordBatch) error { return a.w.Write(rec) }
func (a *arrowWriter) Close() error {
	if err := a.w.Close(); err != nil {
		return err
	}
	return a.bw.Flush()
}
