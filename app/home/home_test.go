package home

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/packaging"
)

func TestDirFor(t *testing.T) {
	userHome := func() (string, error) { return "/home/ada", nil }
	tests := []struct {
		name string
		goos string
		env  map[string]string
		want string
	}{
		{"linux default", "linux", nil, "/home/ada/.local/share/airlock"},
		{"linux xdg", "linux", map[string]string{"XDG_DATA_HOME": "/data"}, "/data/airlock"},
		{"linux relative xdg ignored", "linux", map[string]string{"XDG_DATA_HOME": "rel"}, "/home/ada/.local/share/airlock"},
		{"darwin default", "darwin", nil, "/home/ada/Library/Application Support/Airlock"},
		{"override", "darwin", map[string]string{Env: "/srv/airlock"}, "/srv/airlock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dirFor(tt.goos, func(k string) string { return tt.env[k] }, userHome)
			if err != nil {
				t.Fatal(err)
			}
			if got != filepath.FromSlash(tt.want) {
				t.Errorf("dirFor = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDirForNoHome(t *testing.T) {
	_, err := dirFor("linux", func(string) string { return "" }, func() (string, error) { return "", errors.New("no $HOME") })
	if err == nil {
		t.Fatal("want an error without a home directory")
	}
}

func TestBundleResources(t *testing.T) {
	for _, tt := range []struct {
		exe, want string
		ok        bool
	}{
		{"/Applications/Airlock.app/Contents/MacOS/airlock", "/Applications/Airlock.app/Contents/Resources", true},
		{"/Users/me/dist/Airlock.app/Contents/MacOS/airlock", "/Users/me/dist/Airlock.app/Contents/Resources", true},
		{"/Volumes/Airlock/Airlock.app/Contents/MacOS/./airlock", "/Volumes/Airlock/Airlock.app/Contents/Resources", true},
		{"/usr/local/bin/airlock", "", false},
		{"/Applications/Airlock.app/Contents/Resources/airlock", "", false},
		{"/Applications/Airlock/Contents/MacOS/airlock", "", false},
		{"/Applications/.app/Contents/MacOS/airlock", "", false},
		{"Airlock.app/Contents/MacOS/airlock", "", false},
		{"/airlock", "", false},
	} {
		got, ok := BundleResources(tt.exe)
		if got != tt.want || ok != tt.ok {
			t.Errorf("BundleResources(%q) = %q, %v; want %q, %v", tt.exe, got, ok, tt.want, tt.ok)
		}
	}
}

func TestImageRoots(t *testing.T) {
	if got := bundleImageRoots("/Applications/Airlock.app/Contents/MacOS/airlock"); len(got) != 1 || got[0] != "/Applications/Airlock.app/Contents/Resources" {
		t.Errorf("from the bundle: %q", got)
	}
	if got := bundleImageRoots("/usr/local/bin/airlock"); len(got) != 0 {
		t.Errorf("outside a bundle: %q", got)
	}
	// This test binary is in no bundle.
	h := "/Users/me/Library/Application Support/Airlock"
	if got := ImageRoots(h); len(got) != 1 || got[0] != h {
		t.Errorf("ImageRoots = %q", got)
	}
}

// TestBundleMatchesPackaging: the bundle packaging builds is the one
// BundleResources recognises, with the images where ImageRoots looks.
func TestBundleMatchesPackaging(t *testing.T) {
	app := "/Applications/" + packaging.AppName + ".app"
	res, ok := BundleResources(path.Join(app, packaging.MacOSDir, packaging.ExecutableName))
	if !ok || filepath.Join(res, "images") != filepath.FromSlash(path.Join(app, packaging.ImagesDir)) {
		t.Errorf("BundleResources = %q, %v; packaging puts images in %s", res, ok, packaging.ImagesDir)
	}
}

// TestLayout: every path of a layout lies under its root, and no two are
// the same.
func TestLayout(t *testing.T) {
	root := filepath.FromSlash("/srv/airlock")
	l := Layout{Root: root}
	paths := map[string]string{
		"Images": l.Images(), "Objects": l.Objects(), "Sandboxes": l.Sandboxes(), "Sandbox": l.Sandbox("0a1b2c3d"),
		"Cache": l.Cache(), "WarmCache": l.WarmCache(), "QEMUCache": l.QEMUCache(), "GuestCache": l.GuestCache(),
		"Runs": l.Runs(), "Run": l.Run("0a1b2c3d"), "TrustFile": l.TrustFile(),
	}
	seen := map[string]string{}
	for name, p := range paths {
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." || !filepath.IsLocal(rel) {
			t.Errorf("%s = %s: not under %s", name, p, root)
		}
		if other, ok := seen[p]; ok {
			t.Errorf("%s and %s are both %s", name, other, p)
		}
		seen[p] = name
	}
	if got, want := l.Sandbox("x"), filepath.Join(l.Sandboxes(), "x"); got != want {
		t.Errorf("Sandbox(x) = %s, want %s", got, want)
	}
	if got, want := l.Run("x"), filepath.Join(l.Runs(), "x"); got != want {
		t.Errorf("Run(x) = %s, want %s", got, want)
	}
	for _, p := range []string{l.WarmCache(), l.QEMUCache(), l.GuestCache()} {
		if filepath.Dir(p) != l.Cache() {
			t.Errorf("%s is not in the cache %s", p, l.Cache())
		}
	}
}

func TestMakeIsPrivate(t *testing.T) {
	root := filepath.Join(t.TempDir(), "a", "airlock")
	if err := Make(root); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(root); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("a new home: %v, %v; want a 0700 directory", fi, err)
	}
	// An old home: tightened. A symbolic link under it is not followed
	// (what it points at is not Airlock's to change).
	outside := t.TempDir()
	if err := os.Chmod(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, Layout{Root: root}.Cache()); err != nil {
		t.Fatal(err)
	}
	if err := Make(root); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(root); fi.Mode().Perm() != 0o700 {
		t.Errorf("an old 0755 home is %#o after Make, want 0700", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(outside); fi.Mode().Perm() != 0o755 {
		t.Errorf("Make followed the symbolic link cache/ and changed %s to %#o", outside, fi.Mode().Perm())
	}
}
