// Package feature owns Dev Container features as Airlock installs them: an
// artifact fetched from an OCI registry (the features distribution spec:
// a manifest whose one layer, application/vnd.devcontainers.layer.v1+tar,
// is a tar of devcontainer-feature.json, install.sh and their files),
// checked as the hostile input it is, the order features install in
// (dependsOn, installsAfter), the variables install.sh gets (each option
// as an upper-case variable, _REMOTE_USER and the rest) and the hosts
// Airlock knows the official features' installs reach.
//
// It only fetches and reads: it runs nothing, and must not import vm,
// guest, app/images, app/pipeline or fyne. app/images runs the scripts
// in a builder VM.
package feature

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
)

// LayerMediaType is the media type of a feature's layer.
const LayerMediaType = "application/vnd.devcontainers.layer.v1+tar"

// Limits on an artifact: what a registry sends is hostile input.
const (
	// MaxLayer is the largest layer fetched (compressed or not).
	MaxLayer = 16 << 20
	// MaxUnpacked is the most the layer's files may hold together.
	MaxUnpacked = 64 << 20
	// MaxFiles is the most entries the layer may have.
	MaxFiles = 2000
	// MaxMetadata is the largest devcontainer-feature.json read.
	MaxMetadata = 256 << 10
	// maxOptions, maxOptionValue cap the options a feature declares.
	maxOptions     = 200
	maxOptionValue = 4096
)

// File is one file or directory of a feature, as checked: its path is
// relative, clean and inside the feature; its mode 0644, 0755 or a
// directory's 0755.
type File struct {
	Name string
	Dir  bool
	Exec bool
	Data []byte
}

// Metadata is devcontainer-feature.json, as far as Airlock uses it.
type Metadata struct {
	ID      string            `json:"id"`
	Version string            `json:"version"`
	Name    string            `json:"name"`
	Options map[string]Option `json:"options"`
	// ContainerEnv is set in the image's environment once the feature is
	// installed (and in later features' installs); a value may name an
	// earlier value, "${PATH}".
	ContainerEnv map[string]string `json:"containerEnv"`
	// InstallsAfter are features this one installs after when they are
	// installed too (references without their version).
	InstallsAfter []string `json:"installsAfter"`
	// DependsOn are features that must be installed first, with their
	// options.
	DependsOn map[string]json.RawMessage `json:"dependsOn"`
}

// Option is one option a feature declares.
type Option struct {
	Type string `json:"type"`
	// Default is the default as text ("lts", "true"); empty when none.
	Default string `json:"-"`
	// Raw is the option's default as written.
	Raw json.RawMessage `json:"default"`
}

// Artifact is a feature fetched and checked.
type Artifact struct {
	// Ref is the reference it was fetched by; Digest its manifest's
	// digest ("sha256:…"), which identifies what was installed.
	Ref, Digest string
	Meta        Metadata
	Files       []File
}

var (
	envName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	optionID = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
)

// Read checks a feature's layer (a tar, perhaps gzip-compressed) and
// returns its files and metadata. It refuses a layer over the limits, an
// entry that is not a regular file or a directory (a link, a device), a
// path that is absolute or leaves the feature, the same path twice, a
// layer without install.sh, and a devcontainer-feature.json that does
// not parse or declares what Airlock cannot pass on safely.
func Read(layer []byte) ([]File, *Metadata, error) {
	var r io.Reader = bytes.NewReader(layer)
	if len(layer) > 2 && layer[0] == 0x1f && layer[1] == 0x8b {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("the feature's layer: %w", err)
		}
		r = zr
	}
	tr := tar.NewReader(io.LimitReader(r, MaxUnpacked+1<<20))
	var files []File
	seen := map[string]bool{}
	total := int64(0)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("the feature's layer is not a tar: %w", err)
		}
		if len(files) >= MaxFiles {
			return nil, nil, fmt.Errorf("the feature's layer has more than %d entries", MaxFiles)
		}
		name, err := entryName(h.Name)
		if err != nil {
			return nil, nil, err
		}
		if name == "" {
			continue // "./"
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("the feature's layer has %q twice", name)
		}
		seen[name] = true
		switch h.Typeflag {
		case tar.TypeDir:
			files = append(files, File{Name: name, Dir: true})
		case tar.TypeReg:
			if h.Size < 0 || total+h.Size > MaxUnpacked {
				return nil, nil, fmt.Errorf("the feature's files hold more than %d MiB", MaxUnpacked>>20)
			}
			total += h.Size
			data, err := io.ReadAll(io.LimitReader(tr, h.Size))
			if err != nil || int64(len(data)) != h.Size {
				return nil, nil, fmt.Errorf("the feature's layer: %s is cut short", name)
			}
			files = append(files, File{Name: name, Exec: h.Mode&0o111 != 0, Data: data})
		default:
			return nil, nil, fmt.Errorf("the feature's layer has %q, which is not a regular file or a directory (type %q): refused", name, h.Typeflag)
		}
	}
	var meta *Metadata
	hasInstall := false
	for _, f := range files {
		switch {
		case f.Name == "install.sh" && !f.Dir:
			hasInstall = true
		case f.Name == "devcontainer-feature.json" && !f.Dir:
			m, err := ParseMetadata(f.Data)
			if err != nil {
				return nil, nil, err
			}
			meta = m
		}
	}
	if meta == nil {
		return nil, nil, errors.New("the feature has no devcontainer-feature.json")
	}
	if !hasInstall {
		return nil, nil, errors.New("the feature has no install.sh")
	}
	return files, meta, nil
}

// entryName is a tar entry's path made relative and clean ("./a/b/" →
// "a/b"), or an error when it is absolute or leaves the feature.
func entryName(n string) (string, error) {
	if strings.ContainsAny(n, "\x00\\") || path.IsAbs(n) {
		return "", fmt.Errorf("the feature's layer has the path %q, which is not inside the feature: refused", n)
	}
	c := path.Clean(n)
	if c == "." {
		return "", nil
	}
	if c == ".." || strings.HasPrefix(c, "../") || len(c) > 1024 {
		return "", fmt.Errorf("the feature's layer has the path %q, which is not inside the feature: refused", n)
	}
	return c, nil
}

// ParseMetadata reads devcontainer-feature.json and checks what Airlock
// passes on: option IDs it can name as variables, and containerEnv names
// that are variable names.
func ParseMetadata(data []byte) (*Metadata, error) {
	if len(data) > MaxMetadata {
		return nil, fmt.Errorf("devcontainer-feature.json is over %d KiB", MaxMetadata>>10)
	}
	var m Metadata
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("devcontainer-feature.json: %w", err)
	}
	var errs []error
	if m.ID == "" {
		errs = append(errs, errors.New("devcontainer-feature.json has no id"))
	}
	if len(m.Options) > maxOptions {
		errs = append(errs, fmt.Errorf("devcontainer-feature.json declares %d options, more than %d", len(m.Options), maxOptions))
	}
	for _, id := range slices.Sorted(maps.Keys(m.Options)) {
		o := m.Options[id]
		if !optionID.MatchString(id) {
			errs = append(errs, fmt.Errorf("devcontainer-feature.json: option %q is not an option name", id))
			continue
		}
		o.Default = jsonText(o.Raw)
		if len(o.Default) > maxOptionValue {
			errs = append(errs, fmt.Errorf("devcontainer-feature.json: option %q's default is over %d bytes", id, maxOptionValue))
		}
		m.Options[id] = o
	}
	for k, v := range m.ContainerEnv {
		if !envName.MatchString(k) || strings.ContainsRune(v, 0) || len(v) > maxOptionValue {
			errs = append(errs, fmt.Errorf("devcontainer-feature.json: containerEnv %q is not a variable Airlock sets", k))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &m, nil
}

// jsonText is a JSON value as install.sh gets it: a string as it is,
// anything else as its JSON text ("true", "18"); empty for none.
func jsonText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// SafeID is an option's variable name as the spec makes it: every
// character but letters, digits and '_' becomes '_', leading digits and
// underscores become one '_', and the whole is upper case
// ("nodeGypDependencies" → "NODEGYPDEPENDENCIES").
func SafeID(id string) string {
	var b strings.Builder
	for _, r := range id {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if t := strings.TrimLeft(s, "0123456789_"); len(t) != len(s) {
		s = "_" + t
	}
	return strings.ToUpper(s)
}

// User is who the environment's commands run as, for install.sh's
// _REMOTE_USER and _CONTAINER_USER (the same user in a VM): a name, or
// root when empty.
type User struct{ Name string }

// InstallEnv is install.sh's environment: each option the feature
// declares, as written in devcontainer.json or else its default, under
// its SafeID; options the feature does not declare are passed too (some
// features read them), when their names are safe. The users' variables
// are set by the step that runs it (their home directories are the
// guest's). Values reach install.sh only as variables, never as shell
// text.
func InstallEnv(m *Metadata, options map[string]string) (map[string]string, error) {
	env := map[string]string{}
	for id, o := range m.Options {
		if o.Default != "" || o.Type == "string" {
			env[SafeID(id)] = o.Default
		}
	}
	for _, id := range slices.Sorted(maps.Keys(options)) {
		v := options[id]
		if !optionID.MatchString(id) {
			return nil, fmt.Errorf("option %q is not an option name", id)
		}
		if strings.ContainsRune(v, 0) || len(v) > maxOptionValue {
			return nil, fmt.Errorf("option %q: the value holds a NUL byte or is over %d bytes", id, maxOptionValue)
		}
		env[SafeID(id)] = v
	}
	for k := range env {
		if !envName.MatchString(k) || reserved[k] {
			return nil, fmt.Errorf("option %q cannot be passed as a variable", k)
		}
	}
	return env, nil
}

// reserved are the variables Airlock sets for install.sh itself.
var reserved = map[string]bool{"_REMOTE_USER": true, "_REMOTE_USER_HOME": true, "_CONTAINER_USER": true, "_CONTAINER_USER_HOME": true}

// Tar is the feature's files as the tar the builder extracts: only the
// checked files, modes masked (0755 for directories and executables,
// 0644 otherwise), owned by root, so the builder gets nothing the check
// did not see.
func Tar(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.Name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(f.Data)), Format: tar.FormatPAX}
		switch {
		case f.Dir:
			h.Name, h.Mode, h.Typeflag, h.Size = f.Name+"/", 0o755, tar.TypeDir, 0
		case f.Exec || f.Name == "install.sh":
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if !f.Dir {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
