package semantic

import (
	"context"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"strings"
)

func init() {
	setReader("Go", readGo, nil)
}

// readGo lists a Go file's top-level declarations with go/parser: functions,
// methods (named Type.Method), types, constants and variables.
func readGo(ctx context.Context, src []byte) ([]decl, bool, func(), error) {
	ds, clean, err := readGoDecls(ctx, src)
	return ds, clean, nil, err
}

func readGoDecls(ctx context.Context, src []byte) ([]decl, bool, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, parser.SkipObjectResolution|parser.ParseComments)
	clean := err == nil
	if f == nil {
		return nil, false, nil
	}
	file := fset.File(f.Pos())
	off := func(p token.Pos) int { return file.Offset(p) }
	text := func(from, to token.Pos) string {
		if !from.IsValid() || !to.IsValid() || from > to {
			return ""
		}
		return string(src[off(from):off(to)])
	}
	// withText gives d its source, sig from..mid and body mid..to, and
	// the lexer of both.
	withText := func(d decl, from, mid, to token.Pos) decl {
		d.sigText, d.bodyText = text(from, mid), text(mid, to)
		d.lex = func() ([]string, []string) { return goTokens([]byte(d.sigText)), goTokens([]byte(d.bodyText)) }
		return d
	}
	line := func(p token.Pos) int { return file.Line(p) }
	var c collector
	// top is what the compiler reads outside the named declarations:
	// directives, the cgo preamble, var _ = f().
	top := goDirectives(f)
	for _, d := range f.Decls {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		switch d := d.(type) {
		case *ast.FuncDecl:
			name, kind := d.Name.Name, Function
			if d.Recv != nil && len(d.Recv.List) > 0 {
				kind = Method
				name = receiverType(d.Recv.List[0].Type) + "." + name
			}
			sigEnd := d.End()
			if d.Body != nil {
				sigEnd = d.Body.Lbrace
			}
			c.add(withText(decl{kind: kind, name: name, simple: d.Name.Name, line: line(d.Pos()), params: goParams(d.Type.Params)},
				d.Pos(), sigEnd, d.End()))
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					kind := Type
					switch s.Type.(type) {
					case *ast.StructType:
						kind = Struct
					case *ast.InterfaceType:
						kind = Interface
					}
					sigEnd := s.Name.End()
					if s.TypeParams != nil {
						sigEnd = s.TypeParams.End()
					}
					c.add(withText(decl{kind: kind, name: s.Name.Name, simple: s.Name.Name, line: line(s.Pos())},
						s.Pos(), sigEnd, s.End()))
				case *ast.ValueSpec:
					kind := Variable
					if d.Tok == token.CONST {
						kind = Constant
					}
					for i, n := range s.Names {
						if n.Name == "_" {
							// var _ = f() runs f, with no name to say.
							if i == 0 || s.Names[i-1].Name != "_" {
								top = append(top, goTokens([]byte(text(s.Pos(), s.End())))...)
							}
							continue
						}
						c.add(withText(decl{kind: kind, name: n.Name, simple: n.Name, line: line(n.Pos())},
							s.Pos(), s.Pos(), s.End()))
					}
				}
			}
		}
	}
	if len(top) > 0 {
		c.decls = append([]decl{topLevelDecl(top)}, c.decls...)
	}
	return c.result(clean)
}

// goDirectives are the comments of f that the Go tools read as code: the
// //go: directives (build constraints, generate commands, linkname,
// embed), //line, //export and the cgo preamble, the C code in the
// comment before import "C".
func goDirectives(f *ast.File) []string {
	var out []string
	for _, g := range f.Comments {
		for _, c := range g.List {
			for _, p := range []string{"//go:", "//line ", "/*line ", "//export ", "//extern ", "// +build", "//+build"} {
				if strings.HasPrefix(c.Text, p) {
					out = append(out, c.Text)
					break
				}
			}
		}
	}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.IMPORT {
			continue
		}
		for _, s := range gd.Specs {
			is := s.(*ast.ImportSpec)
			if is.Path == nil || is.Path.Value != `"C"` {
				continue
			}
			doc := is.Doc
			if doc == nil && !gd.Lparen.IsValid() {
				doc = gd.Doc
			}
			if doc != nil {
				for _, c := range doc.List {
					out = append(out, c.Text)
				}
			}
		}
	}
	return out
}

// receiverType is the type name of a method's receiver: T for T, *T, T[K]
// and *T[K, V].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}

func goParams(fl *ast.FieldList) []string {
	if fl == nil {
		return nil
	}
	var out []string
	for _, f := range fl.List {
		for _, n := range f.Names {
			out = append(out, n.Name)
		}
	}
	return out
}

// goTokens are the Go tokens of src, comments and inserted semicolons left
// out.
func goTokens(src []byte) []string {
	var s scanner.Scanner
	fset := token.NewFileSet()
	s.Init(fset.AddFile("", -1, len(src)), src, func(token.Position, string) {}, 0)
	var out []string
	for {
		_, tok, lit := s.Scan()
		switch {
		case tok == token.EOF:
			return out
		case tok == token.SEMICOLON && lit == "\n":
			continue
		case lit != "":
			out = append(out, lit)
		default:
			out = append(out, tok.String())
		}
	}
}
