package gui

import (
	"bytes"
	"fmt"
	"image"
	_ "image/gif" // decoders for the image diff
	_ "image/jpeg"
	_ "image/png"
	"path"
	"strings"

	"github.com/airlock-dev/airlock/review"
)

// Limits on an image the review decodes: the guest chose its bytes.
const (
	maxImageBytes  = 16 << 20
	maxImagePixels = 40_000_000
	maxImageSide   = 16384
)

// imageExts are the files shown as images, old beside new.
var imageExts = map[string]bool{".png": true, ".jpg": true, ".jpeg": true, ".gif": true}

// decodeImage decodes a PNG, JPEG or GIF after checking its dimensions,
// so a hostile header cannot make the review allocate gigabytes.
func decodeImage(data []byte) (img image.Image, err error) {
	if len(data) > maxImageBytes {
		return nil, fmt.Errorf("image of %d bytes is over the %d-byte limit", len(data), maxImageBytes)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	if format != "png" && format != "jpeg" && format != "gif" {
		return nil, fmt.Errorf("%s images are not shown", format)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width > maxImageSide || cfg.Height > maxImageSide || cfg.Width*cfg.Height > maxImagePixels {
		return nil, fmt.Errorf("image of %d×%d pixels is too large to show", cfg.Width, cfg.Height)
	}
	defer func() {
		if p := recover(); p != nil {
			img, err = nil, fmt.Errorf("decode image: %v", p)
		}
	}()
	img, _, err = image.Decode(bytes.NewReader(data))
	return img, err
}

// imagePair decodes both sides of an image file; ok is false when f is
// not an image or a side does not decode (the view then shows the
// binary file's line). A side that does not exist is nil.
func imagePair(f *review.File) (old, new image.Image, ok bool) {
	if !imageExts[strings.ToLower(path.Ext(f.Path))] || f.IsDir() || f.IsSymlink() {
		return nil, nil, false
	}
	var err error
	if f.Old != nil {
		if old, err = decodeImage(f.OldContent()); err != nil {
			return nil, nil, false
		}
	}
	if f.New != nil {
		if new, err = decodeImage(f.NewContent()); err != nil {
			return nil, nil, false
		}
	}
	return old, new, old != nil || new != nil
}
