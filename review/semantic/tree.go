package semantic

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// tree is a syntax tree as a grammar's module laid it out: every node, in
// preorder, with the methods the walkers read (tree-sitter's node API, as
// the walkers used it when tree-sitter ran in-process).
type tree struct {
	nodes []node
	// kids and named hold each node's children, and its named ones, in
	// order: a node's are a window of them.
	kids, named []int32
	// fields are each node's fields, the node each names: a node's are a
	// window of them.
	fields []fieldKid
	g      *grammarNames
	// lookup, when set, finds fields instead: the in-process baseline of
	// the benchmarks asks tree-sitter as the walkers once did.
	lookup func(n *node, field string) *node
}

// fieldKid is a node in a field: a child, or a deeper descendant where
// the field is a hidden node's, inherited.
type fieldKid struct {
	field uint16
	kid   int32
}

// grammarNames are a grammar's symbol and field names, by id.
type grammarNames struct {
	symbols []string
	fields  []string // fields[0] is "": no field
	fieldID map[string]uint16
}

// tree-sitter's symbols for an error node, outside the grammar's table.
const (
	symError       = 0xffff
	symErrorRepeat = 0xfffe
)

// node is one node of a tree.
type node struct {
	t                   *tree
	start, end, row     uint32
	sym, field          uint16
	isNamed, hasError   bool
	idx, parent, pos    int32 // pos: its place among its parent's children
	kidsFrom, kidsN     int32
	namedFrom, namedN   int32
	fieldsFrom, fieldsN int32
}

// point is a position in the source; only rows are read.
type point struct{ Row uint32 }

func (n *node) Type() string {
	switch {
	case int(n.sym) < len(n.t.g.symbols):
		return n.t.g.symbols[n.sym]
	case n.sym == symError:
		return "ERROR"
	default:
		return "_ERROR"
	}
}

func (n *node) IsNamed() bool           { return n.isNamed }
func (n *node) HasError() bool          { return n.hasError }
func (n *node) StartByte() uint32       { return n.start }
func (n *node) EndByte() uint32         { return n.end }
func (n *node) StartPoint() point       { return point{n.row} }
func (n *node) ChildCount() uint32      { return uint32(n.kidsN) }
func (n *node) NamedChildCount() uint32 { return uint32(n.namedN) }

// Content is n's source (decode checked that it lies in src).
func (n *node) Content(src []byte) string {
	if int(n.end) > len(src) {
		return ""
	}
	return string(src[n.start:n.end])
}

// Child is n's i-th child, nil past the last.
func (n *node) Child(i int) *node {
	if i < 0 || i >= int(n.kidsN) {
		return nil
	}
	return &n.t.nodes[n.t.kids[int(n.kidsFrom)+i]]
}

// NamedChild is n's i-th named child, nil past the last.
func (n *node) NamedChild(i int) *node {
	if i < 0 || i >= int(n.namedN) {
		return nil
	}
	return &n.t.nodes[n.t.named[int(n.namedFrom)+i]]
}

// ChildByFieldName is n's child in the field called name, as
// tree-sitter's ts_node_child_by_field_name finds it.
func (n *node) ChildByFieldName(name string) *node {
	if n.t.lookup != nil {
		return n.t.lookup(n, name)
	}
	id, ok := n.t.g.fieldID[name]
	if !ok {
		return nil
	}
	for _, f := range n.t.fields[n.fieldsFrom : n.fieldsFrom+n.fieldsN] {
		if f.field == id {
			return &n.t.nodes[f.kid]
		}
	}
	return nil
}

// cursor walks the subtree under the node it starts at, as tree-sitter's
// tree cursor does.
type cursor struct{ root, at *node }

func newCursor(n *node) *cursor { return &cursor{n, n} }

func (c *cursor) CurrentNode() *node { return c.at }

// CurrentFieldName is the field of the node in its parent; "" at the
// cursor's start.
func (c *cursor) CurrentFieldName() string {
	if c.at == c.root {
		return ""
	}
	return c.at.t.g.fields[c.at.field]
}

func (c *cursor) GoToFirstChild() bool {
	if c.at.kidsN == 0 {
		return false
	}
	c.at = c.at.Child(0)
	return true
}

func (c *cursor) GoToNextSibling() bool {
	if c.at == c.root {
		return false
	}
	next := c.at.t.nodes[c.at.parent].Child(int(c.at.pos) + 1)
	if next == nil {
		return false
	}
	c.at = next
	return true
}

func (c *cursor) GoToParent() bool {
	if c.at == c.root {
		return false
	}
	c.at = &c.at.t.nodes[c.at.parent]
	return true
}

// The sizes of a node's record and of a field's in the module's output
// (wasm/shim.c's struct record and struct field).
const (
	recordSize = 24
	fieldSize  = 16
)

// errBadTree is a module's output that is no tree of the source.
var errBadTree = errors.New("the parser's output is not a tree of the file")

// decodeTree reads a module's records for a source of srcLen bytes. The
// module parsed hostile input: its output is checked as hostile too (every
// id known, every parent before its child, every span inside the source
// and inside its parent's), so that the walkers can index without a
// check.
func decodeTree(recs, fields []byte, srcLen int, g *grammarNames) (*tree, error) {
	if len(recs) == 0 || len(recs)%recordSize != 0 {
		return nil, fmt.Errorf("%w: %d bytes of records", errBadTree, len(recs))
	}
	count := len(recs) / recordSize
	t := &tree{nodes: make([]node, count), g: g}
	le := binary.LittleEndian
	nkids := make([]int32, count)
	nnamed := make([]int32, count)
	for i := range count {
		r := recs[i*recordSize:]
		n := &t.nodes[i]
		n.t, n.idx = t, int32(i)
		n.sym, n.field = le.Uint16(r[0:]), le.Uint16(r[2:])
		flags := le.Uint32(r[4:])
		n.isNamed, n.hasError = flags&1 != 0, flags&2 != 0
		n.start, n.end, n.row = le.Uint32(r[8:]), le.Uint32(r[12:]), le.Uint32(r[16:])
		parent := le.Uint32(r[20:])
		switch {
		case int(n.sym) >= len(g.symbols) && n.sym != symError && n.sym != symErrorRepeat:
			return nil, fmt.Errorf("%w: node %d has symbol %d of %d", errBadTree, i, n.sym, len(g.symbols))
		case int(n.field) >= len(g.fields):
			return nil, fmt.Errorf("%w: node %d has field %d of %d", errBadTree, i, n.field, len(g.fields))
		case n.start > n.end || int64(n.end) > int64(srcLen):
			return nil, fmt.Errorf("%w: node %d spans %d-%d of %d bytes", errBadTree, i, n.start, n.end, srcLen)
		case i == 0 && parent != 0xffffffff, i > 0 && int64(parent) >= int64(i):
			return nil, fmt.Errorf("%w: node %d has parent %d", errBadTree, i, int32(parent))
		}
		if i == 0 {
			n.parent = -1
			continue
		}
		p := &t.nodes[parent]
		if n.start < p.start || n.end > p.end {
			return nil, fmt.Errorf("%w: node %d spans %d-%d outside its parent's %d-%d", errBadTree, i, n.start, n.end, p.start, p.end)
		}
		n.parent, n.pos = int32(parent), nkids[parent]
		nkids[parent]++
		if n.isNamed {
			nnamed[parent]++
		}
	}
	// Each node's children are a window of kids (of named), in order:
	// preorder lists a node's children in order.
	var k, m int32
	for i := range t.nodes {
		n := &t.nodes[i]
		n.kidsFrom, n.namedFrom = k, m
		k += nkids[i]
		m += nnamed[i]
	}
	t.kids, t.named = make([]int32, k), make([]int32, m)
	for i := 1; i < count; i++ {
		n := &t.nodes[i]
		p := &t.nodes[n.parent]
		t.kids[p.kidsFrom+p.kidsN] = int32(i)
		p.kidsN++
		if n.isNamed {
			t.named[p.namedFrom+p.namedN] = int32(i)
			p.namedN++
		}
	}
	if err := t.decodeFields(fields); err != nil {
		return nil, err
	}
	return t, nil
}

// decodeFields reads the fields' records: each names a node, in order,
// and one of its children by span and symbol.
func (t *tree) decodeFields(recs []byte) error {
	if len(recs)%fieldSize != 0 {
		return fmt.Errorf("%w: %d bytes of fields", errBadTree, len(recs))
	}
	le := binary.LittleEndian
	t.fields = make([]fieldKid, 0, len(recs)/fieldSize)
	last := int64(-1)
	for i := 0; i < len(recs); i += fieldSize {
		r := recs[i:]
		parent, field, sym := le.Uint32(r[0:]), le.Uint16(r[4:]), le.Uint16(r[6:])
		start, end := le.Uint32(r[8:]), le.Uint32(r[12:])
		if int64(parent) < last || int64(parent) >= int64(len(t.nodes)) || field == 0 || int(field) >= len(t.g.fields) {
			return fmt.Errorf("%w: field %d of node %d", errBadTree, field, parent)
		}
		n := &t.nodes[parent]
		if int64(parent) != last {
			n.fieldsFrom = int32(len(t.fields))
			last = int64(parent)
		}
		kid := t.find(n, start, end, sym)
		if kid < 0 {
			return fmt.Errorf("%w: field %d of node %d is not under it", errBadTree, field, parent)
		}
		t.fields = append(t.fields, fieldKid{field, kid})
		n.fieldsN++
	}
	return nil
}

// find is the first node under n, in preorder, of span start-end and
// symbol sym, looking only inside the nodes whose span holds it; -1 for
// none.
func (t *tree) find(n *node, start, end uint32, sym uint16) int32 {
	for j := range int(n.kidsN) {
		ch := n.Child(j)
		if ch.start > start || ch.end < end {
			continue
		}
		if ch.start == start && ch.end == end && ch.sym == sym {
			return ch.idx
		}
		if k := t.find(ch, start, end, sym); k >= 0 {
			return k
		}
	}
	return -1
}

func (t *tree) root() *node { return &t.nodes[0] }
