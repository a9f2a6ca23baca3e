package gui

import (
	"fmt"
	"image/color"
	"math"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/review"
)

// codeRow is one row of a codeView: a line in the unified view (left
// only), or a baseline line beside the agent's in the side-by-side view
// (either may be nil: that side is blank).
type codeRow struct{ left, right *diffLine }

// codeView draws rows of a diff in a monospace font: line numbers, a +/−
// mark, the line's background, its changed words and its syntax colours.
// Long lines wrap at the view's width, so no line can widen the window;
// every background is drawn before any text, so nothing covers the
// descent of the row above (underscores stay whole).
type codeView struct {
	widget.BaseWidget
	rows  []codeRow
	split bool
	pal   *diffPalette
	// dimmed fades the text: the hunk is rejected and will not be applied.
	dimmed bool
	// digits is the width of the line numbers, in characters.
	digits int
	// onNumber, if set, is called when a line number is clicked, extend
	// set when Shift was held.
	onNumber func(l *diffLine, extend bool)
	// selected, if set, says which lines are highlighted as the subject
	// of the comment being written.
	selected func(l *diffLine) bool
	// hint is the width the view is expected to get, for its height
	// before it is laid out.
	hint float32
}

// noEOLMark follows the last line of a file without a final newline.
const noEOLMark = " ⏎ no newline at end of file"

func newCodeView(rows []codeRow, split bool, pal *diffPalette, digits int) *codeView {
	v := &codeView{rows: rows, split: split, pal: pal, digits: max(digits, 3)}
	v.ExtendBaseWidget(v)
	return v
}

// cell is the size of one character, and the height of a row.
func (v *codeView) cell() (fyne.Size, float32) {
	size := v.Theme().Size(theme.SizeNameText)
	c := fyne.MeasureText("M", size, fyne.TextStyle{Monospace: true})
	return c, float32(math.Ceil(float64(c.Height))) + 3
}

// gutter is the width in characters before a pane's text: the numbers
// and the mark.
func (v *codeView) gutter() int {
	if v.split {
		return v.digits + 3 // "123 + "
	}
	return 2*v.digits + 4 // "123 124 + "
}

// cols is how many characters of text fit in a pane at width w.
func (v *codeView) cols(w float32) int {
	c, _ := v.cell()
	pane := w
	if v.split {
		pane = w / 2
	}
	return max(int(pane/c.Width)-v.gutter()-1, 16)
}

// wrappedRows is how many rows a line takes when wrapped at cols.
func wrappedRows(l *diffLine, cols int) int {
	if l == nil {
		return 1
	}
	n := len(l.text)
	if l.noEOL {
		n += len([]rune(noEOLMark))
	}
	return max((n+cols-1)/cols, 1)
}

// heights is the number of rows each codeRow takes at width w.
func (v *codeView) heights(w float32) []int {
	cols := v.cols(w)
	out := make([]int, len(v.rows))
	for i, r := range v.rows {
		out[i] = wrappedRows(r.left, cols)
		if v.split {
			out[i] = max(out[i], wrappedRows(r.right, cols))
		}
	}
	return out
}

func (v *codeView) MinSize() fyne.Size {
	v.ExtendBaseWidget(v)
	c, rowH := v.cell()
	n := 0
	w := v.Size().Width
	if w == 0 {
		w = v.hint
	}
	for _, h := range v.heights(w) {
		n += h
	}
	// Never wider than a short line: the text wraps instead.
	minW := float32(v.gutter()+24) * c.Width
	if v.split {
		minW *= 2
	}
	return fyne.NewSize(minW, float32(n)*rowH)
}

// Tapped starts a comment on the line whose number was clicked; with
// Shift held it extends the comment being written to that line.
func (v *codeView) Tapped(ev *fyne.PointEvent) {
	extend := false
	if d, ok := fyne.CurrentApp().Driver().(desktop.Driver); ok {
		extend = d.CurrentKeyModifiers()&fyne.KeyModifierShift != 0
	}
	if l := v.numberAt(ev.Position); l != nil && v.onNumber != nil {
		v.onNumber(l, extend)
	}
}

// numberAt is the line whose number is at p, or nil.
func (v *codeView) numberAt(p fyne.Position) *diffLine {
	c, rowH := v.cell()
	w := v.Size().Width
	y := float32(0)
	for i, h := range v.heights(w) {
		bottom := y + float32(h)*rowH
		if p.Y >= y && p.Y < bottom {
			row, x := v.rows[i], p.X
			l := row.left
			if v.split && x >= w/2 {
				l, x = row.right, x-w/2
			}
			if x < float32(v.gutter())*c.Width {
				return l
			}
			return nil
		}
		y = bottom
	}
	return nil
}

// Text is the view as plain text, a row per line, as it reads on screen
// (without wrapping): for tests and for copying.
func (v *codeView) Text() string {
	var b strings.Builder
	for _, r := range v.rows {
		if v.split {
			fmt.Fprintf(&b, "%s | %s\n", v.paneText(r.left, true), v.paneText(r.right, false))
		} else {
			b.WriteString(v.paneText(r.left, false) + "\n")
		}
	}
	return b.String()
}

func (v *codeView) paneText(l *diffLine, left bool) string {
	if l == nil {
		return strings.Repeat(" ", v.gutter())
	}
	return v.gutterText(l, left) + string(l.text)
}

// gutterText is the numbers and mark before a line: both numbers in the
// unified view, the pane's own in the side-by-side view.
func (v *codeView) gutterText(l *diffLine, left bool) string {
	num := func(n int) string {
		if n == 0 {
			return strings.Repeat(" ", v.digits)
		}
		return fmt.Sprintf("%*d", v.digits, n)
	}
	mark := string(l.kind)
	if !v.split {
		return num(l.old) + " " + num(l.new) + " " + mark + " "
	}
	if left {
		return num(l.old) + " " + mark + " "
	}
	return num(l.new) + " " + mark + " "
}

func (v *codeView) CreateRenderer() fyne.WidgetRenderer {
	v.ExtendBaseWidget(v)
	return &codeRenderer{v: v}
}

type codeRenderer struct {
	v       *codeView
	objects []fyne.CanvasObject
	built   fyne.Size
}

func (r *codeRenderer) Destroy()                     {}
func (r *codeRenderer) Objects() []fyne.CanvasObject { return r.objects }
func (r *codeRenderer) MinSize() fyne.Size           { return r.v.MinSize() }

func (r *codeRenderer) Layout(s fyne.Size) {
	if s != r.built {
		r.build(s)
	}
}

func (r *codeRenderer) Refresh() {
	r.build(r.v.Size())
	canvas.Refresh(r.v)
}

// build makes the view's objects for size s: the backgrounds first, then
// the texts over them.
func (r *codeRenderer) build(s fyne.Size) {
	v := r.v
	r.built = s
	c, rowH := v.cell()
	textSize := v.Theme().Size(theme.SizeNameText)
	cols := v.cols(s.Width)
	var bgs, texts []fyne.CanvasObject
	rect := func(x, y, w, h float32, col color.Color) {
		if col == nil {
			return
		}
		o := canvas.NewRectangle(col)
		o.Move(fyne.NewPos(x, y))
		o.Resize(fyne.NewSize(w, h))
		bgs = append(bgs, o)
	}
	text := func(x, y float32, s string, col color.Color) {
		o := canvas.NewText(s, col)
		o.TextSize = textSize
		o.TextStyle.Monospace = true
		o.Move(fyne.NewPos(x, y+1))
		o.Resize(o.MinSize())
		texts = append(texts, o)
	}
	paneW := s.Width
	if v.split {
		paneW = s.Width / 2
	}
	y := float32(0)
	for i, h := range v.heights(s.Width) {
		row := v.rows[i]
		panes := []*diffLine{row.left}
		if v.split {
			panes = append(panes, row.right)
		}
		for p, l := range panes {
			x0 := float32(p) * paneW
			if l == nil {
				rect(x0, y, paneW, float32(h)*rowH, v.pal.blankBG)
				continue
			}
			lineBG, wordBG := color.Color(nil), color.Color(nil)
			switch l.kind {
			case review.Insert:
				lineBG, wordBG = v.pal.addBG, v.pal.addWord
			case review.Delete:
				lineBG, wordBG = v.pal.delBG, v.pal.delWord
			}
			rect(x0, y, paneW, float32(h)*rowH, lineBG)
			if v.selected != nil && v.selected(l) {
				// The lines a comment is about: the numbers marked, the
				// line tinted over its own colour.
				rect(x0, y, float32(v.gutter()-2)*c.Width, float32(h)*rowH, v.pal.selBG)
				rect(x0, y, paneW, float32(h)*rowH, v.pal.selTint)
			}
			text(x0, y, v.gutterText(l, p == 0), v.pal.num)
			tx := x0 + float32(v.gutter())*c.Width
			// Changed words, then the text in runs of one colour, a row
			// of cols characters at a time.
			for start := 0; start < len(l.text); start += cols {
				end := min(start+cols, len(l.text))
				ry := y + float32(start/cols)*rowH
				for k := start; k < end; {
					if l.changed == nil || !l.changed[k] {
						k++
						continue
					}
					j := k
					for j < end && l.changed[j] {
						j++
					}
					rect(tx+float32(k-start)*c.Width, ry, float32(j-k)*c.Width, rowH, wordBG)
					k = j
				}
				for k := start; k < end; {
					col := r.colour(l, k)
					j := k + 1
					for j < end && r.colour(l, j) == col {
						j++
					}
					if strings.TrimSpace(string(l.text[k:j])) != "" {
						text(tx+float32(k-start)*c.Width, ry, string(l.text[k:j]), col)
					}
					k = j
				}
			}
			if l.noEOL {
				n := len(l.text)
				text(tx+float32(n%cols)*c.Width, y+float32(n/cols)*rowH, noEOLMark, v.pal.num)
			}
		}
		y += float32(h) * rowH
	}
	r.objects = append(bgs, texts...)
}

// colour is the colour of rune k of l.
func (r *codeRenderer) colour(l *diffLine, k int) color.Color {
	if r.v.dimmed {
		return r.v.pal.dim
	}
	if l.syn == nil {
		return r.v.pal.fg
	}
	return r.v.pal.token(l.syn[k])
}
