//go:build !(darwin && cgo)

package cli

import "context"

// macHost is nil away from a Mac, and on a Mac build without cgo (which
// has no VM backend, as doctor reports).
func macHost(context.Context) *macReport { return nil }
