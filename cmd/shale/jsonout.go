package main

// The --json shape, one for every command (docs/json.md):
//
//   - A command that succeeds prints exactly one JSON object on stdout. Lists are under
//     named keys and are [] when empty, never null; a member that does not apply is
//     left out rather than null. (query's rows are the exception: a stream of JSON Lines,
//     one object per row, whose values may be null.)
//   - A command that fails prints one line on stderr, the object
//     {"error":{"message":…,"kind":…,"exit":N}}, and exits with N. A report the command
//     produced before failing (verify's faults, a refused repair) is still the object on
//     stdout.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"unicode"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/filter"
	"github.com/shale-db/shale/index"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/repair"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/verify"
	"github.com/shale-db/shale/wal"
)

// Error kinds of the --json error object. Callers branch on these; the message is for
// people.
const (
	kindUsage          = "usage"           // how the command was called (exit 2)
	kindNotFound       = "not_found"       // a table, version, index or input file that does not exist
	kindExists         = "exists"          // a table or index that already exists
	kindInvalidInput   = "invalid_input"   // a table name, WHERE/SET expression, input file, schema, index column or configuration value that cannot be used
	kindConflict       = "conflict"        // another writer won (retry), the table was dropped or is busy, a fenced transaction
	kindUnknownOutcome = "unknown_outcome" // a write that may or may not have committed (see the message)
	kindRefused        = "refused"         // repair declining to publish drift without the flags it needs
	kindCorrupt        = "corrupt"         // damaged stored objects, faults found by verify, HEAD below published
	kindUnavailable    = "unavailable"     // the store or etcd could not be reached (transient)
	kindInterrupted    = "interrupted"     // Ctrl-C or SIGTERM
	kindInternal       = "internal"        // a bug: a recovered panic
	kindError          = "error"           // anything else
)

// errorKind classifies an error for the --json error object.
func errorKind(err error, code int) string {
	var ue *engine.UnknownError
	switch {
	case code == exitUsage:
		return kindUsage
	case errors.Is(err, context.Canceled):
		return kindInterrupted
	case errors.As(err, &ue), errors.Is(err, store.ErrOutcomeUnknown), errors.Is(err, manifest.ErrCommitUnknown):
		return kindUnknownOutcome
	case errors.Is(err, engine.ErrInternal):
		return kindInternal
	case errors.Is(err, verify.ErrFaults), errors.Is(err, manifest.ErrCorrupt), errors.Is(err, catalog.ErrCorrupt),
		errors.Is(err, engine.ErrDrift), errors.Is(err, manifest.ErrFormatTooNew), errors.Is(err, manifest.ErrFormatTooOld),
		errors.Is(err, repair.ErrPublishedAhead), errors.Is(err, wal.ErrCorrupt), errors.Is(err, wal.ErrFormatTooNew):
		return kindCorrupt
	case errors.Is(err, repair.ErrLogicalDrift), errors.Is(err, repair.ErrSidecarPending), errors.Is(err, repair.ErrGroupPending):
		return kindRefused
	case errors.Is(err, manifest.ErrTableNotFound), errors.Is(err, manifest.ErrVersionNotFound), errors.Is(err, os.ErrNotExist),
		errors.Is(err, engine.ErrIndexNotFound):
		return kindNotFound
	case errors.Is(err, engine.ErrTableExists), errors.Is(err, engine.ErrIndexExists):
		return kindExists
	case errors.Is(err, manifest.ErrConflict), errors.Is(err, catalog.ErrConflict), errors.Is(err, catalog.ErrContended),
		errors.Is(err, manifest.ErrTxnAborted), errors.Is(err, engine.ErrTableDropped), errors.Is(err, engine.ErrTableBusy),
		errors.Is(err, engine.ErrStalePreparation), errors.Is(err, wal.ErrFenced), errors.Is(err, engine.ErrWALPending):
		return kindConflict
	case errors.Is(err, manifest.ErrInvalidTableName), errors.Is(err, filter.ErrSyntax), errors.Is(err, filter.ErrUnknownColumn),
		errors.Is(err, filter.ErrType), errors.Is(err, filter.ErrUnsupported), errors.Is(err, filter.ErrArithmetic),
		errors.Is(err, engine.ErrSchemaMismatch), errors.Is(err, ErrInput), errors.Is(err, ErrUnsupportedFormat),
		errors.Is(err, engine.ErrInvalidIndexSpec), errors.Is(err, index.ErrUnsupportedType),
		errors.Is(err, engine.ErrNoWAL), errors.Is(err, engine.ErrShardOutOfRange), errors.Is(err, wal.ErrSchemaMismatch),
		errors.Is(err, engine.ErrInvalidConfig):
		return kindInvalidInput
	case errors.Is(err, store.ErrTransient), errors.Is(err, catalog.ErrEtcd), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, index.ErrNoProgress), errors.Is(err, wal.ErrBacklog):
		return kindUnavailable
	}
	return kindError
}

// jsonError is the --json error object: {"error":{"message":…,"kind":…,"exit":N}}.
type jsonError struct {
	Error struct {
		Message string `json:"message"`
		Kind    string `json:"kind"`
		Exit    int    `json:"exit"`
	} `json:"error"`
}

// jsonErrorLine is the --json error object, as printed on stderr (one line).
func jsonErrorLine(msg, kind string, code int) []byte {
	var e jsonError
	e.Error.Message, e.Error.Kind, e.Error.Exit = msg, kind, code
	b, err := json.Marshal(e)
	if err != nil { // cannot happen for strings and ints
		b = []byte(`{"error":{"message":"","kind":"error","exit":1}}`)
	}
	return append(b, '\n')
}

// wantsJSON reports whether args ask for --json (for errors raised before the flags are
// parsed, such as an unknown flag). Arguments after "--" are not flags.
func wantsJSON(args []string) bool {
	for _, a := range args {
		switch {
		case a == "--":
			return false
		case a == "--json", a == "--json=true", a == "--json=1", a == "--json=t", a == "--json=TRUE", a == "--json=True":
			return true
		}
	}
	return false
}

// writeReport writes v as the one JSON object of a command's --json output: nil slices
// and maps are emitted as [] and {}, members whose value is null are left out, and with
// snake the object keys are turned into snake_case (for reports whose Go types have no
// JSON tags, such as benchmarks.Report).
func writeReport(w io.Writer, v any, snake bool) error {
	b, err := json.Marshal(nonNil(reflect.ValueOf(v)).Interface())
	if err != nil {
		return err
	}
	var compact bytes.Buffer
	if err := dropNulls(b, snake, &compact); err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

// nonNil returns a copy of v in which every nil slice (but []byte, which encodes as a
// string) and nil map, at any depth, is an empty one.
func nonNil(v reflect.Value) reflect.Value {
	if !v.IsValid() {
		return v
	}
	switch v.Kind() {
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(nonNil(v.Index(i)))
		}
		return out
	case reflect.Array:
		out := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			out.Index(i).Set(nonNil(v.Index(i)))
		}
		return out
	case reflect.Map:
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(it.Key(), nonNil(it.Value()))
		}
		return out
	case reflect.Pointer:
		if v.IsNil() || implementsMarshaler(v.Type()) {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(nonNil(v.Elem()))
		return out
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(nonNil(v.Elem()))
		return out
	case reflect.Struct:
		if implementsMarshaler(v.Type()) {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				out.Field(i).Set(nonNil(v.Field(i)))
			}
		}
		return out
	}
	return v
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

// implementsMarshaler: such values encode themselves (time.Time); leave them alone.
func implementsMarshaler(t reflect.Type) bool {
	return t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType)
}

// dropNulls copies the JSON value raw to out, leaving out object members whose value is
// null (nulls inside arrays stay) and, with snake, renaming object keys to snake_case.
func dropNulls(raw []byte, snake bool, out *bytes.Buffer) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return errors.New("empty JSON value")
	}
	switch raw[0] {
	case '{', '[':
	default:
		out.Write(raw)
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // the opening delimiter
		return err
	}
	object := raw[0] == '{'
	if object {
		out.WriteByte('{')
	} else {
		out.WriteByte('[')
	}
	first := true
	for dec.More() {
		var key string
		if object {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ = tok.(string)
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return err
		}
		if object && string(bytes.TrimSpace(val)) == "null" {
			continue
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		if object {
			if snake {
				key = snakeCase(key)
			}
			kb, err := json.Marshal(key)
			if err != nil {
				return err
			}
			out.Write(kb)
			out.WriteByte(':')
		}
		if err := dropNulls(val, snake, out); err != nil {
			return err
		}
	}
	if object {
		out.WriteByte('}')
	} else {
		out.WriteByte(']')
	}
	return nil
}

// snakeCase turns a Go field name into snake_case: StoreURL → store_url, LoadStart →
// load_start, P50 → p50. Keys already in snake_case are unchanged.
func snakeCase(s string) string {
	rs := []rune(s)
	var b strings.Builder
	for i, r := range rs {
		if unicode.IsUpper(r) {
			prevLower := i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]))
			nextLower := i > 0 && i+1 < len(rs) && unicode.IsUpper(rs[i-1]) && unicode.IsLower(rs[i+1])
			if prevLower || nextLower {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// errorLine formats a failed command's error for stderr: one line of text, or with --json
// the error object.
func errorLine(msg string, code int, err error, asJSON bool) string {
	if asJSON {
		return string(jsonErrorLine(msg, errorKind(err, code), code))
	}
	return fmt.Sprintf("shale: error: %s\n", msg)
}
