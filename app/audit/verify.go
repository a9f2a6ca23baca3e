package audit

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
)

// quote shows a value taken from the file, quoted and cut short.
func quote(s string) string {
	if len(s) > 40 {
		return strconv.Quote(s[:40]) + "…"
	}
	return strconv.Quote(s)
}

// Result is what Verify found in a log that is not tampered with.
type Result struct {
	// Lines is how many lines the log has; the first Unchained of them
	// carry no chain (written before Airlock chained its audit logs).
	Lines     int `json:"lines"`
	Unchained int `json:"unchained,omitempty"`
	// Seq and Head are the last line's number and hash (0 and "" when no
	// line is chained); Key is the id of the key that signed the lines.
	Seq  int64  `json:"seq"`
	Head string `json:"head,omitempty"`
	Key  string `json:"key,omitempty"`

	hashes []string
}

// HashAt is the hash of line seq, and whether the log has it.
func (r Result) HashAt(seq int64) (string, bool) {
	if seq < 1 || seq > int64(len(r.hashes)) {
		return "", false
	}
	return r.hashes[seq-1], true
}

// Error is a log that is not as its key and head say: the first bad line
// and why. Line 0 is the head file itself.
type Error struct {
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return "audit head: " + e.Reason
	}
	return fmt.Sprintf("audit line %d: %s", e.Line, e.Reason)
}

// Verify checks the log named name (its lines and its head file's
// content, nil when it has none) against pub, the home's public key (nil
// when the home has none). It returns an *Error naming the first line
// that is bad and why: not JSON, seq out of order (a line deleted, added
// or moved), prev not the line before (that line edited or replaced),
// signed by another key, a bad signature (the line edited), an unchained
// line after chained ones, or, against the head, lines cut off the end
// (truncated) or added past it. A log none of whose lines is chained and
// that has no head was made before the chain: its Result has Unchained ==
// Lines and no error.
func Verify(name string, lines, headData []byte, pub ed25519.PublicKey) (Result, error) {
	var r Result
	keyID := ""
	if pub != nil {
		keyID = KeyID(pub)
	}
	rest := lines
	for n := 1; len(rest) > 0; n++ {
		line, after, found := bytes.Cut(rest, []byte{'\n'})
		rest = after
		if !found {
			return r, &Error{n, "unfinished: no newline at its end (a write cut short, or the file cut in the middle of a line)"}
		}
		r.Lines = n
		prev := zeroHash
		if n > 1 {
			prev = r.hashes[n-2]
		}
		hash, chained, err := checkLine(line, int64(n), prev, pub, keyID)
		if err != nil {
			return r, &Error{n, err.Error()}
		}
		switch {
		case !chained && r.Seq > 0:
			return r, &Error{n, "unchained (no seq, prev or sig) after chained lines: added by hand"}
		case !chained:
			r.Unchained = n
		default:
			r.Seq, r.Head, r.Key = int64(n), hash, keyID
		}
		r.hashes = append(r.hashes, hash)
	}
	return r, checkHead(name, headData, r, pub, keyID)
}

// checkLine verifies line n of a log; chained is false for a line with
// none of the chain's fields.
func checkLine(line []byte, n int64, prev string, pub ed25519.PublicKey, keyID string) (hash string, chained bool, err error) {
	if len(bytes.TrimSpace(line)) == 0 {
		return "", false, fmt.Errorf("blank: an append never writes one")
	}
	if len(line) >= MaxLine {
		return "", false, fmt.Errorf("%d bytes long, over the %d a line may hold", len(line), MaxLine)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil || fields == nil {
		return "", false, fmt.Errorf("not a JSON object")
	}
	hash, err = lineHash(line)
	if err != nil {
		return "", false, fmt.Errorf("not canonical JSON (%v)", err)
	}
	var missing []string
	for _, k := range chainFields {
		if _, ok := fields[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) == len(chainFields) {
		return hash, false, nil
	}
	if len(missing) > 0 {
		return "", false, fmt.Errorf("%s missing: the chain's fields were edited", missing[0])
	}
	var seq int64
	var lprev, key, sig string
	if json.Unmarshal(fields["seq"], &seq) != nil || json.Unmarshal(fields["prev"], &lprev) != nil ||
		json.Unmarshal(fields["key"], &key) != nil || json.Unmarshal(fields["sig"], &sig) != nil {
		return "", false, fmt.Errorf("seq, prev, key or sig is not of its type")
	}
	switch {
	case seq != n:
		return "", false, fmt.Errorf("seq out of order: it says %d where %d belongs (a line deleted, added or moved)", seq, n)
	case lprev != prev:
		return "", false, fmt.Errorf("prev mismatch: it does not chain from line %d (that line edited or replaced, or this one taken from another log)", n-1)
	case pub == nil:
		return "", false, fmt.Errorf("signed by key %s, and this home has no audit key to check it with", quote(key))
	case key != keyID:
		return "", false, fmt.Errorf("signed by key %s, not this home's key %s", quote(key), keyID)
	}
	delete(fields, "sig")
	unsigned, err := canonical(fields)
	if err != nil {
		return "", false, fmt.Errorf("not canonical JSON (%v)", err)
	}
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || !ed25519.Verify(pub, unsigned, raw) {
		return "", false, fmt.Errorf("bad signature: the line was edited after it was signed")
	}
	return hash, true, nil
}

// checkHead verifies the head file against what the lines gave.
func checkHead(name string, data []byte, r Result, pub ed25519.PublicKey, keyID string) error {
	if data == nil {
		if r.Seq > 0 {
			return &Error{0, "missing (audit.head): lines may have been cut off the end"}
		}
		return nil
	}
	var h head
	if err := json.Unmarshal(data, &h); err != nil {
		return &Error{0, "not JSON"}
	}
	if pub == nil {
		return &Error{0, "this home has no audit key to check it with"}
	}
	if h.Key != keyID {
		return &Error{0, fmt.Sprintf("signed by key %s, not this home's key %s", quote(h.Key), keyID)}
	}
	sig, err := base64.StdEncoding.DecodeString(h.Sig)
	h.Sig = ""
	unsigned, cerr := canonical(h)
	if err != nil || cerr != nil || !ed25519.Verify(pub, unsigned, sig) {
		return &Error{0, "bad signature: the head was edited"}
	}
	switch {
	case h.Log != name:
		return &Error{0, fmt.Sprintf("it is the head of log %s, not of %s: the log was swapped", quote(h.Log), name)}
	case r.Seq == 0:
		return &Error{0, fmt.Sprintf("it names line %d, and no line is chained: the chain was stripped from the log", h.Seq)}
	case h.Seq > r.Seq:
		return &Error{r.Lines + 1, fmt.Sprintf("truncated: the head says the log has %d lines, it ends after %d", h.Seq, r.Lines)}
	case h.Seq < r.Seq:
		return &Error{max(int(h.Seq)+1, 1), fmt.Sprintf("extra lines after the head: it names line %d as the last, the log has %d", h.Seq, r.Lines)}
	case h.Hash != r.Head:
		return &Error{r.Lines, "not the last line the head names: replaced"}
	}
	return nil
}
