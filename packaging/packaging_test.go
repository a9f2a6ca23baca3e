package packaging

import (
	"bytes"
	"flag"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/vm"
)

var update = flag.Bool("update", false, "rewrite testdata/ golden files and assets/ icons")

func readTemplate(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../Info.plist.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestInfoPlist(t *testing.T) {
	info := DefaultInfo("v1.2.3-4-gdeadbee")
	b, err := RenderInfoPlist(readTemplate(t), info)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ParsePlist(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	top := v.(map[string]any)
	for k, want := range map[string]any{
		"CFBundleIdentifier":         "dev.airlock.Airlock",
		"CFBundleName":               "Airlock",
		"CFBundleExecutable":         "airlock",
		"CFBundleIconFile":           "Airlock.icns",
		"CFBundlePackageType":        "APPL",
		"CFBundleShortVersionString": "1.2.3",
		"CFBundleVersion":            "1.2.3.4",
		"AirlockVersion":             "v1.2.3-4-gdeadbee",
		"LSMinimumSystemVersion":     "14.0",
		"NSHighResolutionCapable":    true,
	} {
		if diff := cmp.Diff(want, top[k]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", k, diff)
		}
	}
	want := []any{map[string]any{
		"CFBundleTypeName":   "Project folder",
		"CFBundleTypeRole":   "Viewer",
		"LSHandlerRank":      "Alternate",
		"LSItemContentTypes": []any{"public.folder"},
	}}
	if diff := cmp.Diff(want, top["CFBundleDocumentTypes"]); diff != "" {
		t.Errorf("CFBundleDocumentTypes (-want +got):\n%s", diff)
	}
}

func TestInfoPlistEscapes(t *testing.T) {
	info := DefaultInfo("dev")
	info.Copyright = `A & B <"x">`
	b, err := RenderInfoPlist(readTemplate(t), info)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ParsePlist(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if got := v.(map[string]any)["NSHumanReadableCopyright"]; got != info.Copyright {
		t.Errorf("copyright = %q, want %q", got, info.Copyright)
	}
}

func TestCheckInfoPlistReportsEverything(t *testing.T) {
	info := DefaultInfo("dev")
	tmpl := strings.NewReplacer(
		"<string>public.folder</string>", "<string>public.data</string>",
		"<key>NSHighResolutionCapable</key>\n\t<true/>", "<key>NSHighResolutionCapable</key>\n\t<false/>",
		"<string>{{xml .BundleID}}</string>", "<integer>1</integer>",
	).Replace(readTemplate(t))
	_, err := RenderInfoPlist(tmpl, info)
	if err == nil {
		t.Fatal("a plist without folder drop, high resolution or bundle id was accepted")
	}
	for _, want := range []string{"public.folder", "NSHighResolutionCapable", "CFBundleIdentifier is int64"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

func TestBundleVersions(t *testing.T) {
	for _, tt := range []struct{ in, short, build string }{
		{"v1.2.3", "1.2.3", "1.2.3"},
		{"1.2", "1.2.0", "1.2.0"},
		{"v0.3.1-12-g6fdc527", "0.3.1", "0.3.1.12"},
		{"v0.3.1-12-g6fdc527-dirty", "0.3.1", "0.3.1.12"},
		{"dev", "0.0.0", "0.0.0"},
		{"6fdc527", "6.0.0", "6.0.0"},
		{"", "0.0.0", "0.0.0"},
	} {
		s, b := BundleVersions(tt.in)
		if s != tt.short || b != tt.build {
			t.Errorf("BundleVersions(%q) = %q, %q; want %q, %q", tt.in, s, b, tt.short, tt.build)
		}
	}
}

func TestParsePlist(t *testing.T) {
	const head = `<?xml version="1.0" encoding="UTF-8"?><plist version="1.0">`
	ok := head + `<dict><key>a</key><integer>-3</integer><key>b</key><real>1.5</real>
		<key>c</key><array><string>x</string><false/></array><key>d</key><data>aGk=</data>
		<key>e</key><dict/></dict></plist>`
	v, err := ParsePlist(strings.NewReader(ok))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": int64(-3), "b": 1.5, "c": []any{"x", false}, "d": []byte("hi"), "e": map[string]any{}}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for name, bad := range map[string]string{
		"not xml":         `<plist><dict>`,
		"not a plist":     `<html></html>`,
		"empty":           head + `</plist>`,
		"two values":      head + `<string/><string/></plist>`,
		"key no value":    head + `<dict><key>a</key></dict></plist>`,
		"key twice":       head + `<dict><key>a</key><true/><key>a</key><true/></dict></plist>`,
		"value no key":    head + `<dict><string>a</string></dict></plist>`,
		"unknown element": head + `<thing/></plist>`,
		"bad integer":     head + `<integer>x</integer></plist>`,
		"text in dict":    head + `<dict>hello</dict></plist>`,
		"key in array":    head + `<array><key>a</key></array></plist>`,
	} {
		if _, err := ParsePlist(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: accepted %q", name, bad)
		}
	}
}

func TestEntitlements(t *testing.T) {
	f, err := os.Open(EntitlementsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := ParsePlist(f)
	if err != nil {
		t.Fatal(err)
	}
	// Exactly the one entitlement: anything more (network, JIT) would
	// widen what a signed airlock may do.
	if diff := cmp.Diff(map[string]any{VirtualizationEntitlement: true}, v); diff != "" {
		t.Errorf("entitlements (-want +got):\n%s", diff)
	}
}

func testBundle(t *testing.T) Bundle {
	return Bundle{
		Info:         DefaultInfo("v1.0.0"),
		InfoTemplate: readTemplate(t),
		Binary:       "bin/airlock",
		Icon:         "assets/Airlock.icns",
		ImagesHome:   "/home",
		Images:       []ImageRef{{"minimal", vm.ARM64}, {"minimal", vm.AMD64}},
	}
}

func TestLayout(t *testing.T) {
	entries, err := testBundle(t).Layout()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "layout.txt", Listing(entries))
}

func TestLayoutErrors(t *testing.T) {
	b := testBundle(t)
	b.Binary = ""
	b.Images = append(b.Images, ImageRef{"../x", "riscv64"}, ImageRef{"minimal", vm.ARM64})
	_, err := b.Layout()
	if err == nil {
		t.Fatal("a bad bundle was accepted")
	}
	for _, want := range []string{"no airlock binary", `"../x"`, "riscv64", "minimal/arm64 listed twice"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

func TestAssemble(t *testing.T) {
	src := t.TempDir()
	write := func(rel, content string) string {
		p := filepath.Join(src, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	b := testBundle(t)
	b.Binary = write("airlock", "binary")
	b.Icon = write("Airlock.icns", "icon")
	b.ImagesHome = filepath.Join(src, "home")
	b.Images = b.Images[:1]
	for _, f := range []string{"kernel", "initrd", "image.toml"} {
		write(filepath.Join("home/images/minimal/arm64", f), f)
	}
	entries, err := b.Layout()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "dist")
	if err := Assemble(entries, out); err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(out, "Airlock.app")
	for rel, want := range map[string]string{
		"Contents/MacOS/airlock":                         "binary",
		"Contents/Resources/Airlock.icns":                "icon",
		"Contents/Resources/images/minimal/arm64/kernel": "kernel",
		"Contents/PkgInfo":                               "APPL????",
	} {
		got, err := os.ReadFile(filepath.Join(app, rel))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", rel, got, err, want)
		}
	}
	if st, err := os.Stat(filepath.Join(app, "Contents/MacOS/airlock")); err != nil || st.Mode().Perm()&0o111 == 0 {
		t.Errorf("the binary is not executable: %v, %v", st.Mode(), err)
	}
	plist, err := os.ReadFile(filepath.Join(app, "Contents/Info.plist"))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckInfoPlist(plist, b.Info); err != nil {
		t.Error(err)
	}
	if err := Assemble(entries, out); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("assembling over an existing bundle: %v, want an already-exists error", err)
	}
	os.Remove(b.Icon)
	if err := Assemble(entries, t.TempDir()); err == nil || !strings.Contains(err.Error(), "Airlock.icns") {
		t.Errorf("assembling without the icon: %v, want an error naming it", err)
	}
}

func TestICNSRoundTrip(t *testing.T) {
	in := []ICNSEntry{{"ic07", []byte("png128")}, {"ic10", []byte("png1024")}}
	b, err := EncodeICNS(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:4]) != "icns" || len(b) != 8+8+6+8+7 {
		t.Fatalf("header %q, %d bytes", b[:4], len(b))
	}
	out, err := DecodeICNS(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := EncodeICNS([]ICNSEntry{{"ic7", nil}}); err == nil {
		t.Error("a three-byte type was accepted")
	}
	for _, bad := range [][]byte{b[:len(b)-1], []byte("icnx\x00\x00\x00\x08"), append([]byte("icns\x00\x00\x00\x0c"), "ic07"...)} {
		if _, err := DecodeICNS(bad); err == nil {
			t.Errorf("DecodeICNS(%q) accepted", bad)
		}
	}
}

// TestIconAssets checks that assets/ holds what the icon code draws, so the
// committed icon can always be regenerated (go test ./packaging -run
// TestIconAssets -update).
func TestIconAssets(t *testing.T) {
	if testing.Short() {
		t.Skip("renders the icon at every size; skipped with -short")
	}
	icns, err := IconICNS()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := DecodeICNS(icns)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range entries {
		img, err := png.Decode(bytes.NewReader(e.Data))
		if err != nil {
			t.Fatalf("%s: %v", e.Type, err)
		}
		if w := img.Bounds().Dx(); w != icnsSizes[i].size || img.Bounds().Dy() != w {
			t.Errorf("%s is %v, want %d px square", e.Type, img.Bounds(), icnsSizes[i].size)
		}
	}
	big := entries[3]
	if big.Type != "ic10" {
		t.Fatalf("entry 3 is %s, want ic10", big.Type)
	}
	img, _ := png.Decode(bytes.NewReader(big.Data))
	if _, _, _, a := img.At(0, 0).RGBA(); a != 0 {
		t.Errorf("the corner is not transparent (alpha %d)", a)
	}
	if _, _, _, a := img.At(512, 512).RGBA(); a != 0xffff {
		t.Errorf("the centre is not opaque (alpha %d)", a)
	}
	if *update {
		for name, b := range map[string][]byte{"Airlock.png": big.Data, IconFileName: icns} {
			if err := os.WriteFile(filepath.Join("..", "assets", name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	// Compared by pixels, not bytes: a newer Go may compress PNGs
	// differently.
	stale := "differs from what packaging draws; regenerate with go run ./packaging/cmd/airlock-bundle icon"
	pngFile, err := os.ReadFile(filepath.Join("..", "assets", "Airlock.png"))
	if err != nil {
		t.Fatal(err)
	}
	if !samePixels(t, pngFile, big.Data) {
		t.Errorf("assets/Airlock.png %s", stale)
	}
	icnsFile, err := os.ReadFile(filepath.Join("..", "assets", IconFileName))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := DecodeICNS(icnsFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(committed) != len(entries) {
		t.Fatalf("assets/%s has %d entries, want %d: %s", IconFileName, len(committed), len(entries), stale)
	}
	for i, e := range entries {
		if committed[i].Type != e.Type || !samePixels(t, committed[i].Data, e.Data) {
			t.Errorf("assets/%s entry %d (%s) %s", IconFileName, i, committed[i].Type, stale)
		}
	}
}

// samePixels reports whether two PNGs hold the same image.
func samePixels(t *testing.T, a, b []byte) bool {
	t.Helper()
	ia, err := png.Decode(bytes.NewReader(a))
	if err != nil {
		t.Errorf("decode: %v", err)
		return false
	}
	ib, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Errorf("decode: %v", err)
		return false
	}
	if ia.Bounds() != ib.Bounds() {
		return false
	}
	r := ia.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if ia.At(x, y) != ib.At(x, y) {
				return false
			}
		}
	}
	return true
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", p, diff)
	}
}
