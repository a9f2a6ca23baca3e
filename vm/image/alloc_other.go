//go:build !unix

package image

import "os"

// allocatedBytes: without st_blocks, a file's size.
func allocatedBytes(fi os.FileInfo) int64 { return fi.Size() }
