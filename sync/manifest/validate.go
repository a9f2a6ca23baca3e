package manifest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"strings"
	"unicode/utf8"
)

// Sentinels for errors.Is on a *ValidationError.
var (
	// ErrInvalid means a manifest or path breaks a structural rule: treat
	// its source as hostile.
	ErrInvalid = errors.New("invalid manifest")
	// ErrTooLarge means a cap in Limits was exceeded.
	ErrTooLarge = errors.New("manifest over limits")
)

// ValidationError names the path and the rule it breaks.
type ValidationError struct {
	Path string // "" when the rule is about the whole manifest
	Rule string
	Err  error // ErrInvalid or ErrTooLarge
}

func (e *ValidationError) Error() string {
	if e.Path == "" {
		return "manifest: " + e.Rule
	}
	return fmt.Sprintf("manifest entry %q: %s", e.Path, e.Rule)
}

func (e *ValidationError) Unwrap() error { return e.Err }

func invalid(p, format string, args ...any) error {
	return &ValidationError{Path: p, Rule: fmt.Sprintf(format, args...), Err: ErrInvalid}
}

func tooLarge(p, format string, args ...any) error {
	return &ValidationError{Path: p, Rule: fmt.Sprintf(format, args...), Err: ErrTooLarge}
}

// Limits caps what a manifest from an untrusted source may hold. A zero
// field takes the default below; a negative one means no limit.
type Limits struct {
	MaxEntries       int   // entries of any type; default 500,000
	MaxFileSize      int64 // bytes of one file; default 1 GiB
	MaxTotalBytes    int64 // bytes of all files; default 4 GiB
	MaxPathLen       int   // bytes of one path; default 4096 (an element is always at most 255)
	MaxTargetLen     int   // bytes of a symlink target; default 4095
	MaxManifestBytes int64 // bytes of encoded JSON read by Decode; default 512 MiB
	// AllowGit accepts paths inside .git (never accepted by ValidPath).
	AllowGit bool
	// CaseSensitive accepts two paths that differ only in letter case. By
	// default they are rejected: on a case-insensitive disk (macOS's
	// default) both would be written to the same file.
	CaseSensitive bool
}

const (
	defaultMaxEntries    = 500_000
	defaultMaxFileSize   = 1 << 30
	defaultMaxTotalBytes = 4 << 30
	defaultMaxPathLen    = 4096
	maxNameLen           = 255
	defaultMaxTargetLen  = 4095
	defaultMaxManifest   = 512 << 20
)

// pick returns def for 0 and "no limit" for a negative v.
func pick[T int | int64](v, def, unlimited T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return unlimited
	}
	return v
}

// withDefaults fills zero fields.
func (l Limits) withDefaults() Limits {
	l.MaxEntries = pick(l.MaxEntries, defaultMaxEntries, math.MaxInt)
	l.MaxFileSize = pick(l.MaxFileSize, defaultMaxFileSize, math.MaxInt64)
	l.MaxTotalBytes = pick(l.MaxTotalBytes, defaultMaxTotalBytes, math.MaxInt64)
	l.MaxPathLen = pick(l.MaxPathLen, defaultMaxPathLen, math.MaxInt)
	l.MaxTargetLen = pick(l.MaxTargetLen, defaultMaxTargetLen, math.MaxInt)
	l.MaxManifestBytes = pick(l.MaxManifestBytes, defaultMaxManifest, math.MaxInt64-1)
	return l
}

// FileSizeCap is the cap on one file that l sets: its MaxFileSize with
// the default filled in, math.MaxInt64 for none.
func (l Limits) FileSizeCap() int64 {
	return l.withDefaults().MaxFileSize
}

// ValidPath checks a path that came from an untrusted source: relative,
// slash-separated and clean (no empty, "." or ".." elements, no leading or
// trailing slash), valid UTF-8 without NUL, control characters or
// backslashes, at most 4096 bytes with elements of at most 255, and no
// element that is, or that a case-insensitive disk would take for, ".git".
func ValidPath(p string) error {
	return validPathLen(p, false, defaultMaxPathLen)
}

func validPath(p string, allowGit bool) error {
	return validPathLen(p, allowGit, defaultMaxPathLen)
}

func validPathLen(p string, allowGit bool, maxLen int) error {
	switch {
	case p == "":
		return invalid(p, "empty path")
	case len(p) > maxLen:
		return invalid(p[:64]+"…", "path is %d bytes, over the limit of %d", len(p), maxLen)
	case !utf8.ValidString(p):
		return invalid(p, "path is not valid UTF-8")
	case strings.IndexByte(p, 0) >= 0:
		return invalid(p, "path contains a NUL byte")
	case strings.IndexByte(p, '\\') >= 0:
		return invalid(p, "path contains a backslash (only / separates elements)")
	case p[0] == '/':
		return invalid(p, "absolute path: paths must be relative to the workspace")
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return invalid(p, "path contains control character %U", r)
		}
	}
	for elem := range strings.SplitSeq(p, "/") {
		switch {
		case elem == "":
			return invalid(p, "empty path element (leading, trailing or double slash)")
		case elem == "." || elem == "..":
			return invalid(p, "%q element: paths must be clean and stay inside the workspace", elem)
		case len(elem) > maxNameLen:
			return invalid(p, "path element is %d bytes, over the limit of %d", len(elem), maxNameLen)
		case !allowGit && isGitName(elem):
			return invalid(p, "path inside .git (%q): git metadata is never taken from the guest", elem)
		}
	}
	return nil
}

// isGitName reports whether a disk that folds case and ignores the
// invisible code points HFS+ ignores (as git's is_hfs_dotgit) would see
// ".git".
func isGitName(elem string) bool {
	if len(elem) < 4 || len(elem) > 64 {
		return false
	}
	stripped := strings.Map(func(r rune) rune {
		switch {
		case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
			return -1
		}
		return r
	}, elem)
	return strings.EqualFold(stripped, ".git")
}

// specialBits are the setuid, setgid and sticky bits in both Go's
// representation and the raw Unix one (0o7000), which a hostile encoder
// might send.
const specialBits = fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky | 0o7000

// StripSpecialBits clears setuid, setgid and sticky bits from every entry
// and returns the paths it changed, for the audit trail. Decode calls it:
// dropping those bits is the normal path for a manifest from the guest.
func (m *Manifest) StripSpecialBits() []string {
	var changed []string
	for i := range m.Entries {
		if m.Entries[i].Mode&specialBits != 0 {
			m.Entries[i].Mode &^= specialBits
			changed = append(changed, m.Entries[i].Path)
		}
	}
	return changed
}

// Validate checks a manifest from an untrusted source: entries sorted and
// unique, valid paths (see ValidPath), known types, permission bits only
// (setuid, setgid and sticky are rejected: call StripSpecialBits first, as
// Decode does), fields that fit the type, every parent present as a
// directory (so nothing lives under a symlink or a file, and nothing
// escapes through a link), symlink targets without NUL (they are data,
// never followed), the caps of limits, and no two paths equal but for case
// unless limits.CaseSensitive.
func (m *Manifest) Validate(limits Limits) error {
	l := limits.withDefaults()
	if len(m.Entries) > l.MaxEntries {
		return tooLarge("", "%d entries, over the limit of %d", len(m.Entries), l.MaxEntries)
	}
	types := make(map[string]Type, len(m.Entries))
	var folded map[string]string
	if !l.CaseSensitive {
		folded = make(map[string]string, len(m.Entries))
	}
	var total int64
	for i, e := range m.Entries {
		if err := validPathLen(e.Path, l.AllowGit, l.MaxPathLen); err != nil {
			return err
		}
		if i > 0 {
			switch prev := m.Entries[i-1].Path; {
			case prev == e.Path:
				return invalid(e.Path, "duplicate entry")
			case prev > e.Path:
				return invalid(e.Path, "entries not sorted by path (after %q)", prev)
			}
		}
		if e.Mode&specialBits != 0 {
			return invalid(e.Path, "mode %#o has setuid, setgid or sticky bits", uint32(e.Mode))
		}
		if e.Mode&^fs.ModePerm != 0 {
			return invalid(e.Path, "mode %#o has bits other than permissions", uint32(e.Mode))
		}
		switch e.Type {
		case File:
			if e.Size < 0 {
				return invalid(e.Path, "negative size %d", e.Size)
			}
			if e.Size > l.MaxFileSize {
				return tooLarge(e.Path, "file is %d bytes, over the limit of %d", e.Size, l.MaxFileSize)
			}
			if total += e.Size; total > l.MaxTotalBytes {
				return tooLarge(e.Path, "files add up to more than %d bytes", l.MaxTotalBytes)
			}
			if !validSum(e.SHA256) {
				return invalid(e.Path, "sha256 %q is not 64 lower-case hex digits", e.SHA256)
			}
			if e.Target != "" {
				return invalid(e.Path, "a file has no link target")
			}
		case Dir:
			if e.Size != 0 || e.SHA256 != "" || e.Target != "" {
				return invalid(e.Path, "a directory has no size, sha256 or link target")
			}
		case Symlink:
			switch {
			case e.Target == "":
				return invalid(e.Path, "symlink without a target")
			case len(e.Target) > l.MaxTargetLen:
				return tooLarge(e.Path, "symlink target is %d bytes, over the limit of %d", len(e.Target), l.MaxTargetLen)
			case strings.IndexByte(e.Target, 0) >= 0:
				return invalid(e.Path, "symlink target contains a NUL byte")
			case e.Size != 0 || e.SHA256 != "":
				return invalid(e.Path, "a symlink has no size or sha256")
			}
		default:
			return invalid(e.Path, "unknown type %q (want file, dir or symlink)", e.Type)
		}
		if parent := path.Dir(e.Path); parent != "." {
			switch t, ok := types[parent]; {
			case !ok:
				return invalid(e.Path, "parent directory %q is not in the manifest", parent)
			case t == Symlink:
				return invalid(e.Path, "lives under %q, which is a symlink: that would escape through the link", parent)
			case t != Dir:
				return invalid(e.Path, "lives under %q, which is a %s", parent, t)
			}
		}
		types[e.Path] = e.Type
		if folded != nil {
			key := strings.ToLower(e.Path)
			if other, ok := folded[key]; ok {
				return invalid(e.Path, "same path as %q on a case-insensitive disk", other)
			}
			folded[key] = e.Path
		}
	}
	return nil
}

// validSum reports whether s is a lower-case hex SHA-256.
func validSum(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Decode reads a JSON manifest from an untrusted source (the guest),
// strictly (unknown fields and trailing data are errors), drops setuid,
// setgid and sticky bits, and validates it against limits.
func Decode(r io.Reader, limits Limits) (*Manifest, error) {
	l := limits.withDefaults()
	var m Manifest
	if err := decodeStrict(r, l.MaxManifestBytes, &m); err != nil {
		return nil, fmt.Errorf("decode manifest: %w", err)
	}
	m.StripSpecialBits()
	if err := m.Validate(limits); err != nil {
		return nil, fmt.Errorf("decode manifest: %w", err)
	}
	return &m, nil
}

// Encode writes m as JSON, one entry per line, in a stable form: entries
// in manifest order, fields in declaration order, empty fields left out,
// modes as decimal numbers. Decode reads it back; so does encoding/json.
func (m *Manifest) Encode(w io.Writer) error {
	bw := bufio.NewWriter(w)
	bw.WriteString(`{"entries":`)
	if err := encodeEntries(bw, m.Entries); err != nil {
		return err
	}
	bw.WriteString("}\n")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	return nil
}
