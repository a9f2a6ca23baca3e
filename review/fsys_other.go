//go:build !unix

package review

import (
	"errors"
	"io/fs"
)

const noFollow = 0

var errSyncUnsupported = errors.ErrUnsupported

// umask is not a notion here: the usual 022 is assumed.
func umask() fs.FileMode { return defaultUmask }
