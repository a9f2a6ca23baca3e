package packaging

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
)

// The icon is drawn from signed distance functions on a 1024-unit canvas
// and rendered at each size directly, so small sizes stay sharp: a rounded
// square in the macOS icon grid (824 units, corner radius 185), and on it a
// round airlock hatch: a light ring with bolts around two door leaves with
// their handles either side of the seam.

// rgba is a colour with straight (not premultiplied) alpha, 0 to 1.
type rgba struct{ r, g, b, a float64 }

func hex(c uint32) rgba {
	return rgba{float64(c>>16&0xff) / 255, float64(c>>8&0xff) / 255, float64(c&0xff) / 255, 1}
}

func mix(a, b rgba, t float64) rgba {
	return rgba{a.r + (b.r-a.r)*t, a.g + (b.g-a.g)*t, a.b + (b.b-a.b)*t, a.a + (b.a-a.a)*t}
}

// over puts src with coverage cov over dst.
func over(dst, src rgba, cov float64) rgba {
	sa := src.a * cov
	da := dst.a * (1 - sa)
	a := sa + da
	if a == 0 {
		return rgba{}
	}
	return rgba{(src.r*sa + dst.r*da) / a, (src.g*sa + dst.g*da) / a, (src.b*sa + dst.b*da) / a, a}
}

func sdCircle(x, y, cx, cy, r float64) float64 { return math.Hypot(x-cx, y-cy) - r }

// sdRoundRect is the distance to a rectangle centred on (cx, cy) with half
// sizes hw, hh and corner radius r.
func sdRoundRect(x, y, cx, cy, hw, hh, r float64) float64 {
	qx := math.Abs(x-cx) - hw + r
	qy := math.Abs(y-cy) - hh + r
	out := math.Hypot(math.Max(qx, 0), math.Max(qy, 0))
	return out + math.Min(math.Max(qx, qy), 0) - r
}

// Icon colours.
var (
	iconTop    = hex(0x24507a)
	iconBottom = hex(0x0e1c30)
	iconRing   = hex(0xe9eef4)
	iconBolt   = hex(0x8ea4bb)
	iconDoorA  = hex(0x3b82b8)
	iconDoorB  = hex(0x1d4f7a)
	iconSeam   = hex(0x0e1c30)
	iconLight  = hex(0x4ade80)
)

// iconPixel is the colour at canvas point (x, y); px is the size of one
// output pixel in canvas units, the width of the anti-aliased edge.
func iconPixel(x, y, px float64) rgba {
	cov := func(d float64) float64 { return math.Min(math.Max(0.5-d/px, 0), 1) }
	var c rgba

	// Drop shadow under the tile, then the tile.
	c = over(c, rgba{0, 0, 0, 0.35}, math.Min(math.Max(0.5-sdRoundRect(x, y, 512, 524, 412, 412, 185)/12, 0), 1))
	tile := sdRoundRect(x, y, 512, 512, 412, 412, 185)
	c = over(c, mix(iconTop, iconBottom, (y-100)/824), cov(tile))

	// Hatch: ring, bolts, two door leaves split by a seam, handles.
	const cx, cy = 512, 512
	c = over(c, iconRing, cov(sdCircle(x, y, cx, cy, 300)))
	for i := range 8 {
		a := float64(i)*math.Pi/4 + math.Pi/8
		c = over(c, iconBolt, cov(sdCircle(x, y, cx+276*math.Cos(a), cy+276*math.Sin(a), 11)))
	}
	door := sdCircle(x, y, cx, cy, 250)
	c = over(c, mix(iconDoorA, iconDoorB, (y-262)/500), cov(door))
	seam := math.Max(door, math.Abs(x-cx)-9)
	c = over(c, iconSeam, cov(seam))
	for _, hx := range []float64{cx - 62, cx + 62} {
		c = over(c, iconRing, cov(sdRoundRect(x, y, hx, cy, 12, 70, 12)))
	}
	// The status light: green, the hatch is sealed.
	c = over(c, iconLight, cov(sdCircle(x, y, cx, 166, 18)))
	return c
}

// DrawIcon renders the app icon at size×size pixels.
func DrawIcon(size int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	px := 1024 / float64(size)
	for j := range size {
		for i := range size {
			c := iconPixel((float64(i)+0.5)*px, (float64(j)+0.5)*px, px)
			img.SetNRGBA(i, j, color.NRGBA{
				R: uint8(math.Round(c.r * 255)), G: uint8(math.Round(c.g * 255)),
				B: uint8(math.Round(c.b * 255)), A: uint8(math.Round(c.a * 255)),
			})
		}
	}
	return img
}

// IconPNG is the icon at size×size as PNG bytes.
func IconPNG(size int) ([]byte, error) {
	var b bytes.Buffer
	if err := png.Encode(&b, DrawIcon(size)); err != nil {
		return nil, fmt.Errorf("encode %dpx icon: %w", size, err)
	}
	return b.Bytes(), nil
}

// icnsSizes are the PNG entries of Airlock.icns: type and pixel size
// (ic11…ic14 are the @2x variants of 16, 32, 128 and 256 points).
var icnsSizes = []struct {
	typ  string
	size int
}{
	{"ic07", 128}, {"ic08", 256}, {"ic09", 512}, {"ic10", 1024},
	{"ic11", 32}, {"ic12", 64}, {"ic13", 256}, {"ic14", 512},
}

// IconICNS is the icon as an .icns container of PNGs.
func IconICNS() ([]byte, error) {
	pngs := map[int][]byte{}
	var entries []ICNSEntry
	for _, s := range icnsSizes {
		if pngs[s.size] == nil {
			b, err := IconPNG(s.size)
			if err != nil {
				return nil, err
			}
			pngs[s.size] = b
		}
		entries = append(entries, ICNSEntry{Type: s.typ, Data: pngs[s.size]})
	}
	return EncodeICNS(entries)
}
