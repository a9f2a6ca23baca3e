//go:build !unix

package review

import "errors"

const noFollow = 0

var errSyncUnsupported = errors.ErrUnsupported
