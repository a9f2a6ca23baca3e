package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// testLog is a log in a temporary directory with its own key file.
func testLog(t *testing.T, name string, keys Keys) Log {
	t.Helper()
	dir := t.TempDir()
	if keys == nil {
		keys = FileKeys{Path: filepath.Join(dir, "keys", "audit.key")}
	}
	return Log{Name: name, Path: filepath.Join(dir, "audit.jsonl"), HeadPath: filepath.Join(dir, "audit.head"), LockPath: filepath.Join(dir, "lock"), Keys: keys}
}

type event struct {
	Event string `json:"event"`
	Data  any    `json:"data,omitempty"`
}

// fill appends n events to l and returns its lines.
func fill(t *testing.T, l Log, n int) [][]byte {
	t.Helper()
	for i := range n {
		if err := l.Append(event{Event: fmt.Sprintf("e%d", i+1), Data: map[string]any{"n": i + 1, "path": "a/b", "log": l.Name}}); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(l.Path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	return lines[:len(lines)-1] // each with its newline
}

func public(t *testing.T, l Log) ed25519.PublicKey {
	t.Helper()
	pub, err := l.Keys.Public()
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func TestAppendVerify(t *testing.T) {
	l := testLog(t, "abcd1234", nil)
	lines := fill(t, l, 5)
	r, err := l.Check()
	if err != nil {
		t.Fatal(err)
	}
	if r.Lines != 5 || r.Seq != 5 || r.Unchained != 0 || r.Key != KeyID(public(t, l)) {
		t.Errorf("result %+v", r)
	}
	if h, ok := r.HashAt(5); !ok || h != r.Head {
		t.Errorf("HashAt(5) = %q, %v; head %q", h, ok, r.Head)
	}
	// The event's fields come first, as encoding/json wrote them, so the
	// log reads as before; a reader of events ignores the chain's.
	if !bytes.HasPrefix(lines[0], []byte(`{"event":"e1","data":{"log":"abcd1234","n":1,"path":"a/b"},"seq":1,"prev":"000`)) {
		t.Errorf("first line %s", lines[0])
	}
	var ev event
	if err := json.Unmarshal(lines[2], &ev); err != nil || ev.Event != "e3" {
		t.Errorf("line 3 read back as %+v, %v", ev, err)
	}
}

// Every way of rewriting the log is caught at the right line, for the
// right reason.
func TestTamper(t *testing.T) {
	l := testLog(t, "abcd1234", nil)
	lines := fill(t, l, 5)
	head, err := os.ReadFile(l.HeadPath)
	if err != nil {
		t.Fatal(err)
	}
	other := testLog(t, "ffff0000", l.Keys) // same key, another sandbox (its events differ, as real ones do by their time)
	otherLines := fill(t, other, 5)
	otherHead, _ := os.ReadFile(other.HeadPath)
	stranger := testLog(t, "abcd1234", nil) // another key, same name
	strangerLines := fill(t, stranger, 5)
	strangerHead, _ := os.ReadFile(stranger.HeadPath)

	join := func(ls ...[]byte) []byte { return bytes.Join(ls, nil) }
	edited := bytes.Replace(lines[2], []byte(`"path":"a/b"`), []byte(`"path":"a/c"`), 1)
	for _, c := range []struct {
		name  string
		lines []byte
		head  []byte
		line  int
		want  string
	}{
		{"edit a line", join(lines[0], lines[1], edited, lines[3], lines[4]), head, 3, "bad signature"},
		{"delete a line in the middle", join(lines[0], lines[1], lines[3], lines[4]), head, 3, "seq out of order"},
		{"delete the last line", join(lines[0], lines[1], lines[2], lines[3]), head, 5, "truncated"},
		{"reorder two lines", join(lines[0], lines[2], lines[1], lines[3], lines[4]), head, 2, "seq out of order"},
		{"a line from another sandbox", join(lines[0], lines[1], otherLines[2], lines[3], lines[4]), head, 3, "prev mismatch"},
		{"another sandbox's log and head", join(otherLines...), otherHead, 0, "head of log"},
		{"another sandbox's first line", join(otherLines[0], lines[1], lines[2], lines[3], lines[4]), head, 2, "prev mismatch"},
		{"re-signed with another key", join(strangerLines...), strangerHead, 1, "not this home's key"},
		{"a line added after the head", join(join(lines...), otherLines[0]), head, 6, "seq out of order"},
		{"the head deleted", join(lines...), nil, 0, "missing"},
		{"the head of an older log", join(lines...), signedHead(t, l, "abcd1234", 4, "x"), 5, "extra lines after the head"},
		{"chain stripped, head kept", []byte("{\"event\":\"e1\"}\n"), head, 0, "chain was stripped"},
		{"a plain line added", join(join(lines...), []byte("{\"event\":\"x\"}\n")), head, 6, "unchained"},
		{"garbage", []byte("\x00\xff\xfe garbage\n"), head, 1, "not a JSON object"},
		{"a blank line", join(lines[0], []byte("\n"), lines[1]), head, 2, "blank"},
		{"cut in a line", join(lines[0], lines[1][:20]), head, 2, "unfinished"},
		{"duplicate key", []byte(`{"event":"a","event":"b","seq":1,"prev":"0","key":"k","sig":"s"}` + "\n"), head, 1, "not canonical"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Verify("abcd1234", c.lines, c.head, public(t, l))
			var ae *Error
			if !errors.As(err, &ae) {
				t.Fatalf("Verify: %v, want an *Error", err)
			}
			if ae.Line != c.line || !strings.Contains(ae.Reason, c.want) {
				t.Errorf("line %d %q, want line %d %q", ae.Line, ae.Reason, c.line, c.want)
			}
		})
	}
}

// signedHead is a head naming line seq with hash, signed with l's key.
func signedHead(t *testing.T, l Log, name string, seq int64, hash string) []byte {
	key, err := l.Keys.Signer()
	if err != nil {
		t.Fatal(err)
	}
	h, err := signHead(head{Log: name, Seq: seq, Hash: hash}, key)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A log made before the chain is unchained, not tampered; once chained
// lines follow, the chain covers it: an edit of an old line shows.
func TestUnchained(t *testing.T) {
	l := testLog(t, "abcd1234", nil)
	old := "{\"event\":\"created\"}\n{\"event\":\"snapshot\"}\n"
	if err := os.WriteFile(l.Path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Verify(l.Name, []byte(old), nil, nil)
	if err != nil || r.Unchained != 2 || r.Lines != 2 || r.Seq != 0 {
		t.Fatalf("old log: %+v, %v", r, err)
	}
	fill(t, l, 2)
	r, err = l.Check()
	if err != nil || r.Unchained != 2 || r.Lines != 4 || r.Seq != 4 {
		t.Fatalf("old log chained on: %+v, %v", r, err)
	}
	data, _ := os.ReadFile(l.Path)
	head, _ := os.ReadFile(l.HeadPath)
	data = bytes.Replace(data, []byte("snapshot"), []byte("snapshoT"), 1)
	var ae *Error
	if _, err := Verify(l.Name, data, head, public(t, l)); !errors.As(err, &ae) || ae.Line != 3 || !strings.Contains(ae.Reason, "prev mismatch") {
		t.Errorf("old line edited after the chain began: %v", err)
	}
}

// A crash that left a line without its newline, or a line past the head,
// is put right by the next append's chain: the torn line stays bad, the
// head catches up.
func TestAppendAfterTornLine(t *testing.T) {
	l := testLog(t, "abcd1234", nil)
	fill(t, l, 2)
	f, _ := os.OpenFile(l.Path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"event":"cut`)
	f.Close()
	fill(t, l, 1)
	var ae *Error
	if _, err := l.Check(); !errors.As(err, &ae) || ae.Line != 3 || !strings.Contains(ae.Reason, "not a JSON object") {
		t.Errorf("after a torn line: %v", err)
	}
}

func TestConcurrentAppends(t *testing.T) {
	l := testLog(t, "abcd1234", nil)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			other := l // each its own Log value, one lock file
			for i := range 20 {
				if err := other.Append(event{Event: fmt.Sprintf("g%d-%d", g, i)}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if r, err := l.Check(); err != nil || r.Seq != 80 {
		t.Errorf("after 80 concurrent appends: %+v, %v", r, err)
	}
}

// Hostile values: control characters and a huge value sign and verify
// like any other; an event with the chain's fields is refused.
func TestHostileValues(t *testing.T) {
	l := testLog(t, "abcd1234", nil)
	for _, v := range []string{"\x1b]0;pwned\x07\x1b[2J", "\u202e\u0000\r\n", strings.Repeat("x", 1<<20), "\xff\xfe"} {
		if err := l.Append(event{Event: "e", Data: v}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Check(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(l.Path)
	if bytes.ContainsAny(data, "\x1b\x07\r") {
		t.Error("a control character is in the log raw; JSON escapes it")
	}
	if err := l.Append(map[string]any{"event": "e", "seq": 1}); err == nil {
		t.Error("an event with a seq of its own was appended")
	}
	if err := l.Append([]int{1}); err == nil {
		t.Error("a JSON array was appended as an event")
	}
	// An enormous line is refused by Verify, not read into trouble.
	huge := append(bytes.Repeat([]byte("a"), MaxLine), '\n')
	var ae *Error
	if _, err := Verify(l.Name, huge, nil, nil); !errors.As(err, &ae) || ae.Line != 1 {
		t.Errorf("a %d-byte line: %v", len(huge), err)
	}
}

func FuzzVerify(f *testing.F) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	l := Log{Name: "abcd1234"}
	line, _, _ := signLine([]byte(`{"event":"x"}`), 1, zeroHash, key)
	f.Add(append(line, '\n'), []byte(nil))
	f.Add([]byte("{}\n{\"seq\":1}\n"), []byte(`{"seq":9}`))
	f.Fuzz(func(t *testing.T, lines, head []byte) {
		r, err := Verify(l.Name, lines, head, key.Public().(ed25519.PublicKey))
		var ae *Error
		if err != nil && !errors.As(err, &ae) {
			t.Fatalf("an error that is not an *Error: %v", err)
		}
		if err == nil && r.Seq > 0 && head == nil {
			t.Fatal("a chained log without its head verified")
		}
	})
}
