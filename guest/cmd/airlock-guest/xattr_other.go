//go:build !linux

package main

// osXattrs reads no attributes: the guest binary runs on Linux only; this
// keeps the package building everywhere for vet.
type osXattrs struct{}

func (osXattrs) List(string) ([]string, error)      { return nil, nil }
func (osXattrs) Get(string, string) ([]byte, error) { return nil, nil }
