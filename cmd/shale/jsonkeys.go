package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/engine"
)

// keyCheckReader passes JSON Lines through unchanged, refusing a line with a top-level key
// that is not a column. arrow-go's JSON reader silently ignores unknown keys, so without
// this a key that first appears after the inference sample (or one the existing table
// lacks) would be dropped with no error.
type keyCheckReader struct {
	table, path string
	in          *bufio.Reader
	columns     map[string]bool
	names       string
	buf         []byte
	line        int
	err         error
}

func newKeyCheckReader(table, path string, in io.Reader, schema *arrow.Schema) *keyCheckReader {
	cols := map[string]bool{}
	var names []string
	for _, f := range schema.Fields() {
		cols[f.Name] = true
		names = append(names, f.Name)
	}
	return &keyCheckReader{table: table, path: path, in: bufio.NewReaderSize(in, 1<<20), columns: cols, names: strings.Join(names, ", ")}
}

func (r *keyCheckReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		line, err := r.in.ReadBytes('\n')
		r.line++
		if len(bytes.TrimSpace(line)) > 0 {
			if cerr := r.check(line); cerr != nil {
				r.err = cerr
				return 0, cerr
			}
		}
		r.buf = line
		if err != nil {
			r.err = err
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// check walks the top-level keys of one JSON object. Malformed JSON is left for the JSON
// reader to report.
func (r *keyCheckReader) check(line []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		if !r.columns[key] {
			return fmt.Errorf("table %q: %w: %s line %d has key %q, which is not a column (columns: %s); create the table with that column first, or drop the key",
				r.table, engine.ErrSchemaMismatch, r.path, r.line, key, r.names)
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}
