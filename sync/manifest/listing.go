package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// Listing is how a walker on the far side of a trust boundary (the guest)
// reports a tree: either whole (Entries), or as the changes since a
// manifest both sides hold (Base names it; Changed and Deleted are the
// Delta). ID names the manifest the walker now remembers, for the next
// listing's Base. A delta keeps a collect of a large tree with few
// changes from sending, encoding and decoding every entry again.
type Listing struct {
	ID      string   `json:"id"`
	Base    string   `json:"base,omitempty"`
	Entries []Entry  `json:"entries,omitempty"`
	Changed []Entry  `json:"changed,omitempty"`
	Deleted []string `json:"deleted,omitempty"`
	// Skipped is what the walk left out that the user should hear of:
	// special files, unreadable directories, names no manifest may hold,
	// files over the size cap (see Noteworthy). It is text from the far
	// side, for showing only; the paths of files left out for their size
	// are checked as entry paths are, as the host keeps the baseline's
	// entries there.
	Skipped []Exclusion `json:"skipped,omitempty"`
}

// MaxSkipped caps Listing.Skipped but for files left out for their size
// (ReasonTooLarge), which count with the entries: a walker lists at most
// this many, and a decoder refuses more.
const MaxSkipped = 100

// maxRuleLen caps an Exclusion's Rule in a listing.
const maxRuleLen = 256

// Noteworthy returns the exclusions of a walk that a listing reports:
// those the user did not ask for (special files, unreadable directories,
// invalid names, files over the size cap), with rules cut to a bounded
// length; at most MaxSkipped of each reason but ReasonTooLarge. Every
// file left out for its size is listed: the host keeps the baseline's
// entry at its path, so that a file left out never reads as deleted
// (see KeepLeftOut); a decoder counts them with the entries.
func Noteworthy(excluded []Exclusion) []Exclusion {
	var out []Exclusion
	others := 0
	for _, x := range NoteworthyAll(excluded) {
		if x.Reason != ReasonTooLarge {
			if others == MaxSkipped {
				continue
			}
			others++
		}
		if len(x.Rule) > maxRuleLen {
			x.Rule = x.Rule[:maxRuleLen]
		}
		out = append(out, x)
	}
	return out
}

// NoteworthyAll returns the exclusions Noteworthy picks, all of them and
// unchanged: what a State keeps.
func NoteworthyAll(excluded []Exclusion) []Exclusion {
	var out []Exclusion
	for _, x := range excluded {
		switch x.Reason {
		case ReasonSpecial, ReasonUnreadable, ReasonInvalidName, ReasonTooLarge:
			out = append(out, x)
		}
	}
	return out
}

// Delta is how a manifest differs from an older one of the same tree:
// Changed holds the entries that are new or differ in any field, Deleted
// the paths that are gone. Both are sorted by path.
type Delta struct {
	Changed []Entry
	Deleted []string
}

// DeltaOf returns how new differs from old. Both must be sorted.
func DeltaOf(old, new *Manifest) Delta {
	var d Delta
	oe, ne := old.Entries, new.Entries
	i, j := 0, 0
	for i < len(oe) || j < len(ne) {
		switch {
		case j >= len(ne) || (i < len(oe) && oe[i].Path < ne[j].Path):
			d.Deleted = append(d.Deleted, oe[i].Path)
			i++
		case i >= len(oe) || ne[j].Path < oe[i].Path:
			d.Changed = append(d.Changed, ne[j])
			j++
		default:
			if oe[i] != ne[j] {
				d.Changed = append(d.Changed, ne[j])
			}
			i++
			j++
		}
	}
	return d
}

// Apply returns m with d applied. It checks only what it needs to apply
// d exactly: both lists sorted and unique, no path both changed and
// deleted, every deleted path present in m. The result is sorted; it is
// not validated (Listing.Resolve does that).
func (m *Manifest) Apply(d Delta) (*Manifest, error) {
	if err := sortedUnique(len(d.Changed), func(i int) string { return d.Changed[i].Path }); err != nil {
		return nil, fmt.Errorf("changed entries: %w", err)
	}
	if err := sortedUnique(len(d.Deleted), func(i int) string { return d.Deleted[i] }); err != nil {
		return nil, fmt.Errorf("deleted paths: %w", err)
	}
	out := make([]Entry, 0, len(m.Entries)+len(d.Changed))
	oe := m.Entries
	i, c, x := 0, 0, 0
	for i < len(oe) || c < len(d.Changed) {
		switch {
		case c >= len(d.Changed) || (i < len(oe) && oe[i].Path < d.Changed[c].Path):
			if x < len(d.Deleted) && d.Deleted[x] < oe[i].Path {
				return nil, invalid(d.Deleted[x], "deleted, but not in the base manifest")
			}
			if x < len(d.Deleted) && d.Deleted[x] == oe[i].Path {
				x++
			} else {
				out = append(out, oe[i])
			}
			i++
		default:
			p := d.Changed[c].Path
			if x < len(d.Deleted) && d.Deleted[x] <= p {
				if d.Deleted[x] == p {
					return nil, invalid(p, "both changed and deleted")
				}
				return nil, invalid(d.Deleted[x], "deleted, but not in the base manifest")
			}
			if i < len(oe) && oe[i].Path == p {
				i++ // replaced
			}
			out = append(out, d.Changed[c])
			c++
		}
	}
	if x < len(d.Deleted) {
		return nil, invalid(d.Deleted[x], "deleted, but not in the base manifest")
	}
	return &Manifest{Entries: out}, nil
}

// sortedUnique checks that n strings, given by at, are strictly
// increasing.
func sortedUnique(n int, at func(int) string) error {
	for i := 1; i < n; i++ {
		switch prev, p := at(i-1), at(i); {
		case prev == p:
			return invalid(p, "listed twice")
		case prev > p:
			return invalid(p, "not sorted by path (after %q)", prev)
		}
	}
	return nil
}

// DecodeListing reads a JSON Listing from an untrusted source, strictly
// (unknown fields and trailing data are errors) and within
// limits.MaxManifestBytes and limits.MaxEntries. The entries are checked
// by Resolve, which needs the base.
func DecodeListing(r io.Reader, limits Limits) (*Listing, error) {
	l := limits.withDefaults()
	var ls Listing
	if err := decodeStrict(r, l.MaxManifestBytes, &ls); err != nil {
		return nil, fmt.Errorf("decode listing: %w", err)
	}
	large := 0
	for _, x := range ls.Skipped {
		if x.Reason == ReasonTooLarge {
			large++
		}
	}
	if n := len(ls.Entries) + len(ls.Changed) + len(ls.Deleted) + large; n > l.MaxEntries {
		return nil, fmt.Errorf("decode listing: %w", tooLarge("", "%d entries, over the limit of %d", n, l.MaxEntries))
	}
	if n := len(ls.Skipped) - large; n > MaxSkipped {
		return nil, fmt.Errorf("decode listing: %w", tooLarge("", "%d skipped paths, over the limit of %d", n, MaxSkipped))
	}
	for _, x := range ls.Skipped {
		switch {
		case x.Reason != ReasonSpecial && x.Reason != ReasonUnreadable && x.Reason != ReasonInvalidName && x.Reason != ReasonTooLarge:
			return nil, fmt.Errorf("decode listing: %w", invalid("", "skipped path with reason %q", x.Reason))
		case len(x.Path) > l.MaxPathLen || len(x.Rule) > maxRuleLen:
			return nil, fmt.Errorf("decode listing: %w", tooLarge("", "a skipped path or its rule is too long"))
		case x.Reason != ReasonTooLarge && x.Size != 0:
			return nil, fmt.Errorf("decode listing: %w", invalid(x.Path, "a skipped path with a size, for reason %q", x.Reason))
		case x.Reason != ReasonTooLarge:
			continue
		}
		// A file left out for its size: the host keeps the baseline's
		// entries at its path, so the path is held to the rules of an
		// entry's, and the size must be over the host's own cap.
		if err := validPathLen(x.Path, l.AllowGit, l.MaxPathLen); err != nil {
			return nil, fmt.Errorf("decode listing: skipped path: %w", err)
		}
		if x.Dir || x.Size <= l.MaxFileSize {
			return nil, fmt.Errorf("decode listing: %w", invalid(x.Path, "left out as too large, but it is a directory or its size %d is not over the cap of %d", x.Size, l.MaxFileSize))
		}
	}
	return &ls, nil
}

// Resolve returns the manifest the listing describes: Entries when it is
// whole, base with the delta applied when it names baseID. A delta
// against any other base, or a listing that is both, is invalid.
// Setuid, setgid and sticky bits are dropped and the result is validated
// against limits, as Decode does, so a delta is as hostile as a whole
// manifest and is held to the same rules.
func (ls *Listing) Resolve(baseID string, base *Manifest, limits Limits) (*Manifest, error) {
	var m *Manifest
	switch {
	case ls.Base == "":
		if len(ls.Changed)+len(ls.Deleted) > 0 {
			return nil, invalid("", "a whole listing with changed or deleted paths")
		}
		m = &Manifest{Entries: ls.Entries}
	case ls.Base != baseID || baseID == "" || base == nil:
		return nil, invalid("", "a delta against %q, which the host does not hold", ls.Base)
	case len(ls.Entries) > 0:
		return nil, invalid("", "a delta with whole-listing entries")
	default:
		var err error
		if m, err = base.Apply(Delta{Changed: ls.Changed, Deleted: ls.Deleted}); err != nil {
			return nil, err
		}
	}
	if m.Entries == nil {
		m.Entries = []Entry{}
	}
	m.StripSpecialBits()
	if err := m.Validate(limits); err != nil {
		return nil, err
	}
	return m, nil
}

// Encode writes the listing as JSON, one entry per line, in the stable
// form of Manifest.Encode.
func (ls *Listing) Encode(w io.Writer) error {
	bw := bufio.NewWriter(w)
	head, err := json.Marshal(struct {
		ID   string `json:"id"`
		Base string `json:"base,omitempty"`
	}{ls.ID, ls.Base})
	if err != nil {
		return fmt.Errorf("encode listing: %w", err)
	}
	bw.Write(head[:len(head)-1]) // open: more fields follow
	if ls.Base == "" || len(ls.Entries) > 0 {
		bw.WriteString(`,"entries":`)
		if err := encodeEntries(bw, ls.Entries); err != nil {
			return err
		}
	}
	if len(ls.Changed) > 0 {
		bw.WriteString(`,"changed":`)
		if err := encodeEntries(bw, ls.Changed); err != nil {
			return err
		}
	}
	if len(ls.Skipped) > 0 {
		sk, err := json.Marshal(ls.Skipped)
		if err != nil {
			return fmt.Errorf("encode listing: %w", err)
		}
		bw.WriteString(`,"skipped":`)
		bw.Write(sk)
	}
	if len(ls.Deleted) > 0 {
		del, err := json.Marshal(ls.Deleted)
		if err != nil {
			return fmt.Errorf("encode listing: %w", err)
		}
		bw.WriteString(`,"deleted":`)
		bw.Write(del)
	}
	bw.WriteString("}\n")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("encode listing: %w", err)
	}
	return nil
}

// encodeEntries writes entries as a JSON array, one entry per line, as
// encoding/json writes an Entry (without escaping HTML) but by hand: the
// guest encodes every entry of a listing under emulation, where
// reflection cost 58 us an entry.
func encodeEntries(bw *bufio.Writer, entries []Entry) error {
	bw.WriteByte('[')
	var b []byte
	for i := range entries {
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.WriteByte('\n')
		b = appendEntry(b[:0], &entries[i])
		bw.Write(b)
	}
	bw.WriteString("\n]")
	return nil
}

// appendEntry appends e as encoding/json encodes it: fields in
// declaration order, empty ones left out, the mode a decimal number.
func appendEntry(b []byte, e *Entry) []byte {
	b = append(b, `{"path":`...)
	b = appendJSONString(b, e.Path)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, string(e.Type))
	b = append(b, `,"mode":`...)
	b = strconv.AppendUint(b, uint64(e.Mode), 10)
	if e.Size != 0 {
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, e.Size, 10)
	}
	if e.SHA256 != "" {
		b = append(b, `,"sha256":`...)
		b = appendJSONString(b, e.SHA256)
	}
	if e.Target != "" {
		b = append(b, `,"target":`...)
		b = appendJSONString(b, e.Target)
	}
	return append(b, '}')
}

// appendJSONString appends s quoted as encoding/json quotes it without
// escaping HTML: printable ASCII but for the quote and the backslash is
// written as it is, anything else by encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.Encode(s) // a string always encodes
			return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// decodeStrict decodes one JSON value from r into v: unknown fields,
// trailing data and more than max bytes are errors.
func decodeStrict(r io.Reader, max int64, v any) error {
	lr := &io.LimitedReader{R: r, N: max + 1}
	dec := json.NewDecoder(bufio.NewReader(lr))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if lr.N <= 0 {
			return tooLarge("", "encoding is over %d bytes", max)
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalid("", "data after the value")
	}
	return nil
}
