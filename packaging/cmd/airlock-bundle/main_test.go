package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestDryRunListsTheBundle(t *testing.T) {
	var out bytes.Buffer
	err := run([]string{"-dry-run", "-template", "../../../Info.plist.tmpl", "-version", "v0.1.0", "-out", "dist"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"dry run: would create Airlock.app in dist\n",
		"drwxr-xr-x  Airlock.app\n",
		"-rw-r--r--  Airlock.app/Contents/Info.plist  (generated, ",
		"-rwxr-xr-x  Airlock.app/Contents/MacOS/airlock  <- bin/airlock\n",
		"-rw-r--r--  Airlock.app/Contents/Resources/Airlock.icns  <- assets/Airlock.icns\n",
		"Airlock.app/Contents/Resources/images/minimal/arm64/kernel  <- $AIRLOCK_HOME/images/minimal/arm64/kernel\n",
		"Airlock.app/Contents/Resources/images/minimal/amd64/initrd  <- $AIRLOCK_HOME/images/minimal/amd64/initrd\n",
		"Airlock.app/Contents/Resources/images/minimal/arm64/image.toml",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("listing lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n"); n != 19 {
		t.Errorf("%d lines, want 19 (the header, 8 folders, 4 app files, 6 image files):\n%s", n, got)
	}
}

func TestBundleNeedsImagesHome(t *testing.T) {
	err := run([]string{"-template", "../../../Info.plist.tmpl", "-out", t.TempDir()}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "-images-home") {
		t.Errorf("err = %v, want one asking for -images-home", err)
	}
}

func TestParseImages(t *testing.T) {
	refs, err := parseImages(" minimal/arm64, ,full/amd64")
	if err != nil || len(refs) != 2 || refs[1].Name != "full" || refs[1].Arch != "amd64" {
		t.Errorf("parseImages = %v, %v", refs, err)
	}
	if _, err := parseImages("minimal"); err == nil {
		t.Error("an image without arch was accepted")
	}
}

func TestPlist(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"plist", "-template", "../../../Info.plist.tmpl", "-version", "v2.0.0"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "<string>2.0.0</string>") {
		t.Errorf("no version in:\n%s", out.String())
	}
}
