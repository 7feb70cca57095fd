package promptcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"time"
)

// Entry file layout, all integers little-endian:
//
//	0   magic "GUARDPC1"
//	8   u32 format version
//	12  i64 created, unix nanoseconds
//	20  u64 seconds the real run took, float64 bits
//	28  u64 payload length
//	36  sha256 of the payload
//	68  payload
const (
	magic      = "GUARDPC1"
	headerSize = 68
)

var errCorrupt = errors.New("corrupt entry")

func encodeEntry(e Entry) []byte {
	b := make([]byte, headerSize+len(e.Stdout))
	copy(b, magic)
	binary.LittleEndian.PutUint32(b[8:], FormatVersion)
	binary.LittleEndian.PutUint64(b[12:], uint64(e.Created.UnixNano()))
	binary.LittleEndian.PutUint64(b[20:], math.Float64bits(e.Seconds))
	binary.LittleEndian.PutUint64(b[28:], uint64(len(e.Stdout)))
	sum := sha256.Sum256(e.Stdout)
	copy(b[36:], sum[:])
	copy(b[headerSize:], e.Stdout)
	return b
}

// decodeEntry checks everything the header claims; the payload it returns
// aliases b.
func decodeEntry(b []byte) (Entry, error) {
	if len(b) < headerSize || string(b[:8]) != magic {
		return Entry{}, errCorrupt
	}
	if binary.LittleEndian.Uint32(b[8:]) != FormatVersion {
		return Entry{}, errCorrupt
	}
	secs := math.Float64frombits(binary.LittleEndian.Uint64(b[20:]))
	if math.IsNaN(secs) || math.IsInf(secs, 0) || secs < 0 {
		return Entry{}, errCorrupt
	}
	n := binary.LittleEndian.Uint64(b[28:])
	payload := b[headerSize:]
	if n == 0 || n != uint64(len(payload)) {
		return Entry{}, errCorrupt
	}
	sum := sha256.Sum256(payload)
	if !bytes.Equal(sum[:], b[36:headerSize]) {
		return Entry{}, errCorrupt
	}
	return Entry{
		Stdout:  payload,
		Seconds: secs,
		Created: time.Unix(0, int64(binary.LittleEndian.Uint64(b[12:]))),
	}, nil
}

// cleanSeconds keeps NaN, infinities and negatives out of the file and out of
// the saved-seconds total.
func cleanSeconds(s float64) float64 {
	if math.IsNaN(s) || math.IsInf(s, 0) || s < 0 {
		return 0
	}
	return s
}
