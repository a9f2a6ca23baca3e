//go:build !unix

package manifest

const openFlags = 0
