package main

import (
	stdcsv "encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// csvReader is the Arrow CSV reader with errors that name the line, the column and the
// type expected. The Arrow reader reports a value that does not parse with the bare
// strconv error, no position and no column; when it fails, the file is read again with
// encoding/csv up to the first value the reader refuses (locateCSVError), so the cost is
// paid only by a failed import.
type csvReader struct {
	array.RecordReader
	s       *source
	schema  *arrow.Schema
	comma   rune
	located error
}

func (r *csvReader) Err() error {
	err := r.RecordReader.Err()
	if err == nil {
		return nil
	}
	if r.located == nil {
		r.located = r.s.locateCSVError(r.schema, r.comma, err)
	}
	return r.located
}

// locateCSVError reads the file again from its start and returns an error wrapping
// ErrInput that names the first line whose fields do not fit schema: a value that does
// not parse as its column's type ("line 1,502, column "score": "abc" is not a float64
// …"), a line with the wrong number of fields, or malformed CSV. Lines count from 1, the
// header included, as an editor shows them (a quoted field spanning lines counts each).
// Without such a line it returns cause, wrapped.
func (s *source) locateCSVError(schema *arrow.Schema, comma rune, cause error) error {
	off, err := s.dataStart()
	if err != nil {
		return s.inputError(cause)
	}
	cr := stdcsv.NewReader(io.NewSectionReader(s.file.f, off, s.size-off))
	cr.Comma = comma
	cr.FieldsPerRecord = -1 // counted here, to say what was expected
	cr.ReuseRecord = true
	checks := make([]*cellCheck, schema.NumFields())
	for i, f := range schema.Fields() {
		checks[i] = newCellCheck(f.Type)
		defer checks[i].release()
	}
	header := true
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return s.inputError(csvSyntaxError(err))
		}
		if len(rec) != len(checks) {
			line, _ := cr.FieldPos(0)
			return s.inputError(fieldCountError(line, len(rec), len(checks)))
		}
		if header {
			header = false
			continue
		}
		for i, v := range rec {
			if v == "" { // null
				continue
			}
			if msg := checks[i].check(v); msg != "" {
				line, _ := cr.FieldPos(i)
				return s.inputError(fmt.Errorf("line %s, column %q: %s", thousands(int64(line)), schema.Field(i).Name, msg))
			}
		}
	}
	return s.inputError(cause)
}

// dataStart is the offset of the file's first byte after a UTF-8 byte order mark.
func (s *source) dataStart() (int64, error) {
	head := make([]byte, len(utf8BOM))
	n, err := s.file.f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	if n == len(utf8BOM) && string(head) == string(utf8BOM) {
		return int64(len(utf8BOM)), nil
	}
	return 0, nil
}

// cellCheck tells whether a CSV value parses as one column type the way the Arrow CSV
// reader parses it (see its parse* methods), and words the failure for people.
type cellCheck struct {
	dt   arrow.DataType
	bldr array.Builder // types parsed through a builder (timestamps, and types not listed)
	n    int
}

func newCellCheck(dt arrow.DataType) *cellCheck { return &cellCheck{dt: dt} }

func (c *cellCheck) release() {
	if c.bldr != nil {
		c.bldr.Release()
	}
}

// check returns "" when v parses, else what is wrong: `"abc" is not a float64 (a number
// such as 2.5 or -1e3)`.
func (c *cellCheck) check(v string) string {
	var err error
	switch c.dt.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW, arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW:
		return ""
	case arrow.BOOL:
		_, err = strconv.ParseBool(v)
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64:
		_, err = strconv.ParseInt(v, 10, c.dt.(arrow.FixedWidthDataType).BitWidth())
	case arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		_, err = strconv.ParseUint(v, 10, c.dt.(arrow.FixedWidthDataType).BitWidth())
	case arrow.FLOAT16, arrow.FLOAT32:
		_, err = strconv.ParseFloat(v, 32)
	case arrow.FLOAT64:
		_, err = strconv.ParseFloat(v, 64)
	case arrow.DATE32, arrow.DATE64:
		_, err = time.Parse("2006-01-02", v)
	default:
		if c.bldr == nil || c.n >= 4096 {
			c.release()
			c.bldr, c.n = array.NewBuilder(memory.DefaultAllocator, c.dt), 0
		}
		c.n++
		err = c.bldr.AppendValueFromString(v)
	}
	if err == nil {
		return ""
	}
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Sprintf("%s is out of range for %s", strconv.Quote(abbreviate(v, 40)), c.dt)
	}
	return fmt.Sprintf("%s is not %s %s%s", strconv.Quote(abbreviate(v, 40)), article(c.dt.String()), c.dt, typeHint(c.dt))
}

// typeHint says what values of a type look like in CSV: " (a whole number)".
func typeHint(dt arrow.DataType) string {
	switch dt.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return " (a whole number)"
	case arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64:
		return " (a number such as 2.5 or -1e3)"
	case arrow.BOOL:
		return " (true or false)"
	case arrow.DATE32, arrow.DATE64:
		return " (a date YYYY-MM-DD)"
	case arrow.TIMESTAMP:
		if ts, ok := dt.(*arrow.TimestampType); ok && ts.TimeZone != "" {
			return " (a timestamp with its offset: YYYY-MM-DD hh:mm:ss[.ffffff]Z or ±hh:mm)"
		}
		return " (a timestamp YYYY-MM-DD hh:mm:ss[.ffffff])"
	}
	return ""
}

// article is "a" or "an" for a type name: "an int64", "a float64", "a uint8".
func article(word string) string {
	if word != "" && (word[0] == 'i' || word[0] == 'a' || word[0] == 'e' || word[0] == 'o') {
		return "an"
	}
	return "a"
}
