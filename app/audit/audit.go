// Package audit keeps audit logs that cannot be rewritten unseen. Each
// line is a JSON object: the event's own fields, then seq (its line
// number, from 1), prev (the hex SHA-256 of the previous line's
// canonical JSON, RFC 8785; zeros on the first line), key (KeyID of the
// key that signed it) and sig (base64 Ed25519 over the line's canonical
// JSON without sig). A signed head file, rewritten atomically on every
// append, names the last line, so that lines cut off the end show as
// well as lines edited, deleted, moved or added. Verify names the first
// bad line and why; a receipt (Receipt) signs, by hashes only, what a
// sandbox's promotion rests on.
//
// Every log's first line has prev all zeros; two logs are told apart by
// the name their head is signed with and by their events (each has its
// time).
//
// What it proves: the log was written by a holder of the home's key, in
// this order, and is whole up to its head. What it does not: a process
// of the same user that can read the key can write a new chain that
// verifies. Lines written before the chain existed read as unchained,
// not as tampered.
//
// It is chain logic over files and must not import anything of the
// module but internal/...: app/sandbox builds on it.
package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gowebpki/jcs"

	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/internal/filelock"
)

// The fields the chain adds to every line; an event must not have them.
var chainFields = []string{"seq", "prev", "key", "sig"}

// zeroHash is prev on a log's first line.
var zeroHash = strings.Repeat("0", 64)

// MaxLine caps one line; Append refuses longer events and Verify calls a
// longer line bad.
const MaxLine = 64 << 20

// Log is one chained audit log on disk.
type Log struct {
	// Name is bound into the head: the sandbox's ID, or "store" for the
	// store's own log, so that one log's head does not pass for another's.
	Name string
	// Path holds the lines, HeadPath the head and LockPath the lock that
	// appends and checks take.
	Path, HeadPath, LockPath string
	Keys                     Keys
}

// head is the head file: the last line's number and hash, signed.
type head struct {
	Log  string `json:"log"`
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
	Key  string `json:"key"`
	Sig  string `json:"sig,omitempty"`
}

// Append adds event (any value that encodes as a JSON object without the
// chain's fields) as the log's next line, signed, under the log's lock,
// synced, then rewrites the head. A crash between the two leaves one line
// past the head, which Verify reports and the next append puts right.
func (l Log) Append(event any) error {
	body, err := json.Marshal(event)
	if err != nil {
		return fmt.Errorf("append to %s: %w", l.Path, err)
	}
	if err := checkEvent(body); err != nil {
		return fmt.Errorf("append to %s: %w", l.Path, err)
	}
	key, err := l.Keys.Signer()
	if err != nil {
		return err
	}
	unlock, err := filelock.Lock(l.LockPath)
	if err != nil {
		return err
	}
	defer unlock()
	f, err := os.OpenFile(l.Path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	t, err := readTail(f)
	if err != nil {
		return fmt.Errorf("append to %s: %w", l.Path, err)
	}
	line, hash, err := signLine(body, t.seq+1, t.hash, key)
	if err != nil {
		return fmt.Errorf("append to %s: %w", l.Path, err)
	}
	out := append(line, '\n')
	if t.torn {
		out = append([]byte{'\n'}, out...) // never glued onto a torn line
	}
	if _, err := f.Write(out); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	h, err := signHead(head{Log: l.Name, Seq: t.seq + 1, Hash: hash}, key)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(l.HeadPath, h, 0o600)
}

// checkEvent refuses what is not a JSON object, is too long, or has a
// field of the chain's.
func checkEvent(body []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return errors.New("an audit event must be a JSON object")
	}
	if len(body) > MaxLine-1024 {
		return fmt.Errorf("an audit event of %d bytes is over the %d a line may hold", len(body), MaxLine)
	}
	for _, k := range chainFields {
		if _, ok := fields[k]; ok {
			return fmt.Errorf("an audit event must not have a %q field: the chain's own", k)
		}
	}
	return nil
}

// signLine is body (a JSON object) with seq, prev, key and sig added at
// its end, and the hash of the result.
func signLine(body []byte, seq int64, prev string, key ed25519.PrivateKey) (line []byte, hash string, err error) {
	var b bytes.Buffer
	b.Write(bytes.TrimSuffix(bytes.TrimSpace(body), []byte("}")))
	if !bytes.Equal(bytes.TrimSpace(b.Bytes()), []byte("{")) {
		b.WriteByte(',')
	}
	fmt.Fprintf(&b, `"seq":%d,"prev":%q,"key":%q}`, seq, prev, KeyID(key.Public().(ed25519.PublicKey)))
	canon, err := jcs.Transform(b.Bytes())
	if err != nil {
		return nil, "", err
	}
	sig := base64.StdEncoding.EncodeToString(ed25519.Sign(key, canon))
	b.Truncate(b.Len() - 1)
	fmt.Fprintf(&b, `,"sig":%q}`, sig)
	hash, err = lineHash(b.Bytes())
	return b.Bytes(), hash, err
}

// lineHash is the hex SHA-256 of a line's canonical JSON.
func lineHash(line []byte) (string, error) {
	canon, err := jcs.Transform(line)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

func signHead(h head, key ed25519.PrivateKey) ([]byte, error) {
	h.Key, h.Sig = KeyID(key.Public().(ed25519.PublicKey)), ""
	canon, err := canonical(h)
	if err != nil {
		return nil, err
	}
	h.Sig = base64.StdEncoding.EncodeToString(ed25519.Sign(key, canon))
	data, err := json.Marshal(h)
	return append(data, '\n'), err
}

// canonical is v's RFC 8785 JSON.
func canonical(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(data)
}

// tail is where a log ends: the last line's seq (its line number when it
// carries none) and hash, and whether it lacks its newline.
type tail struct {
	seq  int64
	hash string
	torn bool
}

// readTail reads the last line of f. A last line that is chained gives
// its seq; one that is not (made before the chain, or damaged) makes the
// next seq its line number + 1, counted, and chains from its hash (of its
// raw bytes when it is not JSON), so that the chain covers what it
// follows from then on.
func readTail(f *os.File) (tail, error) {
	fi, err := f.Stat()
	if err != nil {
		return tail{}, err
	}
	size := fi.Size()
	if size == 0 {
		return tail{hash: zeroHash}, nil
	}
	last, err := lastLine(f, size)
	if err != nil {
		return tail{}, err
	}
	t := tail{torn: last.torn}
	if t.hash, err = lineHash(last.text); err != nil {
		sum := sha256.Sum256(last.text)
		t.hash = hex.EncodeToString(sum[:])
	}
	var c struct {
		Seq *int64 `json:"seq"`
	}
	if json.Unmarshal(last.text, &c) == nil && c.Seq != nil && *c.Seq > 0 {
		t.seq = *c.Seq
		return t, nil
	}
	n, err := countLines(f)
	t.seq = n
	return t, err
}

type lastText struct {
	text []byte
	torn bool
}

// lastLine reads the log's last line (up to MaxLine of it) from its end.
func lastLine(f *os.File, size int64) (lastText, error) {
	end := size
	var one [1]byte
	if _, err := f.ReadAt(one[:], size-1); err != nil {
		return lastText{}, err
	}
	torn := one[0] != '\n'
	if !torn {
		end--
	}
	start := max(end-MaxLine, 0)
	const chunk = 64 << 10
	for pos := end; pos > start; {
		from := max(pos-chunk, start)
		buf := make([]byte, pos-from)
		if _, err := f.ReadAt(buf, from); err != nil && !errors.Is(err, io.EOF) {
			return lastText{}, err
		}
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			start = from + int64(i) + 1
			break
		}
		pos = from
	}
	text := make([]byte, end-start)
	if _, err := f.ReadAt(text, start); err != nil && !errors.Is(err, io.EOF) {
		return lastText{}, err
	}
	return lastText{text: text, torn: torn}, nil
}

// countLines counts f's lines, a last one without its newline too.
func countLines(f *os.File) (int64, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	var n int64
	buf := make([]byte, 256<<10)
	lastNL := true
	for {
		k, err := f.Read(buf)
		if k > 0 {
			n += int64(bytes.Count(buf[:k], []byte{'\n'}))
			lastNL = buf[k-1] == '\n'
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if !lastNL {
		n++
	}
	return n, nil
}

// ReadLocked returns the log's lines and its head (nil when the file is
// missing) read together under the log's lock, so that an append under
// way is not seen half done. A missing log reads as empty.
func (l Log) ReadLocked() (lines, head []byte, err error) {
	unlock, err := filelock.Lock(l.LockPath)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	lines, err = os.ReadFile(l.Path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	head, err = os.ReadFile(l.HeadPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	return lines, head, nil
}

// Check verifies the log with the home's public key (Verify). A home
// without a key verifies only a log that has no chained line.
func (l Log) Check() (Result, error) {
	lines, head, err := l.ReadLocked()
	if err != nil {
		return Result{}, err
	}
	pub, err := l.Keys.Public()
	if err != nil && !errors.Is(err, ErrNoKey) {
		return Result{}, err
	}
	return Verify(l.Name, lines, head, pub)
}
