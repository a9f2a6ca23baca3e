package semantic

import (
	"context"
	"slices"
	"strings"
)

// The grammars are github.com/smacker/go-tree-sitter's, pinned, compiled
// to WebAssembly by scripts/build-parsers (wasm.go runs them): tree-sitter's
// own Go bindings (github.com/tree-sitter/go-tree-sitter) need one module
// per grammar, and those modules are not all served by the Go module
// proxy; smacker's module is, with every grammar's sources in it.
func init() {
	for _, g := range grammars {
		setReader(g.name, func(ctx context.Context, src []byte) ([]decl, bool, func(), error) {
			return readTree(ctx, g.file, g.walk, g.sep, g.syn, src)
		}, func() error { return parsers.ready(g.file) })
	}
}

// grammars are the languages read through tree-sitter: the module in
// wasm/ (file), the walker, how a holder's name joins its member's.
var grammars = []struct {
	name, file string
	walk       walker
	sep        string
	syn        *syntax
}{
	{"Python", "python.wasm", walkPython, ".", pythonSyntax},
	{"JavaScript", "javascript.wasm", walkJS, ".", jsSyntax},
	{"TypeScript", "typescript.wasm", walkJS, ".", jsSyntax},
	{"TSX", "tsx.wasm", walkJS, ".", jsSyntax},
	{"Rust", "rust.wasm", walkRust, "::", rustSyntax},
	{"Java", "java.wasm", walkJava, ".", javaSyntax},
	{"C", "c.wasm", walkC, ".", cSyntax},
	{"C++", "cpp.wasm", walkC, "::", cSyntax},
}

// syntax says, for one grammar, what of a file is not code of its own
// when the code outside every declaration is read (see loose): the nodes
// left out whole (imports), and the wrappers, nodes whose own words are
// left out while the declarations they hold are read (an impl block, a
// namespace, `export` before a declaration, `const` before its
// declarators).
type syntax struct {
	// skip are node types left out whole.
	skip []string
	// wrappers are node types whose own tokens are left out: only their
	// named children are read, less those in the fields, or of the
	// types, listed.
	wrappers map[string][]string
	// docString reports whether an expression statement is a lone
	// string (Python's docstrings), left out like a comment.
	docString bool
}

var (
	pythonSyntax = &syntax{
		skip:      []string{"import_statement", "import_from_statement", "future_import_statement"},
		docString: true,
	}
	jsSyntax = &syntax{
		skip: []string{"import_statement", "hash_bang_line"},
		wrappers: map[string][]string{
			"lexical_declaration": nil, "variable_declaration": nil,
			"export_statement":    {"source"}, // only with a declaration: see wrapperOf
			"ambient_declaration": nil,
		},
	}
	rustSyntax = &syntax{
		skip: []string{"use_declaration", "extern_crate_declaration"},
		wrappers: map[string][]string{
			"impl_item": {"type", "trait", "type_parameters", "where_clause"}, "declaration_list": nil,
		},
	}
	javaSyntax = &syntax{
		skip: []string{"package_declaration", "import_declaration"},
	}
	cSyntax = &syntax{
		skip: []string{"preproc_include", "using_declaration"},
		wrappers: map[string][]string{
			"namespace_definition": {"name"}, "linkage_specification": {"value"}, "declaration_list": nil,
			"preproc_if": {"condition"}, "preproc_ifdef": {"name"}, "preproc_else": nil,
			"preproc_elif": {"condition"}, "preproc_elifdef": {"name"},
		},
	}
)

// walker reads the declarations directly under n (a file, a class body, a
// namespace ...) into r, prefix naming what holds them.
type walker func(r *walkState, n *node, prefix string, depth int)

// walkState is one side being read.
type walkState struct {
	ctx context.Context
	src []byte
	c   collector
	// sep joins a holder's name and a member's: "." or "::".
	sep string
	syn *syntax
	// covered are the spans of the declarations read: the code outside
	// them is what loose reads.
	covered map[[2]uint32]bool
}

// readTree parses src with the grammar in file and reads its
// declarations; their tokens are read from the tree, a Go copy of the
// parser's (release is nil: nothing outlives the parse in the module).
func readTree(ctx context.Context, file string, walk walker, sep string, syn *syntax, src []byte) (_ []decl, _ bool, release func(), _ error) {
	tree, err := parsers.parse(ctx, file, src)
	if err != nil {
		return nil, false, nil, err
	}
	return readDecls(ctx, tree, walk, sep, syn, src)
}

// readDecls reads the declarations of tree, src's.
func readDecls(ctx context.Context, tree *tree, walk walker, sep string, syn *syntax, src []byte) (_ []decl, _ bool, release func(), _ error) {
	root := tree.root()
	r := &walkState{ctx: ctx, src: src, sep: sep, syn: syn, covered: map[[2]uint32]bool{}}
	walk(r, root, "", 0)
	if err := ctx.Err(); err != nil {
		return nil, false, nil, err
	}
	// The code outside every declaration (Python's `if __name__ ==
	// "__main__":`, a script's statements, a JavaScript module's calls) is
	// one more declaration, first in the file.
	top := r.loose(ctx, root)
	if err := ctx.Err(); err != nil {
		return nil, false, nil, err
	}
	if len(top) > 0 {
		r.c.decls = append([]decl{topLevelDecl(top)}, r.c.decls...)
	}
	ds, clean, err := r.c.result(!root.HasError())
	if err != nil {
		return nil, false, nil, err
	}
	return ds, clean, nil, nil
}

// children calls fn for each named child of n, walking them with a
// cursor (NamedChild(i) walks i siblings: quadratic over a file's
// thousands of statements).
func children(n *node, fn func(*node)) {
	if n == nil {
		return
	}
	cur := newCursor(n)
	for ok := cur.GoToFirstChild(); ok; ok = cur.GoToNextSibling() {
		if ch := cur.CurrentNode(); ch != nil && ch.IsNamed() {
			fn(ch)
		}
	}
}

func (r *walkState) text(n *node) string {
	if n == nil {
		return ""
	}
	return n.Content(r.src)
}

// join names a member of holder prefix.
func (r *walkState) join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + r.sep + name
}

// tokens are the leaf tokens of n, comments left out, skipping the
// subtree skip (the body, when reading a signature).
func (r *walkState) tokens(n, skip *node) []string {
	if n == nil {
		return nil
	}
	var from, to uint32
	if skip != nil {
		from, to = skip.StartByte(), skip.EndByte()
	}
	var out []string
	cur := newCursor(n)
	for {
		x := cur.CurrentNode()
		inSkip := to > from && x.StartByte() >= from && x.EndByte() <= to
		descend := false
		if !inSkip && !strings.Contains(x.Type(), "comment") {
			if x.ChildCount() == 0 {
				if t := x.Content(r.src); t != "" {
					out = append(out, t)
				}
			} else {
				descend = cur.GoToFirstChild()
			}
		}
		if descend {
			continue
		}
		for !cur.GoToNextSibling() {
			if !cur.GoToParent() {
				return out
			}
		}
	}
}

// emit adds the declaration n named name (simple, the name alone), with
// its signature everything of n before body and its body body (nil for a
// declaration without one: then all of n is its body).
func (r *walkState) emit(kind Kind, n *node, prefix, simple string, body, params *node) {
	if simple == "" || r.ctx.Err() != nil {
		return
	}
	d := decl{kind: kind, name: r.join(prefix, simple), simple: simple, line: int(n.StartPoint().Row) + 1}
	r.covered[[2]uint32{n.StartByte(), n.EndByte()}] = true
	text := func(from, to uint32) string { return string(r.src[from:to]) }
	switch {
	case body != nil && container(kind):
		// Its members are declarations of their own: the holder is
		// compared by its header and by the code of its body outside
		// them (a Java static block, a statement in a Python class).
		// Read once the walk is over, when every member is covered.
		d.sigText, d.bodyText = text(n.StartByte(), body.StartByte()), text(body.StartByte(), body.EndByte())
		d.lex = func() ([]string, []string) { return r.tokens(n, body), r.loose(context.Background(), body) }
	case body != nil:
		d.sigText, d.bodyText = text(n.StartByte(), body.StartByte()), text(body.StartByte(), body.EndByte())
		d.lex = func() ([]string, []string) { return r.tokens(n, body), r.tokens(body, nil) }
	case kind == Function || kind == Method:
		d.sigText = text(n.StartByte(), n.EndByte()) // a prototype: all signature
		d.lex = func() ([]string, []string) { return r.tokens(n, nil), nil }
	default:
		d.bodyText = text(n.StartByte(), n.EndByte())
		d.lex = func() ([]string, []string) { return nil, r.tokens(n, nil) }
	}
	children(params, func(p *node) {
		if name := r.paramName(p); name != "" {
			d.params = append(d.params, name)
		}
	})
	r.c.add(d)
}

// container reports whether a declaration of kind holds declarations
// read on their own (a class's methods, a module's functions).
func container(k Kind) bool {
	return k == Class || k == Trait || k == Module || k == Struct
}

// paramName is the name a parameter node binds, found through the fields
// grammars use for it, else its first identifier.
func (r *walkState) paramName(p *node) string {
	if strings.Contains(p.Type(), "comment") {
		return ""
	}
	for depth := 0; p != nil && depth < 8; depth++ {
		switch p.Type() {
		case "identifier":
			return r.text(p)
		case "self_parameter", "self":
			return "self"
		}
		next := (*node)(nil)
		for _, f := range []string{"name", "pattern", "declarator", "left"} {
			if next = p.ChildByFieldName(f); next != nil {
				break
			}
		}
		if next == nil {
			next = firstOfType(p, "identifier", 4)
			if next == nil {
				return ""
			}
		}
		p = next
	}
	return ""
}

// firstOfType finds the first descendant of n of type typ, looking at
// most depth levels down.
func firstOfType(n *node, typ string, depth int) *node {
	if n == nil || depth < 0 {
		return nil
	}
	for i := 0; i < int(n.NamedChildCount()); i++ {
		ch := n.NamedChild(i)
		if ch == nil {
			continue
		}
		if ch.Type() == typ {
			return ch
		}
		if found := firstOfType(ch, typ, depth-1); found != nil {
			return found
		}
	}
	return nil
}

// name is the text of n's name field.
func (r *walkState) name(n *node) string { return r.text(n.ChildByFieldName("name")) }

func walkPython(r *walkState, n *node, prefix string, depth int) {
	if depth > maxDepth {
		return
	}
	children(n, func(ch *node) {
		outer := ch
		if ch.Type() == "decorated_definition" {
			if def := ch.ChildByFieldName("definition"); def != nil {
				ch = def
			}
		}
		switch ch.Type() {
		case "function_definition":
			kind := Function
			if prefix != "" {
				kind = Method
			}
			r.emit(kind, outer, prefix, r.name(ch), ch.ChildByFieldName("body"), ch.ChildByFieldName("parameters"))
		case "class_definition":
			name := r.name(ch)
			body := ch.ChildByFieldName("body")
			r.emit(Class, outer, prefix, name, body, nil)
			walkPython(r, body, r.join(prefix, name), depth+1)
		case "expression_statement":
			// NAME = value at module or class level.
			a := ch.NamedChild(0)
			if a == nil || a.Type() != "assignment" {
				return
			}
			left := a.ChildByFieldName("left")
			if left == nil || left.Type() != "identifier" {
				return
			}
			name := r.text(left)
			kind := Variable
			if prefix != "" {
				kind = Field
			} else if isUpper(name) {
				kind = Constant
			}
			r.emit(kind, ch, prefix, name, nil, nil)
		case "if_statement", "try_statement", "block", "else_clause", "elif_clause", "except_clause", "finally_clause":
			// Definitions under `if TYPE_CHECKING:` or `try: import`.
			if prefix == "" {
				walkPython(r, ch, prefix, depth+1)
			}
		}
	})
}

func isUpper(s string) bool {
	return strings.ToUpper(s) == s && strings.ToLower(s) != s
}

func walkJS(r *walkState, n *node, prefix string, depth int) {
	if depth > maxDepth {
		return
	}
	children(n, func(ch *node) { jsDecl(r, ch, ch, prefix, depth) })
}

// jsDecl reads one JavaScript or TypeScript declaration ch, outer being
// what holds it whole (an export statement).
func jsDecl(r *walkState, ch, outer *node, prefix string, depth int) {
	switch ch.Type() {
	case "export_statement":
		if d := ch.ChildByFieldName("declaration"); d != nil {
			jsDecl(r, d, d, prefix, depth)
		}
	case "ambient_declaration":
		// declare function f(): void; declare const x: number; ...
		children(ch, func(d *node) { jsDecl(r, d, d, prefix, depth) })
	case "function_declaration", "generator_function_declaration", "function_signature":
		r.emit(Function, outer, prefix, r.name(ch), ch.ChildByFieldName("body"), ch.ChildByFieldName("parameters"))
	case "class_declaration", "abstract_class_declaration":
		jsClass(r, ch, outer, prefix, r.name(ch))
	case "interface_declaration":
		r.emit(Interface, outer, prefix, r.name(ch), nil, nil)
	case "type_alias_declaration":
		r.emit(Type, outer, prefix, r.name(ch), nil, nil)
	case "enum_declaration":
		r.emit(Enum, outer, prefix, r.name(ch), nil, nil)
	case "internal_module", "module":
		name := r.name(ch)
		r.emit(Module, outer, prefix, name, ch.ChildByFieldName("body"), nil)
		walkJS(r, ch.ChildByFieldName("body"), r.join(prefix, name), depth+1)
	case "lexical_declaration", "variable_declaration":
		constant := strings.HasPrefix(r.text(ch), "const")
		children(ch, func(v *node) {
			if v.Type() != "variable_declarator" {
				return
			}
			nameNode := v.ChildByFieldName("name")
			if nameNode == nil || nameNode.Type() != "identifier" {
				return
			}
			name := r.text(nameNode)
			val := v.ChildByFieldName("value")
			if val != nil {
				switch val.Type() {
				case "arrow_function", "function", "function_expression", "generator_function":
					params := val.ChildByFieldName("parameters")
					if params == nil {
						params = val.ChildByFieldName("parameter")
						if params != nil {
							// x => ...: the lone parameter is the list.
							r.emitWithParam(v, prefix, name, val.ChildByFieldName("body"), r.text(params))
							return
						}
					}
					r.emit(Function, v, prefix, name, val.ChildByFieldName("body"), params)
					return
				case "class":
					jsClass(r, val, v, prefix, name)
					return
				}
			}
			kind := Variable
			if constant {
				kind = Constant
			}
			r.emit(kind, v, prefix, name, nil, nil)
		})
	}
}

// jsClass reads a class and its members.
func jsClass(r *walkState, ch, outer *node, prefix, name string) {
	body := ch.ChildByFieldName("body")
	r.emit(Class, outer, prefix, name, body, nil)
	children(body, func(m *node) {
		switch m.Type() {
		case "method_definition", "method_signature", "abstract_method_signature":
			r.emit(Method, m, r.join(prefix, name), r.name(m), m.ChildByFieldName("body"), m.ChildByFieldName("parameters"))
		case "public_field_definition", "field_definition":
			prop := m.ChildByFieldName("name")
			if prop == nil {
				prop = m.ChildByFieldName("property")
			}
			r.emit(Field, m, r.join(prefix, name), r.text(prop), nil, nil)
		}
	})
}

// emitWithParam adds a function whose only parameter is named param.
func (r *walkState) emitWithParam(n *node, prefix, name string, body *node, param string) {
	before := len(r.c.decls)
	r.emit(Function, n, prefix, name, body, nil)
	if len(r.c.decls) > before {
		r.c.decls[len(r.c.decls)-1].params = []string{cleanName(param)}
	}
}

func walkRust(r *walkState, n *node, prefix string, depth int) {
	if depth > maxDepth {
		return
	}
	// Attributes (#[derive(Debug)], #[cfg(test)]) are siblings of the
	// item they qualify: they become part of its signature.
	var attrs []*node
	children(n, func(ch *node) {
		if ch.Type() == "attribute_item" {
			attrs = append(attrs, ch)
			return
		}
		before := len(r.c.decls)
		defer func() {
			if len(r.c.decls) > before {
				r.attach(&r.c.decls[before], attrs)
			}
			attrs = nil
		}()
		switch ch.Type() {
		case "function_item", "function_signature_item":
			kind := Function
			if prefix != "" && !strings.HasSuffix(prefix, "!mod") {
				kind = Method
			}
			r.emit(kind, ch, modPrefix(prefix), r.name(ch), ch.ChildByFieldName("body"), ch.ChildByFieldName("parameters"))
		case "struct_item", "union_item":
			r.emit(Struct, ch, modPrefix(prefix), r.name(ch), nil, nil)
		case "enum_item":
			r.emit(Enum, ch, modPrefix(prefix), r.name(ch), nil, nil)
		case "type_item":
			r.emit(Type, ch, modPrefix(prefix), r.name(ch), nil, nil)
		case "const_item", "static_item":
			r.emit(Constant, ch, modPrefix(prefix), r.name(ch), nil, nil)
		case "macro_definition":
			r.emit(Macro, ch, modPrefix(prefix), r.name(ch), nil, nil)
		case "trait_item":
			name := r.name(ch)
			body := ch.ChildByFieldName("body")
			r.emit(Trait, ch, modPrefix(prefix), name, body, nil)
			walkRust(r, body, r.join(modPrefix(prefix), name), depth+1)
		case "impl_item":
			typ := r.text(ch.ChildByFieldName("type"))
			if tr := ch.ChildByFieldName("trait"); tr != nil {
				typ = "<" + typ + " as " + r.text(tr) + ">"
			}
			walkRust(r, ch.ChildByFieldName("body"), r.join(modPrefix(prefix), typ), depth+1)
		case "mod_item":
			name := r.name(ch)
			body := ch.ChildByFieldName("body")
			if body == nil {
				return
			}
			r.emit(Module, ch, modPrefix(prefix), name, body, nil)
			walkRust(r, body, r.join(modPrefix(prefix), name)+"!mod", depth+1)
		}
	})
}

// attach makes attributes read before a declaration part of its
// signature, and no longer code of their own.
func (r *walkState) attach(d *decl, attrs []*node) {
	if len(attrs) == 0 {
		return
	}
	var text strings.Builder
	for _, a := range attrs {
		r.covered[[2]uint32{a.StartByte(), a.EndByte()}] = true
		text.WriteString(r.text(a))
		text.WriteByte('\n')
	}
	d.sigText = text.String() + d.sigText
	lex := d.lex
	d.lex = func() (sig, body []string) {
		for _, a := range attrs {
			sig = append(sig, r.tokens(a, nil)...)
		}
		if lex != nil {
			s, b := lex()
			sig, body = append(sig, s...), b
		}
		return sig, body
	}
}

// modPrefix strips the mark that a Rust prefix names a module (whose
// functions are functions) rather than a type or trait (methods).
func modPrefix(p string) string { return strings.TrimSuffix(p, "!mod") }

func walkJava(r *walkState, n *node, prefix string, depth int) {
	if depth > maxDepth {
		return
	}
	children(n, func(ch *node) {
		switch ch.Type() {
		case "class_declaration", "interface_declaration", "enum_declaration", "record_declaration", "annotation_type_declaration":
			kind := map[string]Kind{"interface_declaration": Interface, "enum_declaration": Enum, "annotation_type_declaration": Interface}[ch.Type()]
			if kind == "" {
				kind = Class
			}
			name := r.name(ch)
			body := ch.ChildByFieldName("body")
			r.emit(kind, ch, prefix, name, body, nil)
			walkJava(r, body, r.join(prefix, name), depth+1)
		case "enum_body_declarations":
			walkJava(r, ch, prefix, depth+1)
		case "method_declaration", "constructor_declaration", "compact_constructor_declaration", "annotation_type_element_declaration":
			r.emit(Method, ch, prefix, r.name(ch), ch.ChildByFieldName("body"), ch.ChildByFieldName("parameters"))
		case "field_declaration", "constant_declaration":
			children(ch, func(v *node) {
				if v.Type() == "variable_declarator" {
					r.emit(Field, ch, prefix, r.name(v), nil, nil)
				}
			})
		}
	})
}

// walkC reads C and C++: functions, prototypes where no definition is
// given, structs, unions, enums, classes, typedefs, macros and globals,
// inside namespaces, templates, extern "C" blocks and preprocessor
// conditionals.
func walkC(r *walkState, n *node, prefix string, depth int) {
	if depth > maxDepth {
		return
	}
	defined := map[string]bool{}
	var protos []func()
	children(n, func(ch *node) {
		outer := ch
		for ch.Type() == "template_declaration" {
			var inner *node
			children(ch, func(x *node) {
				switch x.Type() {
				case "function_definition", "class_specifier", "struct_specifier", "declaration", "alias_declaration", "template_declaration":
					inner = x
				}
			})
			if inner == nil {
				return
			}
			ch = inner
		}
		switch ch.Type() {
		case "function_definition":
			fd := functionDeclarator(ch.ChildByFieldName("declarator"))
			name := r.declName(fd)
			if name == "" {
				return
			}
			defined[name] = true
			kind := Function
			if prefix != "" && !strings.HasSuffix(prefix, "!ns") || strings.Contains(name, "::") {
				kind = Method
			}
			r.emit(kind, outer, nsPrefix(prefix), name, ch.ChildByFieldName("body"), fd.ChildByFieldName("parameters"))
		case "declaration", "field_declaration":
			// A prototype, a global, or a type declared in passing.
			r.cSpecifier(ch.ChildByFieldName("type"), outer, prefix, depth)
			children(ch, func(d *node) {
				switch d.Type() {
				case "function_declarator":
					name := r.declName(d)
					if name == "" {
						return
					}
					kind := Function
					if prefix != "" && !strings.HasSuffix(prefix, "!ns") {
						kind = Method
					}
					protos = append(protos, func() {
						if !defined[name] {
							r.emit(kind, outer, nsPrefix(prefix), name, nil, d.ChildByFieldName("parameters"))
						}
					})
				case "init_declarator", "identifier", "field_identifier", "pointer_declarator", "array_declarator":
					if fd := functionDeclarator(d); fd != nil {
						return
					}
					name := r.declName(d)
					kind := Variable
					if ch.Type() == "field_declaration" {
						kind = Field
					}
					r.emit(kind, outer, nsPrefix(prefix), name, nil, nil)
				}
			})
		case "type_definition":
			r.cSpecifier(ch.ChildByFieldName("type"), nil, prefix, depth)
			children(ch, func(d *node) {
				if d.Type() == "type_identifier" || d.Type() == "pointer_declarator" || d.Type() == "function_declarator" {
					if name := r.declName(d); name != "" {
						r.emit(Type, outer, nsPrefix(prefix), name, nil, nil)
					}
				}
			})
		case "alias_declaration":
			r.emit(Type, outer, nsPrefix(prefix), r.name(ch), nil, nil)
		case "struct_specifier", "union_specifier", "enum_specifier", "class_specifier":
			r.cSpecifier(ch, outer, prefix, depth)
		case "preproc_def", "preproc_function_def":
			r.emit(Macro, ch, nsPrefix(prefix), r.name(ch), nil, ch.ChildByFieldName("parameters"))
		case "namespace_definition":
			name := r.name(ch)
			if name == "" {
				name = "(anonymous)"
			}
			walkC(r, ch.ChildByFieldName("body"), r.join(nsPrefix(prefix), name)+"!ns", depth+1)
		case "linkage_specification", "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef", "declaration_list":
			// The alternative branch is a named child: walked in turn.
			walkC(r, ch, prefix, depth+1)
		}
	})
	for _, p := range protos {
		p()
	}
}

// cSpecifier reads a struct, union, enum or class given with a body, and
// the members of a class or struct.
func (r *walkState) cSpecifier(spec, outer *node, prefix string, depth int) {
	if spec == nil {
		return
	}
	kind, ok := map[string]Kind{"struct_specifier": Struct, "union_specifier": Struct, "enum_specifier": Enum, "class_specifier": Class}[spec.Type()]
	body := spec.ChildByFieldName("body")
	if !ok || body == nil {
		return
	}
	name := r.name(spec)
	if name == "" {
		return // anonymous: a typedef names it
	}
	if outer == nil || outer.Type() != spec.Type() && outer.Type() != "template_declaration" {
		outer = spec
	}
	if kind == Enum {
		r.emit(kind, outer, nsPrefix(prefix), name, nil, nil)
		return
	}
	r.emit(kind, outer, nsPrefix(prefix), name, body, nil)
	{
		walkC(r, body, r.join(nsPrefix(prefix), name), depth+1)
	}
}

// nsPrefix strips the mark that a C++ prefix names a namespace (whose
// functions are functions) rather than a class (methods).
func nsPrefix(p string) string { return strings.TrimSuffix(p, "!ns") }

// functionDeclarator finds the function_declarator in a declarator chain
// (pointer, reference, parenthesized).
func functionDeclarator(d *node) *node {
	for i := 0; d != nil && i < 16; i++ {
		if d.Type() == "function_declarator" {
			return d
		}
		d = d.ChildByFieldName("declarator")
	}
	return nil
}

// declName is the name a C or C++ declarator declares: an identifier, a
// qualified name (Class::method), an operator or a destructor.
func (r *walkState) declName(d *node) string {
	for i := 0; d != nil && i < 16; i++ {
		switch d.Type() {
		case "identifier", "field_identifier", "type_identifier", "qualified_identifier", "destructor_name", "operator_name", "primitive_type":
			return r.text(d)
		}
		next := d.ChildByFieldName("declarator")
		if next == nil {
			next = d.NamedChild(0)
		}
		d = next
	}
	return ""
}

// loose lists the tokens under n outside every declaration read (the
// covered spans), leaving out comments, docstrings, imports and the
// wrappers' own words: the code a summary of declarations would miss. It
// walks the tree with one cursor (a node's i-th child is found by walking
// its siblings, so indexing them would be quadratic on a file of many
// statements), and gives up, returning nil, when ctx ends (a file of
// nothing but statements is a walk over every node).
func (r *walkState) loose(ctx context.Context, n *node) []string {
	var out []string
	cur := newCursor(n)
	// up holds, per level above the cursor, what its wrapper leaves out,
	// or wrapper false.
	type level struct {
		wrapper bool
		drop    []string
	}
	var up []level
	for visited := 0; ; visited++ {
		if visited%1024 == 1023 && ctx.Err() != nil {
			return nil
		}
		x := cur.CurrentNode()
		typ := x.Type()
		take := true
		if k := len(up); k > 0 && up[k-1].wrapper {
			drop := up[k-1].drop
			take = x.IsNamed() && !slices.Contains(drop, typ) && (len(drop) == 0 || !slices.Contains(drop, cur.CurrentFieldName()))
		}
		if take {
			from, to := x.StartByte(), x.EndByte()
			switch {
			case r.covered[[2]uint32{from, to}] || r.ignored(x, typ):
			case x.ChildCount() == 0:
				if from < to && int(to) <= len(r.src) {
					out = append(out, string(r.src[from:to]))
				}
			case cur.GoToFirstChild():
				drop, wrapper := r.wrapperOf(x, typ)
				up = append(up, level{wrapper, drop})
				continue
			}
		}
		for !cur.GoToNextSibling() {
			if len(up) == 0 || !cur.GoToParent() {
				return out
			}
			up = up[:len(up)-1]
		}
	}
}

// ignored reports whether x, of type typ, is left out of the code whole:
// a comment, an import, a docstring.
func (r *walkState) ignored(x *node, typ string) bool {
	if strings.Contains(typ, "comment") || slices.Contains(r.syn.skip, typ) {
		return true
	}
	if r.syn.docString && typ == "expression_statement" && x.NamedChildCount() == 1 {
		return x.NamedChild(0).Type() == "string"
	}
	return false
}

// wrapperOf says whether x, of type typ, is a wrapper, and which of its
// fields and child types to leave out with its own words.
func (r *walkState) wrapperOf(x *node, typ string) (drop []string, ok bool) {
	drop, ok = r.syn.wrappers[typ]
	if ok && typ == "export_statement" && x.ChildByFieldName("declaration") == nil {
		return nil, false // export { a, b }, export default expr: code
	}
	return drop, ok
}
