package gui

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
)

// Theme is Airlock's look: fyne's default theme with the few colours
// that hide things changed. In the light variant an input's border
// (which is also the outline of an unchecked box) is #e3e3e3 on white,
// so an unchecked hunk looked like no box at all; it is a mid grey here.
// The desktop app sets it for every window; it follows the light or dark
// variant the user chose (FYNE_THEME or the system's).
func Theme() fyne.Theme { return airlockTheme{} }

type airlockTheme struct{}

var (
	lightInputBorder = color.NRGBA{R: 0x8a, G: 0x8a, B: 0x8a, A: 0xff}
	darkInputBorder  = color.NRGBA{R: 0x6a, G: 0x6a, B: 0x70, A: 0xff}
)

func (airlockTheme) Color(n fyne.ThemeColorName, v fyne.ThemeVariant) color.Color {
	if n == theme.ColorNameInputBorder {
		if v == theme.VariantLight {
			return lightInputBorder
		}
		return darkInputBorder
	}
	return theme.DefaultTheme().Color(n, v)
}

func (airlockTheme) Font(s fyne.TextStyle) fyne.Resource     { return theme.DefaultTheme().Font(s) }
func (airlockTheme) Icon(n fyne.ThemeIconName) fyne.Resource { return theme.DefaultTheme().Icon(n) }
func (airlockTheme) Size(n fyne.ThemeSizeName) float32       { return theme.DefaultTheme().Size(n) }
