package packaging

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ICNSEntry is one element of an .icns file: a four-character type
// ("ic10" is a 1024-pixel PNG, "ic07" a 128-pixel one) and its data.
type ICNSEntry struct {
	Type string
	Data []byte
}

// EncodeICNS writes an .icns container: "icns" and the file's length, then
// each entry as its type, its length (header included) and its data, all
// lengths 32-bit big-endian. No Mac tool is needed.
func EncodeICNS(entries []ICNSEntry) ([]byte, error) {
	n := 8
	for _, e := range entries {
		if len(e.Type) != 4 {
			return nil, fmt.Errorf("icns: entry type %q is not four bytes", e.Type)
		}
		n += 8 + len(e.Data)
	}
	if n > 1<<31 {
		return nil, errors.New("icns: too large")
	}
	b := make([]byte, 0, n)
	b = append(b, "icns"...)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	for _, e := range entries {
		b = append(b, e.Type...)
		b = binary.BigEndian.AppendUint32(b, uint32(8+len(e.Data)))
		b = append(b, e.Data...)
	}
	return b, nil
}

// DecodeICNS reads an .icns container back into its entries.
func DecodeICNS(b []byte) ([]ICNSEntry, error) {
	if len(b) < 8 || string(b[:4]) != "icns" {
		return nil, errors.New("icns: no icns header")
	}
	if n := binary.BigEndian.Uint32(b[4:8]); int64(n) != int64(len(b)) {
		return nil, fmt.Errorf("icns: header says %d bytes, file has %d", n, len(b))
	}
	var out []ICNSEntry
	for off := 8; off < len(b); {
		if len(b)-off < 8 {
			return nil, fmt.Errorf("icns: truncated entry header at %d", off)
		}
		n := int64(binary.BigEndian.Uint32(b[off+4 : off+8]))
		if n < 8 || int64(off)+n > int64(len(b)) {
			return nil, fmt.Errorf("icns: entry %q at %d has bad length %d", b[off:off+4], off, n)
		}
		out = append(out, ICNSEntry{Type: string(b[off : off+4]), Data: b[off+8 : off+int(n)]})
		off += int(n)
	}
	return out, nil
}
