package gui

import (
	"bytes"
	"image"
	"image/draw"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"fyne.io/fyne/v2"
)

// assertGoldenImage compares the canvas's rendering with
// testdata/name pixel by pixel, or rewrites it with -update. A mismatch
// is kept for a look as airlock-goldens/failed-name in the system's
// temporary folder (a test's own is removed when it ends).
func assertGoldenImage(t *testing.T, name string, c fyne.Canvas) {
	t.Helper()
	img := c.Capture()
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	defer f.Close()
	want, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if !sameImage(want, img) {
		failed := filepath.Join(os.TempDir(), "airlock-goldens", "failed-"+name)
		if err := os.MkdirAll(filepath.Dir(failed), 0o755); err == nil {
			_ = os.WriteFile(failed, buf.Bytes(), 0o644)
		}
		t.Errorf("%s differs from the rendering (saved as %s; go test -update rewrites it)", path, failed)
	}
}

func sameImage(a, b image.Image) bool {
	if a.Bounds() != b.Bounds() {
		return false
	}
	return bytes.Equal(rgba(a).Pix, rgba(b).Pix)
}

func rgba(img image.Image) *image.RGBA {
	out := image.NewRGBA(img.Bounds())
	draw.Draw(out, out.Bounds(), img, img.Bounds().Min, draw.Src)
	return out
}
