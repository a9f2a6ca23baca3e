package gui

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
	"github.com/alecthomas/chroma/v2"
	"github.com/alecthomas/chroma/v2/styles"
)

// diffPalette is the diff view's colours for the current theme: GitHub's
// diff colours and its light and dark syntax styles, which read well on
// fyne's light and dark backgrounds.
type diffPalette struct {
	dark bool
	fg   color.Color // text without a syntax colour
	num  color.Color // line numbers and marks
	dim  color.Color // text of a rejected hunk

	addBG, delBG     color.Color // a whole added or removed line
	addWord, delWord color.Color // a changed word inside one
	blankBG          color.Color // the empty side of a side-by-side row
	selBG            color.Color // the numbers of the lines a comment being written is about
	selTint          color.Color // and the tint over those lines
	cursorBG         color.Color // the hunk under the keyboard cursor
	approvedC        color.Color // the hunk bar's stripe, per state
	rejectedC        color.Color
	undecidedC       color.Color

	syntax *chroma.Style
	cache  map[chroma.TokenType]color.Color
}

func newDiffPalette(th fyne.Theme, v fyne.ThemeVariant) *diffPalette {
	bg := th.Color(theme.ColorNameBackground, v)
	p := &diffPalette{
		dark:       luminance(bg) < 0.5,
		fg:         th.Color(theme.ColorNameForeground, v),
		num:        th.Color(theme.ColorNamePlaceHolder, v),
		approvedC:  th.Color(theme.ColorNameSuccess, v),
		rejectedC:  th.Color(theme.ColorNameError, v),
		undecidedC: th.Color(theme.ColorNameDisabled, v),
		cache:      map[chroma.TokenType]color.Color{},
	}
	pr, pg, pb, _ := th.Color(theme.ColorNamePrimary, v).RGBA()
	primary := func(a uint8) color.Color { return color.NRGBA{uint8(pr >> 8), uint8(pg >> 8), uint8(pb >> 8), a} }
	if p.dark {
		p.addBG, p.addWord = color.NRGBA{0x2e, 0xa0, 0x43, 0x30}, color.NRGBA{0x2e, 0xa0, 0x43, 0x80}
		p.delBG, p.delWord = color.NRGBA{0xf8, 0x51, 0x49, 0x30}, color.NRGBA{0xf8, 0x51, 0x49, 0x80}
		p.blankBG = color.NRGBA{0x80, 0x80, 0x80, 0x14}
		p.dim = color.NRGBA{0x8b, 0x94, 0x9e, 0xb0}
		p.selBG, p.selTint, p.cursorBG = primary(0x90), primary(0x20), primary(0x24)
		p.syntax = styles.Get("github-dark")
	} else {
		p.addBG, p.addWord = color.NRGBA{0xd4, 0xf8, 0xdb, 0xff}, color.NRGBA{0x8c, 0xe9, 0x9f, 0xff}
		p.delBG, p.delWord = color.NRGBA{0xff, 0xe1, 0xde, 0xff}, color.NRGBA{0xff, 0xa8, 0xa6, 0xff}
		p.blankBG = color.NRGBA{0x80, 0x80, 0x80, 0x18}
		p.dim = color.NRGBA{0x65, 0x6d, 0x76, 0xb0}
		p.selBG, p.selTint, p.cursorBG = primary(0x70), primary(0x18), primary(0x0c)
		p.syntax = styles.Get("github")
	}
	return p
}

// token is the colour of a syntax class, or the plain text colour.
func (p *diffPalette) token(t chroma.TokenType) color.Color {
	if c, ok := p.cache[t]; ok {
		return c
	}
	c := p.fg
	if e := p.syntax.Get(t); e.Colour.IsSet() && t != chroma.Text && t != chroma.TextWhitespace {
		c = color.NRGBA{e.Colour.Red(), e.Colour.Green(), e.Colour.Blue(), 0xff}
	}
	p.cache[t] = c
	return c
}

func luminance(c color.Color) float64 {
	r, g, b, _ := c.RGBA()
	return (0.2126*float64(r) + 0.7152*float64(g) + 0.0722*float64(b)) / 0xffff
}
