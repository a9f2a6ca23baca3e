//go:build !unix

package diskfree

func bytes(string) int64 { return -1 }
