package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/shale-db/shale/internal/fragment"
)

// codecSeed returns a seed for a randomized test and logs it, so a failure can be replayed
// by fixing the value here.
func codecSeed(t testing.TB) uint64 {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return seed
}

// filler sets every field of a value at random, reflectively, so a field added to a
// record later is exercised without this test knowing about it. Values are canonical: a
// zero-length slice is nil and floats are neither NaN nor -0, so a round trip gives back
// exactly the value encoded.
type filler struct{ r *rand.Rand }

var testStrings = []string{"", "a", "zstd", "lz4", "none", "SEA", "ABE", "\xff\xfe not utf-8",
	"hist/data/01M8TK3KW3VJ2PVXJR50BJKJHF/01M8TK3KW4WPSVKKXG78J00PJA.arrow",
	string(bytes.Repeat([]byte("x"), 300))}

var testFloats = []float64{0, 1, -1, 0.5, 65504, 65505, 1e-8, 5.960464477539063e-08, 1.0 / 3,
	math.MaxFloat32, math.SmallestNonzeroFloat64, 1e300, math.Inf(1), math.Inf(-1), 3.4028235677973366e+38}

func (f filler) int() int64 {
	switch f.r.IntN(6) {
	case 0:
		return 0
	case 1:
		return f.r.Int64N(24)
	case 2:
		return -f.r.Int64N(300)
	case 3:
		return []int64{math.MaxInt64, math.MinInt64, math.MaxInt32, math.MinInt32, 255, 256, 65535, 65536, -24, -25, -256, -257}[f.r.IntN(12)]
	}
	return int64(f.r.Uint64())
}

func (f filler) fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i))
			}
		}
	case reflect.Slice:
		n := f.r.IntN(4)
		if n == 0 {
			v.SetZero()
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			f.fill(v.Index(i))
		}
	case reflect.Pointer:
		if f.r.IntN(2) == 0 {
			v.SetZero()
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem())
	case reflect.String:
		v.SetString(testStrings[f.r.IntN(len(testStrings))])
	case reflect.Bool:
		v.SetBool(f.r.IntN(2) == 0)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		x := f.int()
		for v.OverflowInt(x) {
			x >>= 8
		}
		v.SetInt(x)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		x := uint64(f.int())
		for v.OverflowUint(x) {
			x >>= 8
		}
		v.SetUint(x)
	case reflect.Float32, reflect.Float64:
		x := testFloats[f.r.IntN(len(testFloats))]
		if f.r.IntN(2) == 0 {
			x = f.r.NormFloat64() * math.Pow(10, float64(f.r.IntN(40)-20))
		}
		if f.r.IntN(3) == 0 {
			x = float64(float32(x))
		}
		v.SetFloat(x)
	default:
		panic(fmt.Sprintf("filler: unsupported kind %s", v.Kind()))
	}
}

func randomFragment(f filler) Fragment {
	var fr Fragment
	f.fill(reflect.ValueOf(&fr).Elem())
	return fr
}

// TestFragmentCodecMatchesReflection: for random records (every field of every nested
// record set at random), the hand codec writes the reflection codec's bytes, decodes them
// to the value encoded, and agrees with the reflection decoder.
func TestFragmentCodecMatchesReflection(t *testing.T) {
	f := filler{rand.New(rand.NewPCG(codecSeed(t), 1))}
	for i := range 3000 {
		fr := randomFragment(f)
		want, err := cborEnc.Marshal((*fragmentNoCodec)(&fr))
		if err != nil {
			t.Fatal(err)
		}
		got, err := fr.MarshalCBOR()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("record %d: hand codec wrote\n%x\nreflection codec wrote\n%x\nvalue %+v", i, got, want, fr)
		}
		var fast Fragment
		r := cborReader{b: want}
		if err := r.fragment(&fast); err != nil || r.off != len(want) {
			t.Fatalf("record %d: the fast decoder refused the canonical encoding (%v, %d of %d bytes)", i, err, r.off, len(want))
		}
		if !reflect.DeepEqual(fast, fr) {
			t.Fatalf("record %d: round trip\n got %+v\nwant %+v", i, fast, fr)
		}

		var rec IdempotencyRecord
		f.fill(reflect.ValueOf(&rec).Elem())
		want, _ = cborEnc.Marshal((*idempotencyNoCodec)(&rec))
		got, _ = rec.MarshalCBOR()
		if !bytes.Equal(got, want) {
			t.Fatalf("idempotency record %d: hand codec wrote %x, reflection codec %x", i, got, want)
		}
		var back IdempotencyRecord
		if err := back.UnmarshalCBOR(want); err != nil || back != rec {
			t.Fatalf("idempotency record %d: round trip %+v (%v), want %+v", i, back, err, rec)
		}
	}
}

// TestFragmentCodecFloats: the special floats encode as the reflection codec writes them
// (NaN as f97e00, infinities as half floats, -0 left out as empty like 0).
func TestFragmentCodecFloats(t *testing.T) {
	for _, x := range append(testFloats, math.NaN(), math.Copysign(0, -1), -65504, 1e-300, 6.103515625e-05, 6.097555160522461e-05) {
		fr := Fragment{Files: []fragment.DataFile{{Stats: []fragment.ColumnStats{{Min: fragment.Value{Kind: fragment.KindFloat, Float: x}}}}}}
		want, _ := cborEnc.Marshal((*fragmentNoCodec)(&fr))
		got, _ := fr.MarshalCBOR()
		if !bytes.Equal(got, want) {
			t.Errorf("%v: hand codec wrote %x, reflection codec %x", x, got, want)
		}
		var back Fragment
		if err := back.UnmarshalCBOR(got); err != nil {
			t.Fatal(err)
		}
		b := back.Files[0].Stats[0].Min.Float
		if !(b == x || math.IsNaN(b) && math.IsNaN(x)) || math.Signbit(b) != (math.Signbit(x) && x != 0) {
			t.Errorf("%v decoded as %v", x, b)
		}
	}
}

// decodeBoth decodes data with the hand codec and with the reflection decoder.
func decodeBoth(data []byte) (hand, ref Fragment, handErr, refErr error) {
	handErr = hand.UnmarshalCBOR(data)
	var slow fragmentNoCodec
	refErr = cborDec.Unmarshal(data, &slow)
	return hand, Fragment(slow), handErr, refErr
}

// exactFloats encodes every float as its 64 bits, so two values encode alike only when
// their floats' bits are equal (reflect.DeepEqual finds no NaN equal to itself).
var exactFloats = func() cbor.EncMode {
	m, err := cbor.EncOptions{Sort: cbor.SortCoreDeterministic, ShortestFloat: cbor.ShortestFloatNone,
		NaNConvert: cbor.NaNConvertNone, InfConvert: cbor.InfConvertNone}.EncMode()
	if err != nil {
		panic(err)
	}
	return m
}()

// sameFragment: a and b hold equal values (NaNs equal when their bits are), nil and empty
// slices told apart.
func sameFragment(t *testing.T, a, b Fragment) bool {
	t.Helper()
	ab, err1 := exactFloats.Marshal((*fragmentNoCodec)(&a))
	bb, err2 := exactFloats.Marshal((*fragmentNoCodec)(&b))
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if !bytes.Equal(ab, bb) {
		return false
	}
	// The encoding leaves out empty slices: compare their nil-ness too.
	a2, b2 := a, b
	zeroFloats(&a2)
	zeroFloats(&b2)
	return reflect.DeepEqual(a2, b2)
}

// zeroFloats replaces f's statistics' floats by 0 in copies of its slices.
func zeroFloats(f *Fragment) {
	f.Files = slices.Clone(f.Files)
	for i := range f.Files {
		df := &f.Files[i]
		df.Stats = zeroStatFloats(df.Stats)
		df.Batches = slices.Clone(df.Batches)
		for j := range df.Batches {
			df.Batches[j].Stats = zeroStatFloats(df.Batches[j].Stats)
		}
	}
}

func zeroStatFloats(s []fragment.ColumnStats) []fragment.ColumnStats {
	s = slices.Clone(s)
	for i := range s {
		s[i].Min.Float, s[i].Max.Float = 0, 0
	}
	return s
}

// TestFragmentDecodeMatchesReflectionOnDamagedInput: whatever bytes it is given (random
// records with bytes flipped, cut off, inserted, or heads widened to a longer form), the
// hand decoder fails exactly when the reflection decoder does and otherwise gives the
// same value. It never panics.
func TestFragmentDecodeMatchesReflectionOnDamagedInput(t *testing.T) {
	seed := codecSeed(t)
	f := filler{rand.New(rand.NewPCG(seed, 2))}
	r := rand.New(rand.NewPCG(seed, 3))
	fast := 0
	for i := range 20000 {
		fr := randomFragment(f)
		data, _ := fr.MarshalCBOR()
		switch r.IntN(5) {
		case 0:
			data[r.IntN(len(data))] ^= byte(1 << r.IntN(8))
		case 1:
			data = data[:r.IntN(len(data))]
		case 2:
			j := r.IntN(len(data) + 1)
			data = append(data[:j:j], append([]byte{byte(r.IntN(256))}, data[j:]...)...)
		case 3:
			data[r.IntN(len(data))] = byte(r.IntN(256))
		case 4:
			// widen the first head: valid CBOR, not the canonical form.
			if data[0]&0x1f < 24 {
				data = append([]byte{data[0]&0xe0 | 24, data[0] & 0x1f}, data[1:]...)
			}
		}
		hand, ref, handErr, refErr := decodeBoth(data)
		if (handErr == nil) != (refErr == nil) {
			t.Fatalf("case %d, input %x: hand decoder error %v, reflection decoder error %v", i, data, handErr, refErr)
		}
		if handErr == nil && !sameFragment(t, hand, ref) {
			t.Fatalf("case %d, input %x: hand decoder gave\n%+v\nreflection decoder\n%+v", i, data, hand, ref)
		}
		rd := cborReader{b: data}
		var v Fragment
		if rd.fragment(&v) == nil && rd.off == len(data) {
			fast++
		}
	}
	t.Logf("%d of 20000 damaged inputs took the fast path", fast)
}

// TestDecodeDamagedManifest: a manifest whose body is damaged and framed again with a
// correct checksum (so the decoder, not the checksum, must catch it) decodes or fails with
// ErrCorrupt, never panics; the same damage without a new checksum always fails with
// ErrCorrupt.
func TestDecodeDamagedManifest(t *testing.T) {
	seed := codecSeed(t)
	r := rand.New(rand.NewPCG(seed, 4))
	m := benchManifest(t, 40)
	good, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	body := good[10 : len(good)-4]
	// Damage to the schema's Arrow IPC bytes, whose flatbuffer Arrow's reader trusts, is
	// made more likely: checkSchemaIPC must catch it before Arrow sizes an allocation by it.
	ipcAt := bytes.Index(body, m.Schema.IPC)
	if ipcAt < 0 {
		t.Fatal("schema IPC not found in the body")
	}
	pos := func() int {
		if r.IntN(2) == 0 {
			return ipcAt + r.IntN(len(m.Schema.IPC))
		}
		return r.IntN(len(body))
	}
	for i := range 5000 {
		damaged := bytes.Clone(body)
		switch r.IntN(3) {
		case 0:
			for range 1 + r.IntN(3) {
				damaged[pos()] ^= byte(1 << r.IntN(8))
			}
		case 1:
			damaged = damaged[:r.IntN(len(damaged))]
		case 2:
			damaged[pos()] = byte(r.IntN(256))
		}
		reframed := reframe(damaged)
		if _, err := DecodeManifest(m.Table, m.Version, m.Key(), reframed); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("case %d: reframed damaged body: %v is not ErrCorrupt", i, err)
		}
		raw := bytes.Clone(good)
		raw[10+r.IntN(len(body))] ^= byte(1 << r.IntN(8))
		if _, err := DecodeManifest(m.Table, m.Version, m.Key(), raw); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("case %d: flipped bit: %v is not ErrCorrupt", i, err)
		}
		if _, err := DecodeManifest(m.Table, m.Version, m.Key(), good[:r.IntN(len(good))]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("case %d: truncated: %v is not ErrCorrupt", i, err)
		}
	}
}

// reframe frames body as a manifest of the current format with a correct checksum.
func reframe(body []byte) []byte {
	out := append([]byte{}, magicManifest[:]...)
	out = append(out, byte(FormatVersion>>8), byte(FormatVersion))
	out = append(out, byte(len(body)>>24), byte(len(body)>>16), byte(len(body)>>8), byte(len(body)))
	out = append(out, body...)
	c := Checksum(out)
	return append(out, byte(c>>24), byte(c>>16), byte(c>>8), byte(c))
}

// TestManifestRoundTripRandom: random manifests (random fragments, idempotency records,
// indexes) decode to what was encoded.
func TestManifestRoundTripRandom(t *testing.T) {
	f := filler{rand.New(rand.NewPCG(codecSeed(t), 5))}
	for i := range 50 {
		m := benchManifest(t, f.r.IntN(30))
		for j := range m.Fragments {
			m.Fragments[j] = randomFragment(f)
		}
		m.Idempotency = make([]IdempotencyRecord, f.r.IntN(5))
		for j := range m.Idempotency {
			f.fill(reflect.ValueOf(&m.Idempotency[j]).Elem())
		}
		if len(m.Idempotency) == 0 {
			m.Idempotency = nil
		}
		b, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeManifest(m.Table, m.Version, m.Key(), b)
		if err != nil {
			t.Fatalf("manifest %d: %v", i, err)
		}
		if !reflect.DeepEqual(back.Fragments, m.Fragments) || !reflect.DeepEqual(back.Idempotency, m.Idempotency) {
			t.Fatalf("manifest %d: fragments or idempotency records differ after a round trip", i)
		}
		again, _ := back.Encode()
		if !bytes.Equal(again, b) {
			t.Fatalf("manifest %d: re-encoding the decoded manifest changed its bytes", i)
		}
	}
}

// FuzzDecodeManifest: any body, framed with a correct checksum, decodes or fails with
// ErrCorrupt; it never panics.
func FuzzDecodeManifest(f *testing.F) {
	m := benchManifest(f, 3)
	good, err := m.Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good[10 : len(good)-4])
	fr, _ := m.Fragments[0].MarshalCBOR()
	f.Add(fr)
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := DecodeManifest(m.Table, m.Version, m.Key(), reframe(body)); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%v is not ErrCorrupt", err)
		}
		var fr Fragment
		_ = fr.UnmarshalCBOR(body)
	})
}
