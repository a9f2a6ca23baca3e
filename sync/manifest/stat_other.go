//go:build !linux && !darwin

package manifest

import "io/fs"

// statOf reports no stat data: HashCache is not used here.
func statOf(fs.FileInfo) (fileStat, bool) { return fileStat{}, false }
