package manifest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/fxamacker/cbor/v2"

	"github.com/shale-db/shale/internal/fragment"
)

// Encoded objects are framed as
//
//	magic [4]byte | format uint16 BE | length uint32 BE | body (CBOR, length bytes) | crc32c uint32 BE
//
// where the CRC32C (Castagnoli) covers everything before it. Readers refuse a format newer
// than they know (ErrFormatTooNew) and any frame whose checksum, magic or length is wrong
// (ErrCorrupt).

// FormatVersion is the metadata format this build writes and the newest it reads.
// Format 2 uses integer CBOR keys for per-fragment records; format 1 (string keys) was
// written only by pre-release builds and is refused rather than misread.
const FormatVersion uint16 = 2

// MinFormatVersion is the oldest metadata format this build reads.
const MinFormatVersion uint16 = 2

// ErrFormatTooOld: a stored object was written in a format this build no longer reads.
var ErrFormatTooOld = errors.New("object format is older than this build supports")

var (
	magicManifest = [4]byte{'S', 'H', 'M', 'F'}
	magicTxn      = [4]byte{'S', 'H', 'T', 'X'}
)

var (
	// ErrCorrupt: a stored object failed its checksum or could not be decoded. It is the
	// same value as the data file reader's sentinel, so a caller outside this module can
	// also tell a corrupt data file or deletion vector (errors.Is(err, ErrCorrupt)).
	ErrCorrupt = fragment.ErrCorrupt
	// ErrFormatTooNew: a stored object was written by a newer format than this build reads.
	ErrFormatTooNew = errors.New("object format is newer than this build supports")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC32C of an encoded object, as recorded in the published pointer.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

var cborEnc = func() cbor.EncMode {
	m, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
	return m
}()

var cborDec = func() cbor.DecMode {
	// UTF8DecodeInvalid: binary columns' statistics (fragment.KindBinary) are raw bytes
	// held in a Go string, which the encoder writes as CBOR text whatever the bytes; the
	// decoder must take them back as they are (a checksum covers every manifest anyway).
	m, err := cbor.DecOptions{MaxArrayElements: 1 << 27, MaxMapPairs: 1 << 24, UTF8: cbor.UTF8DecodeInvalid}.DecMode()
	if err != nil {
		panic(err)
	}
	return m
}()

func frame(magic [4]byte, v any) ([]byte, error) {
	body, err := cborEnc.Marshal(v)
	if err != nil {
		return nil, err
	}
	return frameBody(magic, body), nil
}

// frameBody frames an encoded body: magic | format | length | body | CRC32C.
func frameBody(magic [4]byte, body []byte) []byte {
	out := make([]byte, 0, 10+len(body)+4)
	out = append(out, magic[:]...)
	out = binary.BigEndian.AppendUint16(out, FormatVersion)
	out = binary.BigEndian.AppendUint32(out, uint32(len(body)))
	out = append(out, body...)
	return binary.BigEndian.AppendUint32(out, Checksum(out))
}

// unframe checks the frame and decodes the body into v. Errors wrap ErrCorrupt or
// ErrFormatTooNew; the caller adds the object's name.
func unframe(magic [4]byte, b []byte, v any) error {
	body, err := checkFrame(magic, b)
	if err != nil {
		return err
	}
	if err := cborDec.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return nil
}

// checkFrame checks a frame's magic, length, checksum and format and returns its body.
// Errors wrap ErrCorrupt, ErrFormatTooNew or ErrFormatTooOld.
func checkFrame(magic [4]byte, b []byte) ([]byte, error) {
	body, _, err := checkFrameSum(magic, b)
	return body, err
}

// checkFrameSum is checkFrame that also returns Checksum(b), the whole object's CRC32C
// (from the frame check's, without a second pass).
func checkFrameSum(magic [4]byte, b []byte) ([]byte, uint32, error) {
	if len(b) < 14 {
		return nil, 0, fmt.Errorf("%w: %d bytes is shorter than a frame", ErrCorrupt, len(b))
	}
	if [4]byte(b[:4]) != magic {
		return nil, 0, fmt.Errorf("%w: bad magic %q", ErrCorrupt, b[:4])
	}
	n := binary.BigEndian.Uint32(b[6:10])
	if uint64(n)+14 != uint64(len(b)) {
		return nil, 0, fmt.Errorf("%w: length %d does not match object size %d", ErrCorrupt, n, len(b))
	}
	want := binary.BigEndian.Uint32(b[len(b)-4:])
	got := Checksum(b[:len(b)-4])
	if got != want {
		return nil, 0, fmt.Errorf("%w: checksum %08x, expected %08x", ErrCorrupt, got, want)
	}
	if f := binary.BigEndian.Uint16(b[4:6]); f > FormatVersion {
		return nil, 0, fmt.Errorf("%w: format %d, this build reads up to %d", ErrFormatTooNew, f, FormatVersion)
	} else if f < MinFormatVersion {
		return nil, 0, fmt.Errorf("%w: format %d, this build reads %d to %d", ErrFormatTooOld, f, MinFormatVersion, FormatVersion)
	}
	return b[10 : len(b)-4], crc32.Update(got, castagnoli, b[len(b)-4:]), nil
}

// Frame encodes v (CBOR, core deterministic) inside the frame every metadata object of a
// table uses (magic | format | length | body | CRC32C), for objects other packages own
// (index lookups, zone maps). magic names the object kind and must differ from every
// other kind's. Errors: v does not encode as CBOR.
func Frame(magic [4]byte, v any) ([]byte, error) { return frame(magic, v) }

// Unframe checks a frame written by Frame and decodes its body into v. Errors wrap
// ErrCorrupt or ErrFormatTooNew; the caller adds the object's key.
func Unframe(magic [4]byte, b []byte, v any) error { return unframe(magic, b, v) }
