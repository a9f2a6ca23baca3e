package gui

import (
	"image/color"
	"io"
	"sync"
	"unicode/utf8"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
	"github.com/hinshun/vt10x"

	"github.com/airlock-dev/airlock/guest/client"
)

// Glyph attributes of vt10x (its constants are unexported).
const (
	vtReverse   = 1 << 0
	vtUnderline = 1 << 1
	vtBold      = 1 << 2
)

// terminal is a terminal widget: a vt10x emulator drawn into a TextGrid.
// The agent's output is written to it (Write, from any goroutine); what
// the user types is read from Input; size changes go out on Resizes, for
// the VM's PTY.
type terminal struct {
	widget.BaseWidget
	grid *widget.TextGrid

	mu      sync.Mutex
	vt      vt10x.Terminal
	partial []byte // an incomplete UTF-8 sequence from the last Write
	cols    int
	rows    int
	pending bool // a redraw is scheduled

	input   *keyInput
	resizes chan client.WindowSize
}

var (
	_ fyne.Focusable      = (*terminal)(nil)
	_ fyne.Tappable       = (*terminal)(nil)
	_ fyne.Shortcutable   = (*terminal)(nil)
	_ desktop.Mouseable   = (*terminal)(nil)
	_ io.Writer           = (*terminal)(nil)
	_ fyne.WidgetRenderer = (*terminalRenderer)(nil)
)

func newTerminal(cols, rows int) *terminal {
	t := &terminal{
		grid:    widget.NewTextGrid(),
		vt:      vt10x.New(vt10x.WithSize(cols, rows)),
		cols:    cols,
		rows:    rows,
		input:   newKeyInput(),
		resizes: make(chan client.WindowSize, 1),
	}
	t.ExtendBaseWidget(t)
	t.redraw()
	return t
}

// TTY is the pseudo-terminal to ask the VM for: this size, and resizes.
func (t *terminal) TTY() *client.TTY {
	t.mu.Lock()
	defer t.mu.Unlock()
	return &client.TTY{Term: "xterm-256color", Rows: t.rows, Cols: t.cols, Resize: t.resizes}
}

// Input is what the user types, for the command's stdin.
func (t *terminal) Input() io.Reader { return t.input }

// Close ends Input.
func (t *terminal) Close() { t.input.Close() }

// Write feeds output to the emulator and schedules a redraw. Safe from
// any goroutine.
func (t *terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	data := append(t.partial, p...)
	// Keep a trailing incomplete rune for the next Write.
	cut := len(data)
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				cut = i
			}
			break
		}
	}
	_, _ = t.vt.Write(data[:cut])
	t.partial = append([]byte(nil), data[cut:]...)
	schedule := !t.pending
	t.pending = true
	t.mu.Unlock()
	if schedule {
		fyne.Do(t.redraw)
	}
	return len(p), nil
}

// Text is the screen as plain text, for tests.
func (t *terminal) Text() string { return t.grid.Text() }

// redraw copies the emulator's screen into the grid. It runs on fyne's
// goroutine.
func (t *terminal) redraw() {
	t.mu.Lock()
	t.pending = false
	t.vt.Lock()
	cols, rows := t.vt.Size()
	cur := t.vt.Cursor()
	showCursor := t.vt.CursorVisible()
	out := make([]widget.TextGridRow, rows)
	for y := range rows {
		cells := make([]widget.TextGridCell, cols)
		for x := range cols {
			g := t.vt.Cell(x, y)
			r := g.Char
			if r == 0 {
				r = ' '
			}
			cells[x] = widget.TextGridCell{Rune: r, Style: glyphStyle(g, showCursor && x == cur.X && y == cur.Y)}
		}
		out[y] = widget.TextGridRow{Cells: cells}
	}
	t.vt.Unlock()
	t.mu.Unlock()
	t.grid.Rows = out
	t.grid.Refresh()
}

// glyphStyle maps a cell's colours and attributes to a TextGrid style.
func glyphStyle(g vt10x.Glyph, cursor bool) widget.TextGridStyle {
	fgc := g.FG
	if g.Mode&vtBold != 0 && fgc < 8 {
		// Bold as bright colours, as xterm does: the monospace font has
		// no bold face in every theme.
		fgc += 8
	}
	fg, bg := vtColor(fgc, true), vtColor(g.BG, false)
	if fg != nil && bg == nil {
		fg = readableOn(fg, theme.Color(theme.ColorNameBackground))
	}
	if fg == nil && bg == nil && g.Mode&(vtReverse|vtUnderline) == 0 && !cursor {
		return nil // the grid's own style: most cells
	}
	if g.Mode&vtReverse != 0 != cursor {
		fg, bg = bg, fg
		if fg == nil {
			fg = theme.Color(theme.ColorNameBackground)
		}
		if bg == nil {
			bg = theme.Color(theme.ColorNameForeground)
		}
	}
	st := &widget.CustomTextGridStyle{FGColor: fg, BGColor: bg}
	st.TextStyle.Underline = g.Mode&vtUnderline != 0
	st.TextStyle.Monospace = true
	return st
}

// readableOn is fg, darkened when it is too light to read on a light
// background bg (xterm's yellow and white on the light theme); as it is
// on a dark one.
func readableOn(fg, bg color.Color) color.Color {
	if luminance(bg) < 0.5 || luminance(fg) < 0.45 {
		return fg
	}
	r, g, b, a := fg.RGBA()
	const keep = 0.4
	return color.NRGBA{uint8(float64(r>>8) * keep), uint8(float64(g>>8) * keep), uint8(float64(b>>8) * keep), uint8(a >> 8)}
}

// ansi16 is the xterm palette of the 16 ANSI colours.
var ansi16 = [16]color.NRGBA{
	{0x00, 0x00, 0x00, 0xff}, {0xcd, 0x31, 0x31, 0xff}, {0x0d, 0xbc, 0x79, 0xff}, {0xe5, 0xe5, 0x10, 0xff},
	{0x24, 0x72, 0xc8, 0xff}, {0xbc, 0x3f, 0xbc, 0xff}, {0x11, 0xa8, 0xcd, 0xff}, {0xe5, 0xe5, 0xe5, 0xff},
	{0x66, 0x66, 0x66, 0xff}, {0xf1, 0x4c, 0x4c, 0xff}, {0x23, 0xd1, 0x8b, 0xff}, {0xf5, 0xf5, 0x43, 0xff},
	{0x3b, 0x8e, 0xea, 0xff}, {0xd6, 0x70, 0xd6, 0xff}, {0x29, 0xb8, 0xdb, 0xff}, {0xff, 0xff, 0xff, 0xff},
}

// vtColor is the colour of c, or nil for the theme's default.
func vtColor(c vt10x.Color, fg bool) color.Color {
	switch {
	case c == vt10x.DefaultFG || c == vt10x.DefaultBG || c == vt10x.DefaultCursor:
		return nil
	case c < 16:
		return ansi16[c]
	case c < 232: // the 6x6x6 cube
		c -= 16
		level := func(v vt10x.Color) uint8 {
			if v == 0 {
				return 0
			}
			return uint8(55 + v*40)
		}
		return color.NRGBA{level(c / 36), level(c / 6 % 6), level(c % 6), 0xff}
	case c < 256: // the grey ramp
		v := uint8(8 + (c-232)*10)
		return color.NRGBA{v, v, v, 0xff}
	}
	// 24-bit colour, as vt10x packs it.
	return color.NRGBA{uint8(c >> 16), uint8(c >> 8), uint8(c), 0xff}
}

// Resize fits the emulator to the widget and tells the VM's PTY.
func (t *terminal) Resize(size fyne.Size) {
	t.BaseWidget.Resize(size)
	cell := fyne.MeasureText("M", theme.TextSize(), fyne.TextStyle{Monospace: true})
	if cell.Width <= 0 || cell.Height <= 0 {
		return
	}
	cols, rows := int(size.Width/cell.Width), int(size.Height/cell.Height)
	if cols < 10 || rows < 2 {
		return
	}
	t.mu.Lock()
	changed := cols != t.cols || rows != t.rows
	t.cols, t.rows = cols, rows
	if changed {
		t.vt.Resize(cols, rows)
	}
	t.mu.Unlock()
	if !changed {
		return
	}
	// The latest size wins: drop a size the run has not taken yet.
	select {
	case <-t.resizes:
	default:
	}
	t.resizes <- client.WindowSize{Rows: rows, Cols: cols}
	t.redraw()
}

func (t *terminal) CreateRenderer() fyne.WidgetRenderer {
	return &terminalRenderer{t: t}
}

func (t *terminal) MinSize() fyne.Size {
	cell := fyne.MeasureText("M", theme.TextSize(), fyne.TextStyle{Monospace: true})
	return fyne.NewSize(cell.Width*20, cell.Height*4)
}

type terminalRenderer struct{ t *terminal }

func (r *terminalRenderer) Layout(s fyne.Size)           { r.t.grid.Resize(s) }
func (r *terminalRenderer) MinSize() fyne.Size           { return r.t.MinSize() }
func (r *terminalRenderer) Refresh()                     { r.t.grid.Refresh() }
func (r *terminalRenderer) Objects() []fyne.CanvasObject { return []fyne.CanvasObject{r.t.grid} }
func (r *terminalRenderer) Destroy()                     {}

func (t *terminal) Tapped(*fyne.PointEvent) {
	if c := fyne.CurrentApp().Driver().CanvasForObject(t); c != nil {
		c.Focus(t)
	}
}

func (t *terminal) MouseDown(*desktop.MouseEvent) { t.Tapped(nil) }
func (t *terminal) MouseUp(*desktop.MouseEvent)   {}

func (t *terminal) FocusGained() {}
func (t *terminal) FocusLost()   {}

func (t *terminal) TypedRune(r rune) { t.input.Write([]byte(string(r))) }

// keySequences are what a VT100/xterm sends for special keys.
var keySequences = map[fyne.KeyName]string{
	fyne.KeyReturn: "\r", fyne.KeyEnter: "\r", fyne.KeyBackspace: "\x7f", fyne.KeyTab: "\t",
	fyne.KeyEscape: "\x1b", fyne.KeyUp: "\x1b[A", fyne.KeyDown: "\x1b[B", fyne.KeyRight: "\x1b[C",
	fyne.KeyLeft: "\x1b[D", fyne.KeyHome: "\x1b[H", fyne.KeyEnd: "\x1b[F", fyne.KeyDelete: "\x1b[3~",
	fyne.KeyPageUp: "\x1b[5~", fyne.KeyPageDown: "\x1b[6~", fyne.KeyInsert: "\x1b[2~",
}

func (t *terminal) TypedKey(e *fyne.KeyEvent) {
	if s, ok := keySequences[e.Name]; ok {
		t.input.Write([]byte(s))
	}
}

// TypedShortcut sends Ctrl+letter as its control character (Ctrl+C
// interrupts the agent), and pastes the clipboard.
func (t *terminal) TypedShortcut(s fyne.Shortcut) {
	switch s := s.(type) {
	case *fyne.ShortcutCopy:
		t.input.Write([]byte{0x03})
	case *fyne.ShortcutPaste:
		if s.Clipboard != nil {
			t.input.Write([]byte(s.Clipboard.Content()))
		}
	case *fyne.ShortcutCut:
		t.input.Write([]byte{0x18})
	case *fyne.ShortcutSelectAll:
		t.input.Write([]byte{0x01})
	case *fyne.ShortcutUndo:
		t.input.Write([]byte{0x1a})
	case *desktop.CustomShortcut:
		if s.Modifier == fyne.KeyModifierControl && len(s.KeyName) == 1 {
			c := s.KeyName[0]
			if c >= 'A' && c <= 'Z' {
				t.input.Write([]byte{c - 'A' + 1})
			}
		}
	}
}

// keyInput is the terminal's input: writes never block (the UI goroutine
// types into it while the VM is still booting); reads wait for data.
type keyInput struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    []byte
	closed bool
}

func newKeyInput() *keyInput {
	k := &keyInput{}
	k.cond = sync.NewCond(&k.mu)
	return k
}

func (k *keyInput) Write(p []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return
	}
	k.buf = append(k.buf, p...)
	k.cond.Broadcast()
}

func (k *keyInput) Read(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for len(k.buf) == 0 && !k.closed {
		k.cond.Wait()
	}
	if len(k.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, k.buf)
	k.buf = k.buf[n:]
	return n, nil
}

func (k *keyInput) Close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	k.cond.Broadcast()
}
