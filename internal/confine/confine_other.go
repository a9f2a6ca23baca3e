//go:build !linux

package confine

import (
	"fmt"
	"runtime"
)

func process(Rules) (Result, error) {
	return Result{}, fmt.Errorf("%w on %s", ErrUnavailable, runtime.GOOS)
}
