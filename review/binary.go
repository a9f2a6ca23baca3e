package review

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
)

// gitBlobID is the object name git gives content: SHA-1 of a blob header
// and the bytes. git apply needs it to accept a binary patch.
func gitBlobID(data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

const zeroBlobID = "0000000000000000000000000000000000000000"

// writeBinaryLiteral writes a "GIT binary patch" whose forward hunk is the
// whole new content (and reverse hunk the old one), the form `git diff
// --binary` uses and `git apply` accepts given a full index line.
func writeBinaryLiteral(w *bytes.Buffer, oldData, newData []byte) {
	w.WriteString("GIT binary patch\n")
	writeLiteral(w, newData)
	writeLiteral(w, oldData)
}

func writeLiteral(w *bytes.Buffer, data []byte) {
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	_, _ = zw.Write(data)
	_ = zw.Close()
	fmt.Fprintf(w, "literal %d\n", len(data))
	enc := z.Bytes()
	for len(enc) > 0 {
		n := min(len(enc), 52)
		if n <= 26 {
			w.WriteByte(byte('A' + n - 1))
		} else {
			w.WriteByte(byte('a' + n - 27))
		}
		base85(w, enc[:n])
		w.WriteByte('\n')
		enc = enc[n:]
	}
	w.WriteByte('\n')
}

const base85Alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"

// base85 encodes data as git does: each group of 4 bytes (zero padded) as
// 5 digits, most significant first.
func base85(w *bytes.Buffer, data []byte) {
	for len(data) > 0 {
		var v uint32
		for i := range 4 {
			v <<= 8
			if i < len(data) {
				v |= uint32(data[i])
			}
		}
		var digits [5]byte
		for i := 4; i >= 0; i-- {
			digits[i] = base85Alphabet[v%85]
			v /= 85
		}
		w.Write(digits[:])
		data = data[min(4, len(data)):]
	}
}
