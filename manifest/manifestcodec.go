package manifest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// The manifest body's codec. A manifest's body is a CBOR map keyed by Manifest's field
// names (core deterministic order); its Fragments value is most of its bytes. Encode and
// DecodeManifest handle the map and the fragments here, without the reflection codec, and
// hand every other field's value to the reflection codec (cborEnc, cborDec), so the bytes
// are exactly what the reflection codec writes for the whole Manifest (format 2 is
// unchanged; TestManifestBytesMatchReflection) and a field added to Manifest is encoded
// and decoded without this file knowing about it.
//
// Decoding takes the canonical encoding fast; anything else (a key that is not exactly a
// field name, a repeated key, an indefinite length, a tag, a fragment record the fast
// reader refuses, a field the reflection decoder refuses, trailing bytes) decodes the
// whole body with the reflection decoder, whose result or error stands.

// manifestNoCodec is Manifest for the reflection codec (its fragments still use their
// codec methods, which give the reflection codec's bytes and results).
type manifestNoCodec Manifest

// manifestField is one encoded field of Manifest.
type manifestField struct {
	name      string
	key       []byte // the encoded CBOR text key
	index     int    // field index in Manifest
	omitEmpty bool
}

var (
	// manifestFields are Manifest's encoded fields in core deterministic key order (by
	// encoded key bytes: shorter names first, then bytewise).
	manifestFields []manifestField
	// manifestFieldIndex maps a name to its position in manifestFields.
	manifestFieldIndex map[string]int
	// fragmentsField is the position of Fragments in manifestFields.
	fragmentsField int
	// manifestFast: every field's tag is one this codec reproduces; otherwise every
	// manifest goes through the reflection codec.
	manifestFast = true
)

func init() {
	t := reflect.TypeFor[Manifest]()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("cbor")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		mf := manifestField{name: name, index: i, key: appendText(nil, name)}
		for _, o := range strings.Split(opts, ",") {
			switch o {
			case "":
			case "omitempty":
				mf.omitEmpty = true
				switch f.Type.Kind() {
				case reflect.Struct, reflect.Array, reflect.Interface:
					manifestFast = false // emptiness rules this file does not reproduce
				}
			default:
				manifestFast = false
			}
		}
		manifestFields = append(manifestFields, mf)
	}
	slices.SortFunc(manifestFields, func(a, b manifestField) int { return bytes.Compare(a.key, b.key) })
	manifestFieldIndex = map[string]int{}
	fragmentsField = -1
	for i, f := range manifestFields {
		manifestFieldIndex[f.name] = i
		if f.name == "Fragments" && t.Field(f.index).Type == reflect.TypeFor[[]Fragment]() {
			fragmentsField = i
		}
	}
	if fragmentsField < 0 || len(manifestFields) > 64 {
		manifestFast = false
	}
	for _, name := range []string{"Table", "Version", "Txn", "TxnKey"} {
		i, ok := manifestFieldIndex[name]
		if !ok {
			manifestFast = false
			continue
		}
		txnFields |= 1 << i
	}
}

// isEmpty is the reflection codec's omitempty test for the kinds Manifest's omitempty
// fields have.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Slice, reflect.Map, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Pointer:
		return v.IsNil()
	}
	return false
}

// encodeManifest returns m's framed encoding: frameBody of the reflection codec's bytes
// for *m, the body written in place.
func encodeManifest(m *Manifest) ([]byte, error) {
	b, _, err := encodeManifestRecords(m, false)
	return b, err
}

// encodeManifestRecords is encodeManifest that also returns, with records, the encoded
// bytes of each fragment record (aliasing the returned object; nil on the reflection
// codec's path): what fragRecords keeps for decodes that reuse fragments.
func encodeManifestRecords(m *Manifest, records bool) ([]byte, [][]byte, error) {
	if !manifestFast {
		body, err := cborEnc.Marshal((*manifestNoCodec)(m))
		if err != nil {
			return nil, nil, err
		}
		return frameBody(magicManifest, body), nil, nil
	}
	out := make([]byte, 10, 14+manifestSizeHint(m))
	var ends []int
	if records {
		ends = make([]int, 0, 2*len(m.Fragments))
	}
	out, err := appendManifestBody(out, m, &ends)
	if err != nil {
		return nil, nil, err
	}
	copy(out, magicManifest[:])
	binary.BigEndian.PutUint16(out[4:], FormatVersion)
	binary.BigEndian.PutUint32(out[6:], uint32(len(out)-10))
	out = binary.BigEndian.AppendUint32(out, Checksum(out))
	var recs [][]byte
	if records && m.Fragments != nil {
		recs = make([][]byte, len(m.Fragments))
		for i := range recs {
			recs[i] = out[ends[2*i]:ends[2*i+1]:ends[2*i+1]]
		}
	}
	return out, recs, nil
}

func manifestSizeHint(m *Manifest) int {
	hint := 1024
	for i := range m.Fragments {
		hint += fragmentSizeHint(&m.Fragments[i])
	}
	return hint
}

// appendManifestBody appends m's CBOR body to b (manifestFast only); with spans, the
// start and end offset in b of each fragment record are appended to *spans.
func appendManifestBody(b []byte, m *Manifest, spans *[]int) ([]byte, error) {
	v := reflect.ValueOf(m).Elem()
	present := 0
	for _, f := range manifestFields {
		if !f.omitEmpty || !isEmpty(v.Field(f.index)) {
			present++
		}
	}
	b = appendHead(b, majorMap, uint64(present))
	for i, f := range manifestFields {
		fv := v.Field(f.index)
		if f.omitEmpty && isEmpty(fv) {
			continue
		}
		b = append(b, f.key...)
		if i == fragmentsField {
			if m.Fragments == nil {
				b = append(b, 0xf6) // null, as the reflection codec writes a nil slice
				continue
			}
			b = appendHead(b, majorArray, uint64(len(m.Fragments)))
			for j := range m.Fragments {
				start := len(b)
				b = appendFragment(b, &m.Fragments[j])
				if spans != nil && *spans != nil {
					*spans = append(*spans, start, len(b))
				}
			}
			continue
		}
		fb, err := cborEnc.Marshal(fv.Interface())
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.name, err)
		}
		b = append(b, fb...)
	}
	return b, nil
}

// decodeManifestBody decodes a manifest's CBOR body into the zero Manifest *m. Errors:
// the reflection decoder's, for a body it refuses.
func decodeManifestBody(data []byte, m *Manifest) error {
	return decodeManifestBodyOn(data, m, nil, false)
}

// decodeManifestBodyOn is decodeManifestBody that takes each fragment record byte for
// byte equal to one of base's (fragRecords) from base instead of decoding it, and with
// keep sets m's fragment records (aliasing data). base may be nil.
func decodeManifestBodyOn(data []byte, m *Manifest, base *Manifest, keep bool) error {
	if manifestFast && decodeManifestFast(data, m, base, keep) == nil {
		return nil
	}
	*m = Manifest{}
	return cborDec.Unmarshal(data, (*manifestNoCodec)(m))
}

func decodeManifestFast(data []byte, m *Manifest, base *Manifest, keep bool) error {
	r := cborReader{b: data}
	n, err := r.mapHeader()
	if err != nil {
		return err
	}
	v := reflect.ValueOf(m).Elem()
	var seen uint64
	for range n {
		i, err := r.manifestField(&seen)
		if err != nil {
			return err
		}
		if i == fragmentsField {
			var recs [][]byte
			if m.Fragments, recs, err = r.fragments(base.fragRecords(), keep); err != nil {
				return err
			}
			m.setFragRecords(recs)
			continue
		}
		start := r.off
		if err := r.skip(0); err != nil {
			return err
		}
		if err := cborDec.Unmarshal(data[start:r.off], v.Field(manifestFields[i].index).Addr().Interface()); err != nil {
			return errSlowPath
		}
	}
	if r.off != len(data) {
		return errSlowPath
	}
	return nil
}

// manifestField reads the next key of the manifest body's map and returns its field index
// in manifestFields, marking it in seen. errSlowPath: a key that is not text, not a field
// the fast reader knows, or one seen before (the caller decodes the whole body instead).
func (r *cborReader) manifestField(seen *uint64) (int, error) {
	major, kl, err := r.head()
	if err != nil || major != majorText || kl > uint64(len(r.b)-r.off) {
		return 0, errSlowPath
	}
	i, ok := manifestFieldIndex[string(r.b[r.off:r.off+int(kl)])]
	r.off += int(kl)
	if !ok || *seen&(1<<i) != 0 {
		return 0, errSlowPath
	}
	*seen |= 1 << i
	return i, nil
}

// fragments reads the Fragments value: null or an array of fragment records. A record
// that starts with the bytes of the next unmatched record of base (whose fragments and
// their encoded records are given) is that record, since a CBOR item's length follows
// from its bytes, so base's fragment is taken without decoding (fragments are immutable
// and shared between versions, as Build shares them). Base's records are matched in
// order: an append's versions share every earlier fragment; a fragment changed or
// removed is stepped over. With keep, each record's bytes (aliasing r.b) are returned.
func (r *cborReader) fragments(base fragRecords, keep bool) ([]Fragment, [][]byte, error) {
	if r.off < len(r.b) && r.b[r.off] == 0xf6 {
		r.off++
		return nil, nil, nil
	}
	n, err := r.arrayHeader()
	if err != nil {
		return nil, nil, err
	}
	out := make([]Fragment, 0, min(n, 4096))
	var recs [][]byte
	if keep {
		recs = make([][]byte, 0, min(n, 4096))
	}
	bi := 0
	for range n {
		start := r.off
		if bi < len(base.recs) && bytes.HasPrefix(r.b[r.off:], base.recs[bi]) {
			out = append(out, base.frags[bi])
			r.off += len(base.recs[bi])
			bi++
		} else {
			out = append(out, Fragment{})
			f := &out[len(out)-1]
			if err := r.fragment(f); err != nil {
				return nil, nil, err
			}
			switch {
			case bi < len(base.frags) && base.frags[bi].ID == f.ID:
				bi++ // changed (a new deletion vector)
			case bi+1 < len(base.frags) && base.frags[bi+1].ID == f.ID:
				bi += 2 // the one before it was removed
			}
		}
		if keep {
			recs = append(recs, r.b[start:r.off:r.off])
		}
	}
	return out, recs, nil
}

// maxSkipDepth bounds the nesting skip follows (the reflection decoder's default).
const maxSkipDepth = 32

// skip passes over one data item of definite lengths without tags (what the core
// deterministic encoder writes for Manifest's fields); anything else is errSlowPath.
func (r *cborReader) skip(depth int) error {
	if depth > maxSkipDepth || r.off >= len(r.b) {
		return errSlowPath
	}
	if c := r.b[r.off]; c&0xe0 == 7<<5 {
		// simple values and floats
		switch ai := c & 0x1f; {
		case ai < 24:
			r.off++
			return nil
		case ai >= 24 && ai <= 27:
			_, _, err := r.head()
			return err
		}
		return errSlowPath
	}
	major, n, err := r.head()
	if err != nil {
		return err
	}
	left := uint64(len(r.b) - r.off)
	switch major {
	case majorUint, majorNeg:
		return nil
	case 2 << 5, majorText:
		if n > left {
			return errSlowPath
		}
		r.off += int(n)
		return nil
	case majorArray, majorMap:
		items := n
		if major == majorMap {
			if n > left/2 {
				return errSlowPath
			}
			items = 2 * n
		}
		if items > left {
			return errSlowPath
		}
		for range items {
			if err := r.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	}
	return errSlowPath
}

// txnFields are the fields decodeManifestTxnFast decodes (bits of manifestFields
// positions; set by init).
var txnFields uint64

// decodeManifestTxnFast decodes only Table, Version, Txn and TxnKey of a manifest body
// into the zero Manifest *m, passing over other fields without decoding them, and stops
// once it has the four: what the commit walk needs of a version it only reads past. In
// the canonical key order they all come before Fragments (keys sort by length first), so
// the fragments are never looked at; the caller has verified the whole object's checksum.
// errSlowPath: a body the fast reader does not take (the caller decodes the whole body).
func decodeManifestTxnFast(data []byte, m *Manifest) error {
	if !manifestFast {
		return errSlowPath
	}
	r := cborReader{b: data}
	n, err := r.mapHeader()
	if err != nil {
		return errSlowPath
	}
	v := reflect.ValueOf(m).Elem()
	var seen uint64
	for range n {
		i, err := r.manifestField(&seen)
		if err != nil {
			return err
		}
		start := r.off
		if err := r.skip(0); err != nil {
			return errSlowPath
		}
		if txnFields&(1<<i) != 0 {
			if err := cborDec.Unmarshal(data[start:r.off], v.Field(manifestFields[i].index).Addr().Interface()); err != nil {
				return errSlowPath
			}
			if seen&txnFields == txnFields {
				return nil
			}
		}
	}
	if r.off != len(data) {
		return errSlowPath
	}
	return nil
}
