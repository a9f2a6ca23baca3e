//go:build !cgo

package semantic

// Without cgo there are no tree-sitter grammars: only Go files are read,
// and the other languages' summaries say they were skipped.
