package manifest

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// Schema is a table schema with stable field ids. The Arrow schema is stored as an Arrow
// IPC stream holding only the schema message, so any Arrow implementation can read it.
// FieldIDs[i] is the id of top-level field i; ids are never reused after a field is dropped.
type Schema struct {
	IPC      []byte  // an Arrow IPC stream of the schema message alone (Arrow decodes it)
	FieldIDs []int32 // FieldIDs[i] is the id of top-level field i

	arrow *arrow.Schema // decoded IPC, cached
}

// NewSchema encodes s, giving its fields the ids ids (len(ids) must equal s.NumFields()).
// Errors: a length mismatch, or a schema Arrow IPC cannot encode.
func NewSchema(s *arrow.Schema, ids []int32) (Schema, error) {
	if len(ids) != s.NumFields() {
		return Schema{}, fmt.Errorf("schema has %d fields but %d field ids", s.NumFields(), len(ids))
	}
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(s))
	if err := w.Close(); err != nil {
		return Schema{}, fmt.Errorf("encode schema: %w", err)
	}
	return Schema{IPC: buf.Bytes(), FieldIDs: append([]int32(nil), ids...), arrow: s}, nil
}

// Arrow returns the decoded Arrow schema (decoded once; manifests read from a store are
// decoded when they are loaded). Errors: ErrCorrupt when IPC does not decode or its field
// count differs from FieldIDs.
func (s *Schema) Arrow() (*arrow.Schema, error) {
	if s.arrow != nil {
		return s.arrow, nil
	}
	if err := checkSchemaIPC(s.IPC); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	r, err := ipc.NewReader(bytes.NewReader(s.IPC))
	if err != nil {
		return nil, fmt.Errorf("%w: schema: %v", ErrCorrupt, err)
	}
	defer r.Release()
	s.arrow = r.Schema()
	if s.arrow.NumFields() != len(s.FieldIDs) {
		return nil, fmt.Errorf("%w: schema has %d fields but %d field ids", ErrCorrupt, s.arrow.NumFields(), len(s.FieldIDs))
	}
	return s.arrow, nil
}

// MustArrow is Arrow for schemas already validated at decode time.
func (s *Schema) MustArrow() *arrow.Schema {
	a, err := s.Arrow()
	if err != nil {
		panic(err)
	}
	return a
}

// FieldID returns the id of the named top-level field.
func (s *Schema) FieldID(name string) (int32, bool) {
	a := s.MustArrow()
	idx := a.FieldIndices(name)
	if len(idx) == 0 {
		return 0, false
	}
	return s.FieldIDs[idx[0]], true
}
