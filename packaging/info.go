package packaging

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"text/template"
)

// Info is what the Info.plist template is filled with. DefaultInfo gives
// Airlock's values.
type Info struct {
	// Name is the app's name as the Finder and the Dock show it.
	Name string
	// BundleID is the reverse-DNS bundle identifier.
	BundleID string
	// Executable is the file name of the binary in Contents/MacOS.
	Executable string
	// IconFile is the .icns file name in Contents/Resources.
	IconFile string
	// Version is the version as the build names it (git describe, "dev").
	Version string
	// ShortVersion (CFBundleShortVersionString) and BuildVersion
	// (CFBundleVersion) are Version as macOS wants it: up to three
	// dot-separated integers. BundleVersions derives them.
	ShortVersion string
	BuildVersion string
	// MinimumSystemVersion is LSMinimumSystemVersion.
	MinimumSystemVersion string
	// Copyright is NSHumanReadableCopyright.
	Copyright string
}

// Airlock's bundle identity.
const (
	AppName          = "Airlock"
	BundleID         = "dev.airlock.Airlock"
	ExecutableName   = "airlock"
	IconFileName     = "Airlock.icns"
	MinimumMacOS     = "14.0"
	EntitlementsFile = "airlock.entitlements"
	// VirtualizationEntitlement lets a process use Virtualization.framework.
	VirtualizationEntitlement = "com.apple.security.virtualization"
)

// DefaultInfo is Airlock's Info for a build of version.
func DefaultInfo(version string) Info {
	short, build := BundleVersions(version)
	return Info{
		Name:                 AppName,
		BundleID:             BundleID,
		Executable:           ExecutableName,
		IconFile:             IconFileName,
		Version:              version,
		ShortVersion:         short,
		BuildVersion:         build,
		MinimumSystemVersion: MinimumMacOS,
		Copyright:            "Airlock",
	}
}

var versionRE = regexp.MustCompile(`^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-(\d+)-g[0-9a-f]+)?`)

// BundleVersions turns a build's version into CFBundleShortVersionString
// and CFBundleVersion: "v1.2.3" gives 1.2.3 and 1.2.3; "v1.2.3-4-gabc"
// (git describe, 4 commits after the tag) gives 1.2.3 and 1.2.3.4; anything
// without a leading version number ("dev", a bare commit) gives 0.0.0.
func BundleVersions(version string) (short, build string) {
	m := versionRE.FindStringSubmatch(version)
	if m == nil {
		return "0.0.0", "0.0.0"
	}
	parts := []string{m[1], m[2], m[3]}
	for i, p := range parts {
		if p == "" {
			parts[i] = "0"
		}
	}
	short = strings.Join(parts, ".")
	build = short
	if m[4] != "" {
		build += "." + m[4]
	}
	return short, build
}

// RenderInfoPlist fills the Info.plist template tmpl with info and checks
// that the result is a property list with every key the app needs
// (CheckInfoPlist). The template calls {{xml .Field}} to escape values.
func RenderInfoPlist(tmpl string, info Info) ([]byte, error) {
	t, err := template.New("Info.plist").Option("missingkey=error").
		Funcs(template.FuncMap{"xml": xmlEscape}).Parse(tmpl)
	if err != nil {
		return nil, fmt.Errorf("render Info.plist: %w", err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, info); err != nil {
		return nil, fmt.Errorf("render Info.plist: %w", err)
	}
	if err := CheckInfoPlist(b.Bytes(), info); err != nil {
		return nil, fmt.Errorf("render Info.plist: %w", err)
	}
	return b.Bytes(), nil
}

func xmlEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '"':
			b.WriteString("&quot;")
		case '\'':
			b.WriteString("&apos;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// CheckInfoPlist parses a rendered Info.plist and reports, all at once,
// every required key that is missing, of the wrong type or not what info
// says.
func CheckInfoPlist(plist []byte, info Info) error {
	v, err := ParsePlist(bytes.NewReader(plist))
	if err != nil {
		return err
	}
	top, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("Info.plist: top value is a %T, want a dict", v)
	}
	var errs []error
	wantString := map[string]string{
		"CFBundleName":               info.Name,
		"CFBundleIdentifier":         info.BundleID,
		"CFBundleExecutable":         info.Executable,
		"CFBundleIconFile":           info.IconFile,
		"CFBundlePackageType":        "APPL",
		"CFBundleShortVersionString": info.ShortVersion,
		"CFBundleVersion":            info.BuildVersion,
		"LSMinimumSystemVersion":     info.MinimumSystemVersion,
	}
	for k, want := range wantString {
		got, ok := top[k].(string)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("Info.plist: %s is %T, want a string", k, top[k]))
		case got != want:
			errs = append(errs, fmt.Errorf("Info.plist: %s is %q, want %q", k, got, want))
		}
	}
	if b, ok := top["NSHighResolutionCapable"].(bool); !ok || !b {
		errs = append(errs, errors.New("Info.plist: NSHighResolutionCapable must be <true/>"))
	}
	if !acceptsFolders(top["CFBundleDocumentTypes"]) {
		errs = append(errs, errors.New("Info.plist: CFBundleDocumentTypes must declare public.folder (a Viewer or Editor role), so that a folder dropped on the Dock icon reaches the app"))
	}
	return errors.Join(errs...)
}

// acceptsFolders reports whether a CFBundleDocumentTypes value declares
// folders with a role that lets the app open them.
func acceptsFolders(v any) bool {
	types, _ := v.([]any)
	for _, t := range types {
		d, _ := t.(map[string]any)
		role, _ := d["CFBundleTypeRole"].(string)
		if role != "Viewer" && role != "Editor" {
			continue
		}
		items, _ := d["LSItemContentTypes"].([]any)
		for _, it := range items {
			if it == "public.folder" {
				return true
			}
		}
	}
	return false
}
