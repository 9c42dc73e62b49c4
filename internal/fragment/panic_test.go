package fragment

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/panics"
)

// TestPanicsInReaderAndWriterAreErrors: a panic while a batch is encoded or read is
// returned as an error wrapping panics.ErrInternal (and the panic's own error), naming
// the object, and fails the Writer; it does not escape.
func TestPanicsInReaderAndWriterAreErrors(t *testing.T) {
	s := memStore(t)
	schema := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec := randRecord(seeded(t), schema, 10, 0)
	defer rec.Release()

	disable := failpoint.Enable("fragment.encode_batch", failpoint.Panic("encode"))
	w, err := NewWriter(context.Background(), s, "f", schema, fieldIDsFor(schema), WriterOptions{MaxRowsPerBatch: 4})
	if err != nil {
		t.Fatal(err)
	}
	err = w.Write(rec)
	disable()
	if !errors.Is(err, panics.ErrInternal) || !errors.Is(err, failpoint.ErrInjected) || !strings.Contains(err.Error(), "write data file under f") {
		t.Fatalf("Write: %v, want ErrInternal naming the directory", err)
	}
	if err := w.Write(rec); !errors.Is(err, panics.ErrInternal) {
		t.Fatalf("Write after a panic: %v, want the writer failed", err)
	}
	if _, err := w.Close(); !errors.Is(err, panics.ErrInternal) {
		t.Fatalf("Close after a panic: %v, want the writer failed", err)
	}

	df := writeRecords(t, s, "f", schema, []arrow.RecordBatch{rec}, WriterOptions{})[0]
	fr, err := OpenFile(context.Background(), s, df, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	disable = failpoint.Enable("fragment.read_batch", failpoint.Panic("decode").Once())
	defer disable()
	got, err := fr.ReadBatch(0, nil)
	if got != nil || !errors.Is(err, panics.ErrInternal) || !strings.Contains(err.Error(), "read data file "+df.Key) {
		t.Fatalf("ReadBatch: %v, %v, want ErrInternal naming %s", got, err, df.Key)
	}
	got, err = fr.ReadBatch(0, nil)
	if err != nil {
		t.Fatalf("ReadBatch after the panic: %v", err)
	}
	got.Release()
}
